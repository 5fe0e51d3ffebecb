"""``init`` writes a settings file ``config check`` accepts as written, and never
overwrites one."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepseek_eyes.cli import cli
from deepseek_eyes.errors import ERROR_CODES, ConfigError
from deepseek_eyes.settings import validate_settings_file
from deepseek_eyes.settings.starter import STARTER_SETTINGS


def invoke(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(cli, list(args))
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done.exit_code, done.stdout, done.stderr


def test_init_writes_a_file_config_check_accepts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "eyes.toml"
    status, out, _ = invoke("init", str(path))
    assert status == 0
    assert out.startswith(f"wrote {path}\n")
    assert path.read_text(encoding="utf-8") == STARTER_SETTINGS

    # The starter names two variables; unset, each is a warning (tests/cli/
    # test_config_check_env.py), set, the file checks clean.
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-" + "x" * 32)
    monkeypatch.setenv("DEEPSEEK_EYES_GATEWAY_KEY", "g" * 40)
    status, out, err = invoke("config", "check", str(path), "--json")
    assert status == 0, out
    assert json.loads(out) == {"valid": True, "path": str(path)}
    assert err == ""

    settings = validate_settings_file(path)
    assert settings.llm.base_url == "https://api.deepseek.com"
    assert settings.llm.model == "deepseek-flash"  # a current name: no CONFIG_MODEL_RENAMED
    assert settings.vision.route_priority == ("deepseek", "local")
    assert settings.vision.delivery == "auto"
    assert settings.llm.api_key is not None
    assert settings.llm.api_key.env == "DEEPSEEK_API_KEY"
    assert settings.gateway.api_key is not None
    assert settings.gateway.api_key.env == "DEEPSEEK_EYES_GATEWAY_KEY"


def test_the_commented_examples_are_valid_once_uncommented(tmp_path: Path) -> None:
    """The remote route and the MCP server are examples a person uncomments: they must
    load as they stand once the leading ``# `` goes."""
    text = re.sub(r"^# (?=\[|[a-z_]+ = )", "", STARTER_SETTINGS, flags=re.MULTILINE)
    parsed = tomllib.loads(text)
    assert parsed["vision"]["routes"][0]["name"] == "qwen"
    assert parsed["mcp"]["servers"][0]["id"] == "time"
    path = tmp_path / "all.toml"
    path.write_text(text, encoding="utf-8")
    settings = validate_settings_file(path)
    assert [route.name for route in settings.vision.routes] == ["qwen"]
    assert [server.id for server in settings.mcp.servers] == ["time"]


def test_init_defaults_to_the_working_directory(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    status, out, _ = invoke("init", "--json")
    assert status == 0
    assert json.loads(out) == {"created": "deepseek-eyes.toml"}
    assert (tmp_path / "deepseek-eyes.toml").read_text(encoding="utf-8") == STARTER_SETTINGS


def test_init_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text("# mine\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        invoke("init", str(path))
    assert refused.value.code == "CONFIG_FILE_EXISTS"
    assert refused.value.code in ERROR_CODES
    assert path.read_text(encoding="utf-8") == "# mine\n"


def test_init_into_a_missing_directory_is_a_write_failure(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        invoke("init", str(tmp_path / "nowhere" / "eyes.toml"))
    assert refused.value.code == "CONFIG_WRITE_FAILED"


def test_config_check_names_the_successor_of_an_alias_or_a_retired_model(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.toml"
    path.write_text('[llm]\nmodel = "deepseek-v4-flash"\n\n[[llm.models]]\n'
                    'id = "deepseek-chat"\n', encoding="utf-8")
    status, out, err = invoke("config", "check", str(path), "--json")
    assert status == 0, out
    warnings = json.loads(out)["warnings"]
    assert [(w["code"], w["details"]["model"], w["details"]["successor"], w["details"]["kind"])
            for w in warnings] == [
        ("CONFIG_MODEL_RENAMED", "deepseek-v4-flash", "deepseek-flash", "alias"),
        ("CONFIG_MODEL_RENAMED", "deepseek-chat", "deepseek-flash", "retired"),
    ]
    status, out, err = invoke("config", "check", str(path))
    assert status == 0
    assert "warning CONFIG_MODEL_RENAMED: 'deepseek-v4-flash' is an alias of " \
        "'deepseek-flash'" in err
