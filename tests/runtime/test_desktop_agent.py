"""The runtime drives our GTK window on a private Xvfb through the scripted loopback
upstream (``CALL[tool]: args``): observe, type and click by ref, a stale second action in
the same response refused without typing, the result read back from the app itself."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest

from deepseek_eyes.desktop.headless import HeadlessDesktop
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.settings import Settings
from desktop.support import GtkApp, require_desktop, wait_for
from helpers import BLIND, LOCAL_VISION
from runtime.upstream import LoopbackUpstream

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def screen() -> Iterator[dict[str, str]]:
    require_desktop()
    with HeadlessDesktop() as desktop:
        yield desktop.environment


@pytest.fixture
async def runtime(upstream: LoopbackUpstream, screen: dict[str, str],
                  monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    for name, value in screen.items():
        monkeypatch.setenv(name, value)
    upstream.reset()
    settings = Settings.model_validate({
        "llm": {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
                "timeout": 20.0, **BLIND},
        "runtime": {"tool_sources": ["look", "desktop"], "max_tool_calls_per_turn": 8},
        "desktop": {"settle": 0.05}, "vision": LOCAL_VISION})
    opened = Runtime(settings, DataHome.open(settings))
    await opened.start()
    yield opened
    await opened.aclose()
    opened.home.close()


def call(tool: str, arguments: Mapping[str, Any]) -> str:
    return f"CALL[{tool}]: {json.dumps(arguments)}"


def newest_state(text: str) -> str:
    states = re.findall(r"\bstate (d\d+)", text)
    assert states, text
    return states[-1]


def ref(text: str, line: str) -> str:
    found = re.search(r"\[ref=(e[0-9a-f]{10})\] " + re.escape(line), text)
    assert found, f"{line!r} not in {text}"
    return found.group(1)


class Conversation:
    def __init__(self, runtime: Runtime, session_id: str) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.history: list[dict[str, Any]] = []

    async def say(self, text: str) -> str:
        self.history.append({"role": "user", "content": text})
        result = await self.runtime.run(TurnRequest(messages=list(self.history),
                                                    session_id=self.session_id))
        self.history.append({"role": "assistant", "content": result.content})
        return result.content


async def test_the_runtime_types_and_clicks_in_a_gtk_window(
    runtime: Runtime, upstream: LoopbackUpstream, screen: dict[str, str]
) -> None:
    app = GtkApp(screen, "Runtime Window")
    try:
        chat = Conversation(runtime, "desktop-form")
        seen = await chat.say(call("desktop_observe", {"scope": "window",
                                                       "window": "Runtime Window"}))
        assert seen.startswith("after desktop_observe: state d1 · window ")
        tools = {t["function"]["name"] for t in upstream.requests[0].get("tools") or []}
        assert {"desktop_observe", "desktop_type", "desktop_click", "desktop_close"} <= tools
        entry, apply = ref(seen, 'text "Name"'), ref(seen, 'push button "Apply"')
        first = newest_state(seen)
        # Two mutations planned on one state in one response: the second is refused as
        # stale, re-observed, and never clicks.
        both = await chat.say(
            call("desktop_type", {"state_id": first, "ref": entry, "text": "Hopper"}) + " "
            + call("desktop_click", {"state_id": first, "ref": apply}))
        assert 'text "Name" text="Hopper"' in both
        assert "DESKTOP_STATE_STALE" in both
        assert app.state() == {**app.state(), "entry": "Hopper",
                               "clicks": {"Apply": 0, "Clear": 0}}
        clicked = await chat.say(call("desktop_click", {"state_id": newest_state(both),
                                                        "ref": apply}))
        assert 'label "clicked 1"' in clicked
        assert wait_for(lambda: app.state()["clicks"]["Apply"] == 1, what="the click")
        turns = runtime.sessions.turns("desktop-form")
        assert turns[0].details["tool_calls"][0]["source"] == "desktop"
        report = await chat.say(call("desktop_report", {}))
        assert "refused DESKTOP_STATE_STALE" in report
    finally:
        app.close()


@pytest.mark.slow
async def test_a_desktop_screenshot_reaches_the_text_model_only_as_evidence(
    runtime: Runtime, upstream: LoopbackUpstream, screen: dict[str, str]
) -> None:
    app = GtkApp(screen, "Evidence Window")
    try:
        chat = Conversation(runtime, "desktop-shot")
        await chat.say(call("desktop_observe", {"scope": "window",
                                                "window": "Evidence Window"}))
        shot = await chat.say(call("desktop_screenshot", {}))
        assert "[tool-img-1: sha256:" in shot
        assert "evidence from route local" in shot
        assert "Your name" in shot  # read from the pixels by the local OCR route
        last = upstream.requests[-1]
        assert "image_url" not in json.dumps(last)
    finally:
        app.close()


async def test_read_only_risk_offers_no_acting_desktop_tool(upstream: LoopbackUpstream) -> None:
    upstream.reset()
    settings = Settings.model_validate({
        "llm": {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
                "timeout": 20.0, **BLIND},
        "runtime": {"tool_sources": ["desktop"], "tool_risk": "read-only"}})
    runtime = Runtime(settings, DataHome.open(settings))
    try:
        await runtime.run(TurnRequest(messages=[{"role": "user", "content": "hello"}]))
        tools = {t["function"]["name"] for t in upstream.requests[0].get("tools") or []}
        assert {"desktop_observe", "desktop_screenshot", "desktop_assert"} <= tools
        assert not tools & {"desktop_click", "desktop_type", "desktop_press",
                            "desktop_launch"}
    finally:
        await runtime.aclose()
        runtime.home.close()
