"""The runtime drives a form end to end in real headless Chromium through the scripted
loopback upstream (``CALL[tool]: args``). A model can only pass a state id it has seen, so
each turn's instruction is written from the previous turn's answer (which quotes the tool
result), as a model would read it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest

from browser.site import Site
from browser.support import ref, require_browser
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.settings import Settings
from helpers import BLIND, LOCAL_VISION
from runtime.upstream import VISION_MODEL, LoopbackUpstream

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with Site() as served:
        yield served


def settings_for(upstream: LoopbackUpstream, **sections: Any) -> Settings:
    llm = {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
           "timeout": 20.0, **BLIND}
    runtime = {"tool_sources": ["look", "browser"], "max_tool_calls_per_turn": 8,
               **sections.pop("runtime", {})}
    return Settings.model_validate({"llm": llm, "runtime": runtime, "vision": LOCAL_VISION,
                                    # The test site is on loopback: let it through.
                                    "browser": {"settle_timeout": 3.0,
                                                "allow_private_network": True},
                                    **sections})


@pytest.fixture
async def runtime(upstream: LoopbackUpstream) -> AsyncIterator[Runtime]:
    require_browser()
    upstream.reset()
    settings = settings_for(upstream)
    opened = Runtime(settings, DataHome.open(settings))
    await opened.start()
    yield opened
    await opened.aclose()
    opened.home.close()


def call(tool: str, arguments: Mapping[str, Any]) -> str:
    return f"CALL[{tool}]: {json.dumps(arguments)}"


def newest_state(text: str) -> str:
    states = re.findall(r"\bstate (s\d+)", text)
    assert states, text
    return states[-1]


def offered(payload: Mapping[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in payload.get("tools") or []]


class Conversation:
    """One session's history, resent in full each turn as OpenAI clients do."""

    def __init__(self, runtime: Runtime, session_id: str) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.history: list[dict[str, Any]] = []

    async def say(self, text: str) -> str:
        self.history.append({"role": "user", "content": text})
        result = await self.runtime.run(TurnRequest(messages=list(self.history),
                                                    session_id=self.session_id))
        assert result.fork is None
        self.history.append({"role": "assistant", "content": result.content})
        return result.content


async def test_the_runtime_fills_and_submits_a_form(
    runtime: Runtime, upstream: LoopbackUpstream, site: Site
) -> None:
    chat = Conversation(runtime, "web-form")
    seen = await chat.say(call("browser_navigate", {"url": site.url("/form.html")}))
    assert seen.startswith("after browser_navigate: state s1\n")
    tools = offered(upstream.requests[0])
    assert {"browser_navigate", "browser_click", "browser_type", "browser_report"} <= set(tools)
    first = newest_state(seen)
    name, email = ref(seen, 'textbox "Full name"'), ref(seen, 'textbox "Email"')
    # Two actions planned on the same state in one response: the first runs, the second is
    # refused as stale (with a fresh observation) and never types anything.
    both = await chat.say(
        call("browser_type", {"state_id": first, "ref": name, "text": "Grace Hopper"}) + " "
        + call("browser_type", {"state_id": first, "ref": email, "text": "grace@navy.mil"}))
    assert 'changed: textbox "Full name" = "Grace Hopper" focused' in both
    assert "BROWSER_STATE_STALE" in both
    service = runtime.tools.source("browser").services["web-form"]  # type: ignore[union-attr]
    assert service.session is not None
    assert await service.session.page.evaluate("document.getElementById('email').value") == ""
    typed = await chat.say(call("browser_type", {"state_id": newest_state(both), "ref": email,
                                                 "text": "grace@navy.mil", "submit": True}))
    assert 'new text: "Welcome, Grace Hopper! Plan: Free"' in typed
    checked = await chat.say(call("browser_assert", {"kind": "text",
                                                     "text": "Welcome, Grace Hopper"}))
    assert "assert PASS" in checked
    turns = runtime.sessions.turns("web-form")
    assert turns[0].details["tool_calls"][0]["source"] == "browser"
    report = await chat.say(call("browser_report", {}))
    assert "refused BROWSER_STATE_STALE" in report
    assert "PASS text" in report


