"""Live output (the session's ``output`` events, the console's SSE) is redacted like a
receipt: configured secrets and secret-looking patterns never reach a subscriber, even when
a chunk boundary cuts a secret in two, and however long a line grows."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepseek_eyes.terminal.execution.redact import MARKER, LiveRedactor, Redactor
from terminal.support import Running, ServiceFactory

pytestmark = pytest.mark.anyio

SECRET = "s3cr3t-value-123456"


def _feed(live: LiveRedactor, *chunks: str) -> list[str]:
    out = [live.feed(chunk) for chunk in chunks]
    return [*out, live.flush()]


def test_a_secret_cut_by_a_chunk_boundary_is_redacted_whole() -> None:
    for cut in range(1, len(SECRET)):
        live = LiveRedactor(Redactor([SECRET]))
        out = _feed(live, f"one\nsee {SECRET[:cut]}", f"{SECRET[cut:]} here\ntwo")
        assert "".join(out) == f"one\nsee {MARKER} here\ntwo"
        assert out[0] == "one\n"  # finished lines are not held back
        assert all(SECRET[:4] not in part for part in out)


def test_a_subscriber_who_joins_mid_line_never_sees_part_of_a_secret() -> None:
    live = LiveRedactor(Redactor([SECRET]))
    assert live.feed(f"-----BEGIN PRIVATE KEY-----\nMIIEvQIB\nsee {SECRET[:9]}",
                     publish=False) == ""
    out = live.feed(f"{SECRET[9:]} ok\nMIIEvQIB\n-----END PRIVATE KEY-----\nafter\n")
    assert out == "\nafter\n"  # the key block began before the subscriber: still hidden
    live = LiveRedactor(Redactor([SECRET]))
    live.feed(f"first\nsee {SECRET[:9]}", publish=False)
    assert live.feed(f"{SECRET[9:]} ok\n") == f"see {MARKER} ok\n"


def test_a_pattern_cut_by_a_chunk_boundary_is_redacted() -> None:
    live = LiveRedactor(Redactor())
    out = _feed(live, "export API_KEY=abc", "def123456 ok\n", "Authorization: Bearer ",
                "abcdefghijklmnop\n")
    text = "".join(out)
    assert "abcdef123456" not in text
    assert "abcdefghijklmnop" not in text
    assert text == f"export API_KEY={MARKER} ok\nAuthorization: Bearer {MARKER}\n"


def test_long_lines_are_released_without_cutting_a_secret() -> None:
    live = LiveRedactor(Redactor([SECRET]), line_cap=1024)
    # Past the cap, all but the last 512 characters would be released: that cut falls
    # inside the secret, so the release stops where the secret starts.
    out = _feed(live, "x" * 1100, SECRET + "y" * 500, "z" * 30 + "\n")
    assert out == ["x" * 588, "x" * 512, f"{MARKER}" + "y" * 500 + "z" * 30 + "\n", ""]


def test_memory_stays_bounded_and_an_endless_match_stays_hidden() -> None:
    live = LiveRedactor(Redactor(), line_cap=1024)
    released = [live.feed("TOKEN=")]
    for _ in range(200):
        released.append(live.feed("a" * 1000))
        assert len(live._pending) <= live.hard_cap + 1000
    released.append(live.feed(" visible\n"))
    released.append(live.flush())
    text = "".join(released)
    assert "a" * 8 not in text
    assert text == f"TOKEN={MARKER} visible\n"


def test_a_private_key_block_stays_hidden_across_lines_and_chunks() -> None:
    live = LiveRedactor(Redactor())
    body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"]
    out = _feed(live, "before\n-----BEGIN PRIVATE KEY-----\n", f"{body[0]}\n{body[1][:10]}",
                f"{body[1][10:]}\n-----END PRIV", "ATE KEY-----\nafter\n")
    text = "".join(out)
    assert not any(line in text for line in body)
    assert text.startswith("before\n")
    assert text.endswith("after\n")


async def test_a_secret_split_across_two_real_output_chunks(
    make_service: ServiceFactory, workspace: Path
) -> None:
    """The child writes half the secret, waits for the test to see the line before it (so
    that half has been read as its own chunk), then writes the rest."""
    service = make_service(mode="trusted", redactor=Redactor([SECRET]))
    fifo = workspace / "go"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR)  # a writer exists, so the child's open never blocks
    code = ("import os; fd = os.open('go', os.O_RDONLY); "
            f"os.write(1, b'first line\\n{SECRET[:8]}'); os.read(fd, 1); "
            f"os.write(1, b'{SECRET[8:]} and API_KEY=abcdef123456\\n')")
    session_id = service.open_session()["session_id"]
    sub = service.bus.get(session_id).subscribe()  # type: ignore[union-attr]
    assert sub is not None
    plan = service.plan(session_id=session_id, argv=["python3", "-c", code])
    seen: list[dict[str, Any]] = []
    try:
        await service.execute(session_id, plan["plan_id"], wait=False)
        async with asyncio.timeout(30):
            async for event in sub.events():
                seen.append(event)
                if event["type"] == "output" and event["data"] == "first line\n":
                    os.write(holder, b"x")
                if event["type"] == "finished":
                    break
    finally:
        os.close(holder)
    output = [e["data"] for e in seen if e["type"] == "output"]
    assert output[0] == "first line\n"
    assert "".join(output) == f"first line\n{MARKER} and API_KEY={MARKER}\n"
    events = json.dumps([e for e in seen if e["type"] != "plan"])  # a plan shows its argv
    assert SECRET[:8] not in events
    assert SECRET[8:] not in events
    assert "abcdef123456" not in events
    receipt = service.receipts.get(seen[-1]["receipt_id"])
    assert receipt["stdout"]["text"] == f"first line\n{MARKER} and API_KEY={MARKER}\n"


@pytest.mark.parametrize("running", [{"redact": [SECRET]}], indirect=True)
async def test_sse_output_is_redacted(running: Running, http: httpx.AsyncClient) -> None:
    sid = (await http.post("/api/sessions", headers=running.console_headers())).json()["session_id"]
    seen: list[dict[str, Any]] = []
    ready = asyncio.Event()

    async def read() -> None:
        async with http.stream("GET", f"/api/sessions/{sid}/events",
                               headers=running.console_headers()) as response:
            ready.set()
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if seen[-1]["type"] == "finished":
                        return

    async with asyncio.timeout(60):
        reader = asyncio.create_task(read())
        await ready.wait()
        plan = (await http.post(f"/api/sessions/{sid}/plans", headers=running.console_headers(),
                                json={"argv": ["echo", SECRET, "password=hunter2hunter2",
                                               running.token]})).json()
        await http.post(f"/api/sessions/{sid}/plans/{plan['plan_id']}/execute",
                        headers=running.console_headers())
        await reader
    output = "".join(e["data"] for e in seen if e["type"] == "output")
    assert output == f"{MARKER} password={MARKER} {MARKER}\n"
    stream = json.dumps([e for e in seen if e["type"] != "plan"])
    for secret in (SECRET, "hunter2hunter2", running.token):
        assert secret not in stream
