"""The client side of the scale-out tests: the official ``openai`` client on the balancer,
and what a test reads back (which replica answered, the session, the chain, the images that
reached the upstream's seeing model)."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from helpers import require_module
from runtime.upstream import LoopbackUpstream
from topology import MODEL, Topology
from vision.loopback import solid_png

__all__ = ["SESSION", "Answer", "acquisitions", "ask", "client", "image", "see", "turns",
           "until", "verify"]

openai = require_module("openai")

SESSION = "x-deepseekeyes-session"


def client(topology: Topology) -> Any:
    """The official client on the balancer; no retries of its own, so a request the
    topology lost shows as a failure instead of being hidden by a resend."""
    return openai.OpenAI(base_url=topology.base_url, api_key=topology.key, max_retries=0,
                         timeout=60)


@dataclass
class Answer:
    text: str
    session: str
    replica: str


def ask(api: Any, messages: list[dict[str, Any]]) -> Answer:
    """One whole turn: its text, its session and the replica that answered."""
    raw = api.chat.completions.with_raw_response.create(model=MODEL, messages=messages)
    reply = raw.parse()
    return Answer(reply.choices[0].message.content or "", raw.headers[SESSION],
                  Topology.served_by(raw.headers))


def image(index: int) -> tuple[str, str]:
    """A new image (never sent before: the evidence cache has none) as a data URL, and the
    SHA-256 of its bytes."""
    png = solid_png(64 + index, 48 + int(uuid.uuid4().int % 64), (200, 30, 90))
    return ("data:image/png;base64," + base64.b64encode(png).decode(),
            hashlib.sha256(png).hexdigest())


def see(topology: Topology, url: str, text: str) -> Answer:
    """A turn about the image at ``url``, answered ``text`` (the upstream's ANSWER marker)."""
    with client(topology) as api:
        return ask(api, [{"role": "user", "content": [
            {"type": "text", "text": f"ANSWER: {text}"},
            {"type": "image_url", "image_url": {"url": url}}]}])


def acquisitions(upstream: LoopbackUpstream, digest: str) -> int:
    """Requests in which a seeing model decoded the image whose bytes hash to ``digest``."""
    return sum(any(one["sha256"] == digest for one in seen["images"])
               for seen in upstream.decoded)


def verify(topology: Topology) -> dict[str, Any]:
    """``audit verify --json`` on the topology's store; fails the test unless intact."""
    done = topology.cli("audit", "verify", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def turns(topology: Topology, session: str) -> list[dict[str, Any]]:
    """The turn records of ``session`` (``sessions show --json``), oldest first."""
    done = topology.cli("sessions", "show", session, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)["turns"]
    return found


def until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll ``condition`` (a count other threads raise) until it holds, bounded."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s")
        time.sleep(0.02)