@pytest.mark.slow
async def test_a_screenshot_reaches_the_text_model_only_as_evidence(
    runtime: Runtime, upstream: LoopbackUpstream, site: Site
) -> None:
    chat = Conversation(runtime, "web-shot")
    await chat.say(call("browser_navigate", {"url": site.url("/form.html")}))
    shot = await chat.say(call("browser_screenshot", {}))
    assert "[tool-img-1: sha256:" in shot
    assert "evidence from route local" in shot
    assert "Create your account" in shot  # read from the pixels by the local OCR route
    last = upstream.requests[-1]
    assert "image_url" not in json.dumps(last)
    assert "look" in offered(last)  # the screenshot is an image of the conversation now


@pytest.mark.slow
async def test_a_screenshot_reaches_a_seeing_model_as_pixels(
    upstream: LoopbackUpstream, site: Site
) -> None:
    """The same screenshot deepseek-flash sees itself, inside the tool result (its sight
    learned by its probe, with no setting)."""
    require_browser()
    upstream.reset()
    settings = settings_for(upstream)
    llm = {**settings.llm.model_dump(), "model": VISION_MODEL, "models": []}
    settings = settings.model_copy(update={"llm": type(settings.llm).model_validate(llm)})
    seeing = Runtime(settings, DataHome.open(settings))
    await seeing.start()
    try:
        chat = Conversation(seeing, "web-shot-seen")
        await chat.say(call("browser_navigate", {"url": site.url("/form.html")}))
        shot = await chat.say(call("browser_screenshot", {}))
        assert "[tool-img-1: the screenshot," in shot
        assert "attached as pixels]" in shot
        assert "I see an image of" in shot  # the loopback decoded it in the tool result
        (tool,) = [m for m in upstream.requests[-1]["messages"] if m["role"] == "tool"][-1:]
        assert [p["type"] for p in tool["content"]] == ["text", "image_url"]
        assert upstream.decoded[-1]["images"][-1]["role"] == "tool"
        assert "evidence from route" not in json.dumps(upstream.requests[-1])
    finally:
        await seeing.aclose()
        seeing.home.close()


@pytest.mark.slow
async def test_a_browser_turn_books_computer_use_and_every_evidence_block(
    runtime: Runtime, upstream: LoopbackUpstream, site: Site
) -> None:
    """The calls that read browser results are computer_use, not final; the screenshot's
    evidence and a look reread at it are bridge input, though no user sent an image."""
    chat = Conversation(runtime, "web-usage")
    await chat.say(call("browser_navigate", {"url": site.url("/form.html")}))
    before = runtime.home.usage.summary()
    assert before["exact"]["computer_use"]["calls"] == 1  # the call that read the page
    assert "bridge_input" not in before["estimated"]  # a text page: no evidence yet
    await chat.say(call("browser_screenshot", {}))
    shot = runtime.home.usage.summary()["estimated"]["bridge_input"]
    assert shot["events"] == 1
    assert shot["estimated_tokens"] > 0
    reread = await chat.say("LOOK[tool-img-1]: What is the page's heading?")
    assert reread.startswith("after look:")
    after = runtime.home.usage.summary()
    assert after["estimated"]["bridge_input"]["events"] == 2
    assert after["estimated"]["bridge_input"]["estimated_tokens"] > shot["estimated_tokens"]
    assert after["exact"]["computer_use"]["calls"] == 2  # navigate, screenshot
    # The first calls of each turn (which read no result) and the one after look are final.
    assert after["exact"]["final"]["calls"] == 4


async def test_read_only_risk_offers_no_acting_tool(
    upstream: LoopbackUpstream, site: Site
) -> None:
    require_browser()
    upstream.reset()
    settings = settings_for(upstream, runtime={"tool_risk": "read-only"})
    runtime = Runtime(settings, DataHome.open(settings))
    try:
        await runtime.run(TurnRequest(messages=[{"role": "user", "content": call(
            "browser_navigate", {"url": site.url("/form.html")})}]))
        tools = set(offered(upstream.requests[0]))
        assert {"browser_navigate", "browser_observe", "browser_assert"} <= tools
        assert not tools & {"browser_click", "browser_type", "browser_upload",
                            "browser_dialog"}
    finally:
        await runtime.aclose()
        runtime.home.close()
