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
