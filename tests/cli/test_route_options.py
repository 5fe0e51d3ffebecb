"""Command-line route choices: ``see --route`` prepends its route to the configured order
(the rest stays behind it as failover), and ``routes`` lists auto-detected models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepseek_eyes.cli import cli
from vision.loopback import LoopbackVisionServer, solid_png


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_see_route_puts_its_route_first_and_fails_over(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    tag = request.node.name
    config = write_config(tmp_path / "eyes.toml", f"""
[vision]
probe = false
[[vision.routes]]
name = "good"
base_url = "{loopback.url(f"healthy~{tag}")}"
model = "vision-1"
[[vision.routes]]
name = "bad"
base_url = "{loopback.url(f"error500~{tag}")}"
model = "vision-1"
""")
    image = tmp_path / "square.png"
    image.write_bytes(solid_png(16, 16))
    done = CliRunner().invoke(
        cli, ["--config", str(config), "see", str(image), "--route", "bad", "--json"]
    )
    assert done.exit_code == 0, done.output
    body = json.loads(done.stdout)
    assert body["route"] == "good"
    calls = [(a["route"], a["outcome"]) for a in body["attempts"] if a["phase"] == "call"]
    assert calls == [("bad", "fail"), ("good", "ok")]  # bad first, then the failover
    assert loopback.calls[f"error500~{tag}"] == 1


def test_routes_lists_the_models_that_models_declares(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "eyes.toml", f"""
[vision]
auto_detect = true
[llm]
base_url = "{loopback.url(f"catalog~{request.node.name}")}"
api_key = false
""")
    done = CliRunner().invoke(cli, ["--config", str(config), "routes", "--json"])
    assert done.exit_code == 0, done.output
    ordered = [r["name"] for r in json.loads(done.stdout)["routes"] if r["order"]]
    assert ordered == ["llm/vision-1", "llm/or-vision", "llm/said-text"]
