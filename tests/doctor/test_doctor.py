"""``deepseek-eyes doctor`` on a machine as a new user has it (no key, no upstream, no
Chromium: each named with its fix, exit 1) and on a healthy setup against the loopback
DeepSeek (those checks pass, exit 0); the ``--json`` shape; and the checks that judge the
gateway's key and port, the settings, the env references and MCP servers one by one."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from deepseek_eyes.cli import cli
from deepseek_eyes.doctor import local
from deepseek_eyes.errors import FIX_CHROMIUM
from deepseek_eyes.settings import Settings
from runtime.upstream import LoopbackUpstream
from services import free_port

ROOT = Path(__file__).resolve().parents[2]
STRONG_KEY = secrets.token_urlsafe(32)  # what `deepseek-eyes token` makes


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream(api_key="right-key-for-the-loopback") as server:
        yield server


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eyes.toml"
    path.write_text(text, encoding="utf-8")
    return path


def doctor(config: Path, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["--config", str(config), "doctor", *args])
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return done.exit_code, done.stdout


def by_name(output: str) -> dict[str, dict[str, Any]]:
    return {c["check"]: c for c in json.loads(output)}


def test_a_fresh_machine_names_each_problem_with_its_fix_and_exits_1(tmp_path: Path) -> None:
    """No key set, an upstream nobody listens on, no Chromium where the settings point: a
    real process prints each as a FAIL line followed by its fix."""
    config = write(tmp_path, (
        f'[llm]\nbase_url = "http://127.0.0.1:{free_port()}/v1"\nmodel = "deepseek-flash"\n'
        '[runtime]\ntool_sources = ["look", "browser"]\n'
        f'[browser]\nexecutable = "{tmp_path / "nowhere" / "chromium"}"\n'
        "[gateway]\nport = 0\n"))
    done = subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "doctor",
         "--timeout", "3"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()

    def failure(name: str) -> tuple[str, str]:
        index = next(i for i, line in enumerate(lines) if line.split()[1:2] == [name])
        assert lines[index].startswith("FAIL"), lines[index]
        fix = lines[index + 1].strip()
        assert fix.startswith("fix: "), fix
        return lines[index], fix

    line, fix = failure("env:llm.api_key")
    assert "DEEPSEEK_API_KEY is not set" in line
    assert "export DEEPSEEK_API_KEY=" in fix
    line, fix = failure("upstream")
    assert "LLM_UNAVAILABLE" in line
    assert "llm.base_url" in fix
    line, fix = failure("chromium")
    assert "BROWSER_UNAVAILABLE" in line
    assert fix == f"fix: {FIX_CHROMIUM}"
    # The checks that have nothing wrong say ok.
    assert any(line.startswith("ok") and " settings " in line for line in lines)


def test_a_healthy_setup_against_the_loopback_deepseek_passes(
    tmp_path: Path, upstream: LoopbackUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "right-key-for-the-loopback")
    monkeypatch.setenv("DEEPSEEK_EYES_GATEWAY_KEY", STRONG_KEY)
    config = write(tmp_path, (
        f'[llm]\nbase_url = "{upstream.base_url}"\nmodel = "deepseek-flash"\n'
        '[[llm.models]]\nid = "deepseek-v4-pro"\ninput = ["text"]\n'
        "[gateway]\nport = 0\n"))
    before = upstream.chat_calls
    status, out = doctor(config, "--json")
    checks = by_name(out)
    for name in ("settings", "env:llm.api_key", "upstream", "data.directory", "audit",
                 "gateway.key", "gateway.port", "sight:deepseek-v4-pro"):
        assert checks[name]["status"] == "ok", checks[name]
    assert "the key is accepted" in checks["upstream"]["detail"]
    assert checks["sight:deepseek-v4-pro"]["detail"] == "does not see; from settings"
    # Not probed unless asked: the priors answer, said as not confirmed.
    flash = checks["sight:deepseek-flash"]
    assert flash["status"] == "warn"
    assert "by the priors" in flash["detail"]
    assert "--probe" in flash["fix"]
    assert upstream.chat_calls == before  # no model call without --probe
    assert not any(c["status"] == "fail" for c in checks.values()), out
    assert status == 0

    # --probe asks the model now; the verdict is learned and reported as such after.
    status, out = doctor(config, "--json", "--probe")
    assert upstream.chat_calls > before
    assert by_name(out)["sight:deepseek-flash"]["detail"].startswith("sees; from probe")
    status, out = doctor(config, "--json")
    assert by_name(out)["sight:deepseek-flash"]["status"] == "ok"
    assert by_name(out)["sight:deepseek-flash"]["detail"].startswith("sees; from probe")


def test_a_refused_key_is_named(tmp_path: Path, upstream: LoopbackUpstream,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "a-wrong-key")
    config = write(tmp_path, f'[llm]\nbase_url = "{upstream.base_url}"\nmodel = "x"\n'
                             "[gateway]\nport = 0\n")
    status, out = doctor(config, "--json")
    check = by_name(out)["upstream"]
    assert check["status"] == "fail"
    assert "401: the key was refused" in check["detail"]
    assert "export DEEPSEEK_API_KEY=" in check["fix"]
    assert status == 1


def test_json_is_a_list_of_check_status_detail_fix(tmp_path: Path) -> None:
    config = write(tmp_path, f'[llm]\nbase_url = "http://127.0.0.1:{free_port()}/v1"\n'
                             "[gateway]\nport = 0\n")
    status, out = doctor(config, "--json", "--timeout", "2")
    checks = json.loads(out)
    assert isinstance(checks, list)
    assert checks
    for check in checks:
        assert set(check) == {"check", "status", "detail", "fix"}
        assert check["status"] in ("ok", "warn", "fail")
        assert all(isinstance(check[key], str) for key in check)
    assert status == 1  # the upstream cannot be reached
    names = [c["check"] for c in checks]
    assert names[0] == "settings"
    assert names.index("data.directory") < names.index("upstream")


def test_invalid_settings_are_the_one_failure(tmp_path: Path) -> None:
    config = write(tmp_path, "[llm]\nbase_urll = 1\n")
    status, out = doctor(config, "--json")
    (check,) = json.loads(out)
    assert check["check"] == "settings"
    assert check["status"] == "fail"
    assert "CONFIG_INVALID" in check["detail"]
    assert "llm.base_urll" in check["detail"]
    assert "config check" in check["fix"]
    assert status == 1


def test_every_env_reference_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.model_validate({
        "llm": {"api_key": {"env": "DOCTOR_LLM_KEY"}},
        "mcp": {"servers": [
            {"id": "on", "transport": "streamable-http", "url": "https://mcp.example/mcp",
             "headers": {"Authorization": {"env": "DOCTOR_ON_TOKEN"}}},
            {"id": "off", "transport": "streamable-http", "url": "https://mcp.example/mcp",
             "enabled": False, "headers": {"Authorization": {"env": "DOCTOR_OFF_TOKEN"}}},
        ]},
    })
    monkeypatch.setenv("DOCTOR_LLM_KEY", "set")
    found = {c.check: c for c in local.check_env_references(settings)}
    assert found["env:llm.api_key"].status == "ok"
    on = next(c for name, c in found.items() if "servers[0]" in name)
    off = next(c for name, c in found.items() if "servers[1]" in name)
    assert (on.status, on.detail) == ("fail", "DOCTOR_ON_TOKEN is not set")
    assert on.fix == "export DOCTOR_ON_TOKEN=…"
    assert off.status == "warn"  # a disabled server never connects


def test_the_gateway_key_is_judged_as_serve_judges_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_EYES_GATEWAY_KEY", "password123")
    weak = local.check_gateway_key(Settings())
    assert weak.status == "fail"
    assert "GATEWAY_KEY_WEAK" in weak.detail
    assert "deepseek-eyes token" in weak.fix
    monkeypatch.delenv("DEEPSEEK_EYES_GATEWAY_KEY")
    assert local.check_gateway_key(Settings()).status == "warn"  # open on loopback
    tools = Settings.model_validate({"runtime": {"tool_sources": ["terminal"]}})
    required = local.check_gateway_key(tools)
    assert (required.status, required.detail.split(":")[0]) == ("fail", "GATEWAY_KEY_REQUIRED")
    monkeypatch.setenv("DEEPSEEK_EYES_GATEWAY_KEY", STRONG_KEY)
    assert local.check_gateway_key(Settings()).status == "ok"


def test_the_gateway_port_held_by_another_program_fails() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        settings = Settings.model_validate({"gateway": {"port": port}})
        held = local.check_gateway_port(settings, None)
        assert held.status == "fail"
        assert "in use by another program" in held.detail
        assert "gateway.port" in held.fix
    assert local.check_gateway_port(settings, None).status == "ok"


def test_an_mcp_server_that_cannot_start_is_named(tmp_path: Path) -> None:
    config = write(tmp_path, (
        f'[llm]\nbase_url = "http://127.0.0.1:{free_port()}/v1"\napi_key = false\n'
        "[gateway]\nport = 0\n"
        '[[mcp.servers]]\nid = "broken"\ntransport = "stdio"\n'
        f'command = "{tmp_path / "no-such-server"}"\n'))
    _, out = doctor(config, "--json", "--timeout", "3")
    check = by_name(out)["mcp:broken"]
    assert check["status"] == "fail", check
    assert "mcp probe broken" in check["fix"]


def test_an_unwritable_data_directory_fails(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("DEEPSEEK_EYES_HOME", str(blocker))
    check = local.check_data_directory(Settings())
    assert check.status == "fail"
    assert "is not a directory" in check.detail
    assert "DEEPSEEK_EYES_HOME" in check.fix
