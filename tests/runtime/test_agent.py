"""The runtime as the hub: the model reaches MCP tools, the terminal and ``look`` in one
audited turn, against a loopback DeepSeek-like upstream that issues tool calls
(``CALL[tool]: args``) and a real MCP server (server-everything over stdio)."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.settings import Settings
from helpers import BLIND, LOCAL_VISION
from mcp_peers import everything_stdio
from runtime.upstream import VISION_MODEL, LoopbackUpstream

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
RECEIPT = (ROOT / "examples" / "receipt.png").read_bytes()
WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "the weather", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def settings_for(upstream: LoopbackUpstream, **sections: Any) -> Settings:
    llm = {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
           "timeout": 10.0, **BLIND}
    vision = {**LOCAL_VISION, **sections.pop("vision", {})}
    return Settings.model_validate({"llm": llm, "vision": vision, **sections})


async def open_runtime(settings: Settings) -> Runtime:
    runtime = Runtime(settings, DataHome.open(settings))
    await runtime.start()
    return runtime


async def close(runtime: Runtime) -> None:
    await runtime.aclose()
    runtime.home.close()


def user(text: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [*parts, {"type": "text", "text": text}]}


def offered(payload: Mapping[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in payload.get("tools") or []]


class Decide:
    """An approver that answers as told and remembers what it was shown."""

    via = "cli"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[Mapping[str, Any]] = []

    async def decide(self, plan: Mapping[str, Any]) -> Any:
        self.asked.append(plan)
        return self.answer


# -- MCP ----------------------------------------------------------------------------------------


@pytest.fixture
async def with_mcp(upstream: LoopbackUpstream) -> AsyncIterator[Runtime]:
    upstream.reset()
    server = everything_stdio(allow={"tools": ["echo", "get-tiny-image"]})
    settings = settings_for(upstream, mcp={"servers": [server.model_dump()]})
    runtime = await open_runtime(settings)
    yield runtime
    await close(runtime)


async def test_an_allowed_mcp_tool_reaches_the_final_answer(
    with_mcp: Runtime, upstream: LoopbackUpstream
) -> None:
    result = await with_mcp.run(TurnRequest(messages=[
        user('CALL[mcp__everything__echo]: {"message": "zebra-quartz"}')]))
    assert result.content.startswith("after mcp__everything__echo:")
    assert "zebra-quartz" in result.content
    assert result.model_calls == 2
    first, second = upstream.requests
    assert "mcp__everything__echo" in offered(first)  # offered on a text turn too
    assert "mcp__everything__get-tiny-image" in offered(first)
    assert "look" not in offered(first)  # no image: nothing to look at
    summary = with_mcp.home.usage.summary()
    assert summary["exact"]["final"]["calls"] == 1
    assert summary["exact"]["mcp_continuation"]["calls"] == 1  # the call reading the result
    assert summary["estimated"]["mcp_schema"]["estimated_tokens"] > 0
    assert summary["estimated"]["mcp_result"]["events"] == 1
    # The exchange is in the session log, marked internal, and in the MCP audit.
    stored = with_mcp.sessions.messages(result.session_id)
    assert [(m["role"], bool(m.get("internal"))) for m in stored] == [
        ("user", False), ("assistant", True), ("tool", True), ("assistant", False)]
    kinds = [row["kind"] for row in with_mcp.home.audit.recent()]
    assert any(kind.startswith("mcp.") for kind in kinds), kinds
    # The call that read the result was offered the same tools (a stable request prefix).
    assert offered(second) == offered(first)


async def test_the_run_quota_caps_mcp_calls_per_instruction(upstream: LoopbackUpstream) -> None:
    upstream.reset()
    server = everything_stdio(allow={"tools": ["echo"]})
    settings = settings_for(upstream, mcp={"servers": [server.model_dump()],
                                            "max_external_calls_per_run": 1})
    runtime = await open_runtime(settings)
    try:
        result = await runtime.run(TurnRequest(messages=[user(
            'CALL[mcp__everything__echo]: {"message": "one"} '
            'CALL[mcp__everything__echo]: {"message": "two"}')]))
        # Two calls in one response, one allowed per run: the second is refused, not run.
        assert "one" in result.content
        assert "MCP_CALL_QUOTA" in result.content
    finally:
        await close(runtime)


IMAGE_SERVER = """
from mcp.server.mcpserver import Image, MCPServer

