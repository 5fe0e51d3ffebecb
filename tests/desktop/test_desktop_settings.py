"""``[desktop]`` settings: apps are argv lists with plain names, the display is local."""

from __future__ import annotations

import pytest

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import DesktopSettings, Settings, load_settings


def test_defaults_are_safe() -> None:
    desktop = Settings().desktop
    assert desktop.apps == {}
    assert desktop.headless is False
    assert str(desktop.python) == "/usr/bin/python3"
    assert desktop.visual_mode == "auto"


@pytest.mark.parametrize("apps", [{"bad name": ["x"]}, {"ok": []}, {"ok": [""]}])
def test_apps_must_be_named_argv_lists(apps: dict[str, list[str]]) -> None:
    with pytest.raises(ValueError, match="app"):
        DesktopSettings.model_validate({"apps": apps})


def test_display_must_be_local() -> None:
    assert DesktopSettings(display=":77").display == ":77"
    with pytest.raises(ValueError, match="local X display"):
        DesktopSettings(display="evil.example:0")


def test_loaded_from_toml_and_listed_as_a_tool_source(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "deepseek-eyes.toml"
    path.write_text('[runtime]\ntool_sources = ["look", "desktop"]\n'
                    '[desktop]\napps = { dialog = ["zenity", "--entry"] }\nmax_elements = 50\n')
    settings = load_settings(path).settings
    assert settings.runtime.tool_sources == ("look", "desktop")
    assert settings.desktop.apps == {"dialog": ("zenity", "--entry")}
    path.write_text("[desktop]\nmax_element = 50\n")
    with pytest.raises(ConfigError):
        load_settings(path)
