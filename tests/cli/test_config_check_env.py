"""Issue #37 item 5d: ``config check`` warns once per ``{ env = … }`` the file names whose
variable is unset (``CONFIG_ENV_MISSING``, the key path and the variable); exit 0 for
warnings, 1 with ``--strict``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepseek_eyes.cli import cli
from deepseek_eyes.errors import ERROR_CODES
from deepseek_eyes.settings import Settings
from deepseek_eyes.settings.references import env_references
from deepseek_eyes.settings.starter import STARTER_SETTINGS

NAMED = """
[llm]
api_key = { env = "DSE_CHECK_LLM" }

[[mcp.servers]]
id = "github"
transport = "stdio"
command = "npx"
env = { GITHUB_TOKEN = { env = "DSE_CHECK_GH" }, SHARED = { env = "DSE_CHECK_LLM" } }

[[mcp.servers]]
id = "web"
transport = "streamable-http"
url = "https://mcp.example.com/mcp"
headers = { Authorization = { env = "DSE_CHECK_WEB" } }
"""

PATHS = {"llm.api_key": "DSE_CHECK_LLM",
         "mcp.servers[0].env.GITHUB_TOKEN": "DSE_CHECK_GH",
         "mcp.servers[0].env.SHARED": "DSE_CHECK_LLM",
         "mcp.servers[1].headers.Authorization": "DSE_CHECK_WEB"}


def check(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "eyes.toml"
    path.write_text(text, encoding="utf-8")
    done = CliRunner().invoke(cli, ["config", "check", str(path), *args])
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done.exit_code, done.stdout, done.stderr


def test_each_unset_reference_is_one_warning(tmp_path: Path) -> None:
    status, out, err = check(tmp_path, NAMED)
    assert status == 0
    assert out.endswith(": valid\n")
    lines = err.splitlines()
    assert len(lines) == len(PATHS)
    for line, (path, env) in zip(lines, PATHS.items(), strict=True):
        assert line.startswith(f"warning CONFIG_ENV_MISSING: {path} = {{ env = \"{env}\" }}")
        assert f"{env} is not set" in line
    assert "CONFIG_ENV_MISSING" in ERROR_CODES

    status, out, err = check(tmp_path, NAMED, "--json")
    assert status == 0
    assert err == ""
    body = json.loads(out)
    assert body["valid"] is True
    assert [(w["code"], w["details"]["path"], w["details"]["env"]) for w in body["warnings"]] \
        == [("CONFIG_ENV_MISSING", path, env) for path, env in PATHS.items()]


def test_strict_exits_1_on_a_warning_and_0_when_all_are_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, err = check(tmp_path, NAMED, "--strict")
    assert status == 1
    assert out.endswith(": valid\n")
    assert err.count("warning CONFIG_ENV_MISSING") == 4
    status, out, _ = check(tmp_path, NAMED, "--strict", "--json")
    assert status == 1
    assert len(json.loads(out)["warnings"]) == 4

    monkeypatch.setenv("DSE_CHECK_LLM", "value-one")
    monkeypatch.setenv("DSE_CHECK_GH", "value-two")
    status, _, err = check(tmp_path, NAMED, "--strict")
    assert status == 1
    assert err.splitlines() == [line for line in err.splitlines() if "DSE_CHECK_WEB" in line]
    monkeypatch.setenv("DSE_CHECK_WEB", "value-three")
    status, out, err = check(tmp_path, NAMED, "--strict")
    assert (status, err) == (0, "")
    status, out, _ = check(tmp_path, NAMED, "--json")
    assert "warnings" not in json.loads(out)
    # An empty variable is as unset as a missing one (resolve() refuses it too).
    monkeypatch.setenv("DSE_CHECK_WEB", "")
    assert check(tmp_path, NAMED, "--strict")[0] == 1


def test_the_starter_file_names_its_two_keys(tmp_path: Path) -> None:
    status, _, err = check(tmp_path, STARTER_SETTINGS)
    assert status == 0
    assert "warning CONFIG_ENV_MISSING: llm.api_key = { env = \"DEEPSEEK_API_KEY\" }" in err
    assert "DEEPSEEK_EYES_GATEWAY_KEY" in err


def test_only_what_the_file_names_is_walked() -> None:
    # The default llm.api_key reference is the program's, not the file's.
    assert env_references(Settings()) == []
    named = Settings.model_validate({"llm": {"api_key": {"env": "MINE"}}})
    assert [(r.path, r.env) for r in env_references(named)] == [("llm.api_key", "MINE")]