app = MCPServer("pictures")


@app.tool()
def receipt() -> Image:
    \"\"\"A photo of a receipt.\"\"\"
    return Image(path={path!r})


app.run("stdio")
"""


@pytest.mark.slow
async def test_mcp_images_become_evidence_before_the_model_reads_them(
    upstream: LoopbackUpstream, tmp_path: Path
) -> None:
    upstream.reset()
    script = tmp_path / "pictures.py"
    script.write_text(IMAGE_SERVER.format(path=str(ROOT / "examples" / "receipt.png")))
    pictures = {"id": "pictures", "transport": "stdio", "command": sys.executable,
                "args": [str(script)], "allow": {"tools": ["receipt"]}}
    # server-everything's tiny image is a real malformed PNG (its iCCP chunk fails its CRC).
    everything = everything_stdio(allow={"tools": ["get-tiny-image"]}).model_dump()
    runtime = await open_runtime(settings_for(upstream, mcp={"servers": [pictures, everything]}))
    try:
        result = await runtime.run(TurnRequest(messages=[user(
            "CALL[mcp__pictures__receipt]: {} CALL[mcp__everything__get-tiny-image]: {}")]))
        _, second = upstream.requests
        tool = {m["tool_call_id"]: m["content"] for m in second["messages"]
                if m["role"] == "tool"}
        receipt, tiny = tool.values()
        assert "[tool-img-1: sha256:" in receipt  # evidence, with an id for look
        assert "evidence from route local" in receipt
        assert "TOTAL 64.03" in receipt
        assert "could not be read (IMAGE_TRUNCATED)" in tiny  # named, not counted
        assert "base64" not in json.dumps(second)
        assert "image_url" not in json.dumps(second)
        assert "64.03" in result.content
        # The tool's image is an image of the turn: look is offered from then on, and a
        # later turn can still look at it by the id its result gave.
        assert "look" not in offered(upstream.requests[0])
        assert "look" in offered(second)
        history = [user("CALL[mcp__pictures__receipt]: {} "
                        "CALL[mcp__everything__get-tiny-image]: {}"),
                   {"role": "assistant", "content": result.content},
                   user("LOOK[tool-img-1]: What is the TOTAL?")]
        first = await runtime.run(TurnRequest(messages=history[:1], session_id="pics"))
        history[1] = {"role": "assistant", "content": first.content}
        later = await runtime.run(TurnRequest(messages=history, session_id="pics"))
        assert later.fork is None
        assert later.rereads == 1
        assert later.content.startswith("after look:")
        assert "64.03" in later.content
    finally:
        await close(runtime)


@pytest.mark.slow
async def test_an_mcp_image_reaches_a_seeing_model_as_pixels(
    upstream: LoopbackUpstream, tmp_path: Path
) -> None:
    """The same MCP image a blind model gets as evidence (above) reaches deepseek-flash as
    pixels inside the tool result, learned with no setting: its probe, then no route."""
    upstream.reset()
    script = tmp_path / "pictures.py"
    script.write_text(IMAGE_SERVER.format(path=str(ROOT / "examples" / "receipt.png")))
    pictures = {"id": "pictures", "transport": "stdio", "command": sys.executable,
                "args": [str(script)], "allow": {"tools": ["receipt"]}}
    settings = Settings.model_validate({
        "llm": {"base_url": upstream.base_url, "api_key": False, "model": VISION_MODEL,
                "timeout": 10.0},
        "mcp": {"servers": [pictures]}})
    runtime = await open_runtime(settings)
    try:
        result = await runtime.run(TurnRequest(messages=[user("CALL[mcp__pictures__receipt]: {}")]))
        finals = [r for r in upstream.requests_for(VISION_MODEL)
                  if "PROBE:" not in json.dumps(r)]
        assert len(finals) == 2
        (tool,) = [m for m in finals[1]["messages"] if m["role"] == "tool"]
        kinds = [p["type"] for p in tool["content"]]
        assert kinds == ["text", "image_url"]
        assert "[tool-img-1: the tool's image, 900x700 image/png, attached as pixels]" in (
            tool["content"][0]["text"])
        decoded = upstream.decoded[-1]["images"]
        receipt = (ROOT / "examples" / "receipt.png").read_bytes()
        assert decoded == [{"sha256": hashlib.sha256(receipt).hexdigest(), "role": "tool",
                            "width": 900, "height": 700}]
        assert "I see an image of 900x700 pixels." in result.content
        assert "deepseekeyes.evidence" not in json.dumps(upstream.requests)  # no route asked
        assert runtime.home.usage.summary()["estimated"]["native_visual_turns"]["events"] == 1
    finally:
        await close(runtime)


# -- the terminal -------------------------------------------------------------------------------


@pytest.fixture
async def with_terminal(
    upstream: LoopbackUpstream, tmp_path: Path
) -> AsyncIterator[tuple[Runtime, Path]]:
    upstream.reset()
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "note.txt").write_text("canary-4417\n")
    settings = settings_for(upstream, runtime={"tool_sources": ["look", "terminal"]},
                            terminal={"workspaces": [str(workspace)], "mode": "confirm"})
    runtime = await open_runtime(settings)
    yield runtime, workspace
    await close(runtime)


async def test_plan_and_execute_through_the_terminal_source(
    with_terminal: tuple[Runtime, Path], upstream: LoopbackUpstream
) -> None:
    runtime, workspace = with_terminal
    result = await runtime.run(TurnRequest(messages=[
        user(f'CALL[terminal_run]: {{"argv": ["cat", "note.txt"], "cwd": "{workspace}"}}')]))
    assert "canary-4417" in result.content
    tools = offered(upstream.requests[0])
    assert {"terminal_plan", "terminal_execute", "terminal_run"} <= set(tools)
    assert "terminal_approve" not in tools  # the model can never approve
    assert "terminal_deny" not in tools
    # Every run ends in a signed receipt, found by the id the model was given.
    (turn,) = runtime.sessions.turns(result.session_id)
    executed = [c for c in turn.details["tool_calls"] if c["tool"] == "terminal_execute"]
    assert len(executed) == 1
    assert executed[0]["exit_code"] == 0
    assert runtime.terminal is not None
    receipt = runtime.terminal.receipt(executed[0]["receipt_id"])
    assert receipt["stdout"]["text"] == "canary-4417\n"


@pytest.mark.parametrize(("answer", "made", "code"), [
    ("approved", True, None),
    ("denied", False, "RUNTIME_APPROVAL_DENIED"),
    ("timeout", False, "RUNTIME_APPROVAL_TIMEOUT"),
    (None, False, "RUNTIME_APPROVAL_UNAVAILABLE"),
])
async def test_a_write_runs_only_when_a_person_approves_it(
    with_terminal: tuple[Runtime, Path], answer: str | None, made: bool, code: str | None
) -> None:
    runtime, workspace = with_terminal
    approver = Decide(answer) if answer is not None else None
    events: list[dict[str, Any]] = []
    result = await runtime.run(TurnRequest(
        messages=[user(f'CALL[terminal_run]: {{"argv": ["touch", "made.txt"], '
                       f'"cwd": "{workspace}"}}')],
        approver=approver, notify=events.append))
    assert (workspace / "made.txt").exists() is made
    # A run that completed is no error for the front end's event; a refused one is.
    (finished,) = [e for e in events if e["type"] == "tool.finished"]
    assert finished["is_error"] is not made
    if approver is not None:
        (shown,) = approver.asked
        assert shown["argv"] == ["touch", "made.txt"]
        assert shown["decision"]["requires_approval"] is True
        assert "approval.wanted" in [e["type"] for e in events]
    if code is not None:
        assert code in result.content
    else:
        assert '"exit_code": 0' in result.content


# -- the loop ----------------------------------------------------------------------------------


async def test_the_guard_forces_a_final_answer_instead_of_failing(
    upstream: LoopbackUpstream,
) -> None:
    upstream.reset()
    runtime = await open_runtime(settings_for(upstream, runtime={"max_model_calls_per_turn": 2}))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        result = await runtime.run(TurnRequest(messages=[
            user("LOOK[img-1]: What is the TOTAL?", image_part(meta))]))
        assert result.rereads == 1
        assert result.model_calls == 2  # exactly the bound: the second call is the last
        assert result.content.startswith("after look:")  # an answer, not an error
        first, last = upstream.requests
        assert offered(first) == ["look"]
        assert "tools" not in last  # the last call could only answer
        (turn,) = runtime.sessions.turns(result.session_id)
        assert turn.details["forced_final"] is True
    finally:
        await close(runtime)


@pytest.mark.slow
async def test_a_client_tool_and_look_in_one_response_lose_nothing(
    upstream: LoopbackUpstream,
) -> None:
    upstream.reset()
    runtime = await open_runtime(settings_for(upstream))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        message = user("LOOK[img-1]: What is the TOTAL? CALL[weather]: {}", image_part(meta))
        result = await runtime.run(TurnRequest(messages=[message], client_tools=[WEATHER],
                                               session_id="mixed-1"))
        # look ran here; the client's call went back to the client.
        assert result.rereads == 1
        assert [c.name for c in result.tool_calls] == ["weather"]
        assert result.finish_reason == "tool_calls"
        (call,) = result.tool_calls
        # The client answers its call in the same session, as OpenAI clients do.
        history = [message,
                   {"role": "assistant", "content": result.content,
                    "tool_calls": [{"id": call.id, "name": "weather", "arguments": "{}"}]},
                   {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
        again = await runtime.run(TurnRequest(messages=history, client_tools=[WEATHER],
                                              session_id="mixed-1"))
        assert again.fork is None
        assert "after weather: sunny" in again.content
        assert "after look:" in again.content
        assert "64.03" in again.content
    finally:
        await close(runtime)


@pytest.mark.slow
async def test_five_turns_keep_a_stable_cached_prefix(upstream: LoopbackUpstream) -> None:
    """Each request starts with the exact messages of the one before (evidence of earlier
    images stays where it was), so the upstream's prefix cache serves most of it."""
    upstream.reset(cache=True)
    runtime = await open_runtime(settings_for(upstream))
    try:
        meta = await runtime.bridge.admit(RECEIPT)
        asks = [user("What is on this receipt?", image_part(meta)), user("And the tax?"),
                user("LOOK[img-1]: What is the TOTAL?"), user("Thanks. Anything else?"),
                user("Summarize.")]
        history: list[dict[str, Any]] = []
        shares: list[float] = []
        for ask in asks:
            history.append(ask)
            result = await runtime.run(TurnRequest(messages=list(history), session_id="cache-5"))
            assert result.fork is None
            history.append({"role": "assistant", "content": result.content})
            shares.append(result.usage.cache_hit_tokens / max(1, result.usage.prompt_tokens))
        for earlier, later in zip(upstream.requests, upstream.requests[1:], strict=False):
            assert later["messages"][: len(earlier["messages"])] == earlier["messages"]
        assert len(upstream.requests) == 6  # turn 3 took two calls (look, then the answer)
        assert shares[0] == 0
        # Turn 2 re-sends turn 1's answer (the echo of its evidence) as new text, hence ~50%.
        assert min(shares[1:]) > 0.45, shares
        # Turn 3 called look, so its final answer goes back with its reasoning (DeepSeek's
        # whole-exchange rule): new, uncached text in turns 4 and 5.
        assert sum(shares[1:]) / 4 > 0.7, shares
    finally:
        await close(runtime)
