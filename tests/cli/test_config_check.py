"""``config check`` names every vision route the settings define but no image can reach
(``CONFIG_ROUTE_UNREACHABLE``, a warning: the file stays valid), and still refuses names
that cannot resolve (``CONFIG_INVALID``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepseek_eyes.cli import cli
from deepseek_eyes.errors import ERROR_CODES, ConfigError
from deepseek_eyes.settings import Settings
from deepseek_eyes.settings.references import env_references
from deepseek_eyes.settings.starter import STARTER_SETTINGS
from deepseek_eyes.vision.routing.detect import MAX_AUTO_ROUTES
from deepseek_eyes.vision.routing.reach import UNREACHABLE_CODE, unreachable_routes

SHADOWED = """
[vision]
auto_detect = true
[[vision.routes]]
name = "llm/vision-1"
base_url = "https://vision.example/v1"
model = "another-model"
[[llm.models]]
id = "vision-1"
input = ["text", "image"]
"""


def check(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "eyes.toml"
    path.write_text(text, encoding="utf-8")
    done = CliRunner().invoke(cli, ["config", "check", str(path), *args])
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done.exit_code, done.stdout, done.stderr


def test_a_shadowed_route_is_named_with_a_warning_code(tmp_path: Path) -> None:
    status, out, err = check(tmp_path, SHADOWED)
    assert status == 0
    assert out.endswith(": valid\n")
    assert err.startswith(f"warning {UNREACHABLE_CODE}: model 'vision-1' ")
    assert "'llm/vision-1'" in err

    status, out, err = check(tmp_path, SHADOWED, "--json")
    assert status == 0
    assert err == ""
    (warning,) = json.loads(out)["warnings"]
    assert warning["code"] == UNREACHABLE_CODE
    assert warning["details"] == {
        "route": "llm/vision-1", "reason": "shadowed", "model": "vision-1",
        "shadowed_by": "vision.routes",
    }
    assert UNREACHABLE_CODE in ERROR_CODES


def test_a_clean_file_has_no_warnings(tmp_path: Path) -> None:
    clean = """
[vision]
route_priority = ["a"]
auto_detect = true
[[vision.routes]]
name = "a"
base_url = "https://a.example/v1"
model = "m"
[[vision.routes]]
name = "b"
base_url = "https://b.example/v1"
model = "m"
[[llm.models]]
id = "vision-1"
input = ["text", "image"]
"""
    status, _out, err = check(tmp_path, clean)
    assert (status, err) == (0, "")
    assert json.loads(check(tmp_path, clean, "--json")[1]) == {
        "valid": True, "path": str(tmp_path / "eyes.toml"),
    }


def test_shadowing_counts_only_with_auto_detection(tmp_path: Path) -> None:
    status, _out, err = check(tmp_path, SHADOWED.replace("auto_detect = true", ""))
    assert (status, err) == (0, "")


def test_an_unknown_priority_name_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text('[vision]\nroute_priority = ["ghost"]\n', encoding="utf-8")
    done = CliRunner().invoke(cli, ["config", "check", str(path)])
    assert isinstance(done.exception, ConfigError)
    assert done.exception.code == "CONFIG_INVALID"
    assert "'ghost'" in json.dumps(done.exception.details)


def test_models_sharing_a_route_name_and_models_past_the_limit() -> None:
    models = [{"id": "Vision.1", "input": ["text", "image"]},
              {"id": "vision.1", "input": ["text", "image"]}]
    models += [{"id": f"m{i}", "input": ["text", "image"]} for i in range(MAX_AUTO_ROUTES)]
    settings = Settings.model_validate({"vision": {"auto_detect": True},
                                        "llm": {"models": models}})
    found = [(w.route, w.reason, w.details.get("model")) for w in unreachable_routes(settings)]
    # The limit counts models, as detection does: the shadowed one used a place.
    assert found == [
        ("llm/vision.1", "shadowed", "vision.1"),
        *[(f"llm/m{i}", "over_limit", f"m{i}") for i in (MAX_AUTO_ROUTES - 2, MAX_AUTO_ROUTES - 1)],
    ]


@pytest.mark.parametrize("priority", [[], ["b"], ["b", "a"]])
def test_no_configured_route_is_left_out_of_the_order(priority: list[str]) -> None:
    routes = [{"name": n, "base_url": f"https://{n}.example/v1", "model": "m"} for n in "abc"]
    settings = Settings.model_validate(
        {"vision": {"routes": routes, "route_priority": priority, "auto_detect": True}}
    )
    assert unreachable_routes(settings) == []


# -- unset { env = … } references (CONFIG_ENV_MISSING): one warning each, exit 1 with --strict

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
