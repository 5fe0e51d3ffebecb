"""The running gateway's control API (``gateway/control.py``) and the settings watch
(``gateway/settings_watch.py``), end to end: a real ``serve`` process with the real
``mcp-server-time`` over stdio, the real CLI, and the loopback upstream that records the
tools each chat request offers."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcp_peers
from helpers import ServedGateway, serve_gateway
from runtime.upstream import LoopbackUpstream

START_DEADLINE_S = 60
#: "Within a second" of the brief, with the watch's half-second poll inside it.
PICKUP_S = 1.0
#: A hand edit must settle (unchanged across two polls) before it applies.
HAND_PICKUP_S = 2 * 0.5 + 0.5


def config_text(upstream: str, server: Path, allow: list[str], *, extra: str = "") -> str:
    return (f'[llm]\nbase_url = "{upstream}"\napi_key = false\nmodel = "deepseek-v4-pro"\n'
            'timeout = 20\n\n'
            '# the time server, kept by hand edits and by `mcp allow` alike\n'
            f'[[mcp.servers]]\nid = "time"\ntransport = "stdio"\ncommand = "{server}"\n'
            f'allow = {{ tools = {json.dumps(allow)} }}\n{extra}')


class Live:
    def __init__(self, gateway: ServedGateway, upstream: LoopbackUpstream, config: Path,
                 home: Path, env: dict[str, str]) -> None:
        self.gateway = gateway
        self.upstream = upstream
        self.config = config
        self.home = home
        self.env = env

    @property
    def control(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads((self.home / "control.json").read_text())
        return value

    def ask(self, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
            token: bool = True, content: bytes | None = None) -> httpx.Response:
        control = self.control
        sent = {"Authorization": f"Bearer {control['token']}"} if token else {}
        if method == "POST":
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        return httpx.request(method, f"http://127.0.0.1:{control['port']}{path}",
                             headers=sent, content=content if method == "POST" else None,
                             timeout=60)

    def status(self) -> dict[str, Any]:
        answer = self.ask("/control/status")
        assert answer.status_code == 200, answer.text
        value: dict[str, Any] = answer.json()
        return value

    def offered(self) -> set[str]:
        """The MCP tools one chat request through the gateway offers the model."""
        before = len(self.upstream.requests)
        reply = httpx.post(f"{self.gateway.base}/chat/completions", headers=self.gateway.headers,
                           json={"model": "deepseek-v4-pro",
                                 "messages": [{"role": "user", "content": "hello"}]},
                           timeout=60)
        assert reply.status_code == 200, reply.text
        payload = self.upstream.requests[before]
        return {t["function"]["name"] for t in payload.get("tools") or ()
                if t["function"]["name"].startswith("mcp__")}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(self.config), *args],
            env=self.env, capture_output=True, text=True, timeout=120, check=False)

    def offered_within(self, seconds: float, want: set[str]) -> set[str]:
        deadline = time.monotonic() + seconds
        seen = self.offered()
        while seen != want and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the offer: a hand edit sends no event to wait on
            seen = self.offered()
        return seen


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    server = mcp_peers.need(mcp_peers.TIME_SERVER)
    root = tmp_path_factory.mktemp("control")
    home = root / "data"
    with LoopbackUpstream() as upstream:
        config = root / "eyes.toml"
        config.write_text(config_text(upstream.base_url, server, ["get_current_time"]),
                          encoding="utf-8")
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
        with serve_gateway(config, env, deadline_s=START_DEADLINE_S) as gateway:
            # The control file is written before the gateway says it listens.
            yield Live(gateway, upstream, config, home,
                       {**env, "DEEPSEEK_EYES_GATEWAY_KEY": gateway.key or ""})
        assert not (home / "control.json").exists(), "the control file outlived the gateway"


def test_the_control_file_is_private_and_the_token_never_logged(live: Live) -> None:
    path = live.home / "control.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert live.control["settings"] == str(live.config.resolve())
    assert live.control["token"] not in live.gateway.stderr


def test_the_control_api_refuses_strangers(live: Live) -> None:
    bare = live.ask("/control/status", token=False)
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "CONTROL_UNAUTHORIZED"
    wrong = live.ask("/control/status", token=False,
                     headers={"Authorization": "Bearer " + "x" * 43})
    assert wrong.status_code == 401
    rebound = live.ask("/control/status", headers={"Host": "evil.example:80"})
    assert rebound.status_code == 421
    assert rebound.json()["error"]["code"] == "CONTROL_FORBIDDEN"
    port = live.control["port"]
    for origin in (f"http://127.0.0.1:{port}", "https://evil.example", "null"):
        crossed = live.ask("/control/status", headers={"Origin": origin})
        assert crossed.status_code == 403, origin
        assert crossed.json()["error"]["code"] == "CONTROL_FORBIDDEN"
    page = live.ask("/control/restart/time", method="POST", content=b"{}",
                    headers={"Sec-Fetch-Site": "cross-site"})
    assert page.status_code == 403
    plain = live.ask("/control/reload", method="POST", content=b"{}",
                     headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415
    assert plain.json()["error"]["code"] == "CONTROL_UNSUPPORTED_MEDIA_TYPE"


def test_unknown_control_paths_and_methods_answer_json(live: Live) -> None:
    unknown = live.ask("/control/nope")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "CONTROL_NOT_FOUND"
    wrong = live.ask("/control/status", method="POST", content=b"{}")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "CONTROL_NOT_FOUND"


def test_mcp_status_answers_from_the_running_gateway(live: Live) -> None:
    result = live.cli("mcp", "status", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["servers"]
    served = live.status()["servers"]
    # The gateway's own connection (its latency and generation), not a second one.
    assert [(r["id"], r["status"], r["generation"], r["latency_ms"]) for r in rows] == [
        (s["id"], s["status"], s["generation"], s["latency_ms"]) for s in served]
    assert rows[0]["status"] == "ready"


def test_mcp_allow_reaches_the_running_gateway_within_a_second(live: Live) -> None:
    assert live.offered() == {"mcp__time__get_current_time"}
    generation = live.status()["servers"][0]["generation"]
    started = time.monotonic()
    result = live.cli("mcp", "allow", "time", "convert_time")
    assert result.returncode == 0, result.stderr
    assert "the running gateway applied it" in result.stderr
    cli_done = time.monotonic()
    seen = live.offered_within(PICKUP_S, {"mcp__time__get_current_time",
                                          "mcp__time__convert_time"})
    assert seen == {"mcp__time__get_current_time", "mcp__time__convert_time"}
    assert time.monotonic() - cli_done < PICKUP_S, time.monotonic() - started
    # A change of policy alone keeps the connection and its catalog generation.
    assert live.status()["servers"][0]["generation"] == generation
    assert "# the time server" in live.config.read_text(encoding="utf-8")  # comments kept


def test_a_hand_edit_is_picked_up_and_an_invalid_one_refused(live: Live) -> None:
    server = mcp_peers.TIME_SERVER
    upstream = live.upstream.base_url
    live.config.write_text(config_text(upstream, server, ["convert_time"]), encoding="utf-8")
    assert live.offered_within(HAND_PICKUP_S, {"mcp__time__convert_time"}) == {
        "mcp__time__convert_time"}
    assert live.status()["reload"]["applied"] is True

    live.config.write_text(config_text(upstream, server, ["get_current_time"],
                                       extra='connect_timeout = "soon"\n'), encoding="utf-8")
    assert live.gateway.wait_for_stderr("settings change refused", timeout=HAND_PICKUP_S + 1)
    reload = live.status()["reload"]
    assert reload["applied"] is False
    assert reload["error"]["code"] == "CONFIG_INVALID"
    assert live.offered() == {"mcp__time__convert_time"}  # the running set kept
    assert live.status()["servers"][0]["status"] == "ready"

    live.config.write_text(config_text(upstream, server, ["get_current_time"]),
                           encoding="utf-8")
    assert live.offered_within(HAND_PICKUP_S, {"mcp__time__get_current_time"}) == {
        "mcp__time__get_current_time"}


def test_restart_probe_and_watch_act_on_the_running_gateway(live: Live) -> None:
    before = live.status()["servers"][0]
    restarted = live.cli("mcp", "restart", "time", "--json")
    assert restarted.returncode == 0, restarted.stderr
    answer = json.loads(restarted.stdout)
    assert answer["before"]["generation"] == before["generation"]
    assert answer["after"]["status"] == "ready"
    assert live.status()["servers"][0]["latency_ms"] == answer["after"]["latency_ms"]

    probed = live.cli("mcp", "probe", "time", "--json")
    assert probed.returncode == 0, probed.stderr
    assert set(json.loads(probed.stdout)["tools"]) >= {"get_current_time", "convert_time"}

    watched = live.cli("mcp", "watch", "--for", "1", "--json")
    assert watched.returncode == 0, watched.stderr
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    assert [e["id"] for e in events] == ["time"]
    assert events[0]["status"] == "ready"
    assert events[0]["latency_ms"] == live.status()["servers"][0]["latency_ms"]

    unknown = live.ask("/control/restart/nope", method="POST", content=b"{}")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "MCP_SERVER_UNKNOWN"


def test_a_server_registered_on_a_gateway_started_with_none_is_live(tmp_path: Path) -> None:
    """As a new user does it: `serve` with no MCP server, `mcp register`, `mcp status`."""
    server = mcp_peers.need(mcp_peers.TIME_SERVER)
    home = tmp_path / "data"
    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
                          'model = "deepseek-v4-pro"\ntimeout = 20\n', encoding="utf-8")
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
        with serve_gateway(config, env, deadline_s=START_DEADLINE_S) as gateway:
            live = Live(gateway, upstream, config, home,
                        {**env, "DEEPSEEK_EYES_GATEWAY_KEY": gateway.key or ""})
            assert live.status()["running"] is True  # the MCP host waits for servers
            empty = live.cli("mcp", "status")
            assert empty.returncode == 0, empty.stderr
            assert "(none)" in empty.stdout

            registered = live.cli("mcp", "register", "time", "--", str(server))
            assert registered.returncode == 0, registered.stderr
            assert "the running gateway applied it" in registered.stderr
            status = live.cli("mcp", "status")
            assert status.returncode == 0, status.stderr
            assert "(none)" not in status.stdout
            (row,) = [line.split() for line in status.stdout.splitlines()
                      if line.startswith("time ")]
            assert row[1] == "ready"
            assert live.offered() == set()  # registered with nothing allowed

            allowed = live.cli("mcp", "allow", "time", "get_current_time")
            assert allowed.returncode == 0, allowed.stderr
            assert live.offered() == {"mcp__time__get_current_time"}
            reload = live.status()["reload"]
            assert reload["state"] == "applied"
            assert reload["applying"] is None
            assert reload["applied_sha256"] == hashlib.sha256(config.read_bytes()).hexdigest()


def test_a_gateway_without_a_key_refuses_tools_that_act_on_this_machine(
        tmp_path: Path) -> None:
    """Started open (no key: nothing to call), it may not be given such tools live."""
    server = mcp_peers.need(mcp_peers.TIME_SERVER)
    home = tmp_path / "data"
    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(config_text(upstream.base_url, server, []), encoding="utf-8")
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home), "DEEPSEEK_EYES_GATEWAY_KEY": ""}
        with serve_gateway(config, env, deadline_s=START_DEADLINE_S) as gateway:
            live = Live(gateway, upstream, config, home, env)
            result = live.cli("mcp", "allow", "time", "get_current_time")
            assert result.returncode == 1
            assert "GATEWAY_KEY_REQUIRED" in result.stderr
            reload = live.status()["reload"]
            assert reload["state"] == "refused"
            assert reload["error"]["code"] == "GATEWAY_KEY_REQUIRED"
            assert live.offered() == set()  # the running set kept
            assert live.status()["servers"][0]["status"] == "ready"
