"""What the web console streams: the chain's verification with the verifier's own
progress, the whole chain as an export, and the MCP servers' live status.

Why streamed: a verification of a long chain takes seconds, and a progress bar that moves
by a timer would say nothing; the verifier reports each batch it checked
(:data:`deepseek_eyes.audit.verify.Progress`), and each report goes to the page as a JSON
line the moment it is made. The live status is the MCP manager's watch stream (what
``mcp watch`` prints) as server-sent events; each stream ends when the gateway begins to
stop (``ConsoleParts.stopping``), so an open page never holds the stop up.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from deepseek_eyes.audit.export import export_path
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.verify import verify_path
from deepseek_eyes.console.control import ConsoleParts, unavailable
from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["MAX_STREAMS", "exported_chain", "status_stream", "verify_lines"]


async def verify_lines(parts: ConsoleParts) -> AsyncIterator[bytes]:
    """The chain walked as ``audit verify`` walks it, as JSON lines: ``{"done", "total"}``
    each time the verifier has checked a batch, then ``{"report"}`` (or ``{"error"}``)."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def tell(line: dict[str, Any] | None) -> None:
        loop.call_soon_threadsafe(lines.put_nowait, line)

    def walk() -> None:
        root = parts.home.root
        try:
            keyring = AuditKeyring.read_only(audit_directory(root))
            report = verify_path(root / "eyes.db", keyring, progress=lambda done, total:
                                 tell({"done": done, "total": total}),
                                 url=parts.home.database_url or "",
                                 password=parts.home.database_password)
            tell({"report": dict(report.as_json())})
        except DeepSeekEyesError as exc:
            tell({"error": exc.to_dict()})
        finally:
            tell(None)

    walking = asyncio.create_task(asyncio.to_thread(walk))
    try:
        while (line := await lines.get()) is not None:
            yield (json.dumps(line) + "\n").encode()
    finally:
        await walking


def exported_chain(parts: ConsoleParts) -> bytes:
    """The whole chain as ``audit export`` writes it (a signed header, then one line an
    entry), which ``audit verify --file`` checks alone. Blocking: run it in a thread.

    Raises:
        AuditError: ``AUDIT_NOT_FOUND``, ``AUDIT_KEY_MISSING`` (as ``audit export``).
    """
    root = parts.home.root
    with tempfile.TemporaryDirectory(prefix="deepseek-eyes-export-") as scratch:
        target = Path(scratch) / "chain.jsonl"
        export_path(root / "eyes.db", target, AuditKeyring.read_only(audit_directory(root)),
                    url=parts.home.database_url or "", password=parts.home.database_password)
        return target.read_bytes()


#: The fields of a server's status event the page is sent (no log paths).
_STREAMED = ("id", "status", "tools_status", "content_status", "latency_ms", "last_error",
             "error", "retry_delay_s", "generation", "ts")
#: Live status streams open at once; one more is refused (each holds a connection).
MAX_STREAMS = 8
#: A comment line this often keeps a quiet stream's connection known to be alive.
_PING_S = 15.0


async def status_stream(parts: ConsoleParts) -> AsyncIterator[bytes]:
    """The manager's watch stream (:class:`~deepseek_eyes.mcp_host.events.StatusEvents`,
    what ``mcp watch`` prints) as server-sent events: every server's status first, then
    each change as it happens, until the page goes away or the gateway begins to stop.

    Raises:
        ConsoleError: ``CONSOLE_UNAVAILABLE`` without the gateway here.
    """
    manager = parts.mcp_manager
    if manager is None:
        raise unavailable("the live status")
    yield b"retry: 2000\n\n"
    async with manager.events.subscribe() as events:
        changes = aiter(events)
        stopping: asyncio.Future[Any] = asyncio.ensure_future(parts.stopping.wait())
        following: asyncio.Future[Any] = asyncio.ensure_future(anext(changes))
        try:
            while not parts.stopping.is_set():
                done, _ = await asyncio.wait({following, stopping}, timeout=_PING_S,
                                             return_when=asyncio.FIRST_COMPLETED)
                if following not in done:
                    yield b": ping\n\n"
                    continue
                event = following.result()
                shown = {k: event.get(k) for k in _STREAMED}
                yield f"event: status\ndata: {json.dumps(shown)}\n\n".encode()
                following = asyncio.ensure_future(anext(changes))
        finally:
            for waiting in (following, stopping):
                waiting.cancel()
            await asyncio.gather(following, stopping, return_exceptions=True)
