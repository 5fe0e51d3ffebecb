"""A capability that cannot run says the exact command that makes it run (issue #24.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.browser.session import find_chromium
from deepseek_eyes.cli import main
from deepseek_eyes.desktop.headless import HeadlessDesktop
from deepseek_eyes.errors import FIX_CHROMIUM, FIX_DESKTOP, BrowserError, DesktopError
from deepseek_eyes.settings import BrowserSettings


def test_a_missing_chromium_names_the_package_to_install(tmp_path: Path) -> None:
    with pytest.raises(BrowserError) as missing:
        find_chromium(BrowserSettings(executable=tmp_path / "no-chromium"))
    assert missing.value.code == "BROWSER_UNAVAILABLE"
    assert FIX_CHROMIUM in missing.value.message
    assert missing.value.details["fix"] == FIX_CHROMIUM
    assert "apt-get install chromium" in FIX_CHROMIUM


def test_a_desktop_without_its_programs_names_the_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without Xvfb and D-Bus
    with pytest.raises(DesktopError) as missing:
        HeadlessDesktop().start()
    assert missing.value.code == "DESKTOP_UNAVAILABLE"
    assert "Xvfb" in missing.value.details["missing"]
    assert FIX_DESKTOP in missing.value.message
    assert "xvfb" in FIX_DESKTOP.split()


def test_the_command_line_prints_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text(f'[browser]\nexecutable = "{tmp_path / "gone"}"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        main(["--config", str(config), "browser", "observe", "http://127.0.0.1:9/"])
    assert ended.value.code != 0
    printed = capsys.readouterr()
    assert "BROWSER_UNAVAILABLE" in printed.out + printed.err
    assert FIX_CHROMIUM in printed.out + printed.err
