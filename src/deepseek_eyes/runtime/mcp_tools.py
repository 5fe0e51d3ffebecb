"""The ``mcp`` tool source: the MCP host's exposed tools, as the final model's tools.

What is offered is exactly :meth:`McpHost.exposed` (allow/deny, read-only risk gate,
``max_tools`` and ``max_schema_tokens`` of ``[mcp]``), including a content plane's shared
tools only when some server has that plane on and an allowed item. A call goes back through
the host, which checks policy and the catalog generation the tool was offered under
again, charges the run's quota and admits the result before anything is stored.

The quota is per *run* — one user instruction, however many model calls it takes — kept in
the turn context, so ``mcp.max_external_calls_per_run`` really caps what one instruction
can make the servers do (a fresh quota per call would cap nothing).

Images in a result never reach the text model as pixels: each is read back from the blob
store, decoded (a malformed one is named in the result, not counted as an image), turned
into validated evidence through the vision bridge, and given an image id (``tool-img-N``,
kept with the logged result) so the model can ``look`` at it, in this turn and later ones,
like any image of the conversation.

Code Mode (docs/code-mode.md): a server whose tool mode (``mcp.servers[].tool_mode``, else
``runtime.tool_mode``) is ``code`` offers its tools only to Code Mode programs
(:meth:`McpToolSource.code_tools`), ``both`` to both; a program's nested call arrives here
through the same :meth:`McpToolSource.call` with ``context.parent`` naming its run, and
``context.defer`` the run's open channel back to the model; a nested call without one is
refused before the server (``MCP_RESULT_CONTEXT_UNAVAILABLE``).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError, McpError
from deepseek_eyes.mcp_host.asking import Asker
from deepseek_eyes.mcp_host.host import (
    PROMPT_TOOL,
    RESOURCE_TOOL,
    RESOURCES_TOOL,
    CallResult,
    McpHost,
    OnProgress,
    RunQuota,
)
from deepseek_eyes.runtime.approval import describe_plan
from deepseek_eyes.runtime.delivery import deliver_image
from deepseek_eyes.runtime.tools import (
    CallRecord,
    ProgressEvent,
    ToolOutcome,
    ToolSpec,
    TurnContext,
)
from deepseek_eyes.usage import estimate_tokens
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["McpToolSource"]

#: Images of one tool result turned into evidence; the rest are only named.
MAX_RESULT_IMAGES = 4
_QUOTA = "mcp.quota"


class McpToolSource:
    name = "mcp"
    prefix = "mcp__"

    def __init__(self, host: McpHost, bridge: VisionBridge, *, max_images: int = 8,
                 tool_mode: str = "native") -> None:
        self.host = host
        self._bridge = bridge
        self._max_images = max_images
        self._tool_mode = tool_mode

    def mode(self, server: str) -> str:
        """``native``, ``code`` or ``both``: how ``server``'s tools reach the model (the
        shared content tools follow ``runtime.tool_mode``)."""
        for s in self.host.manager.settings.servers:
            if s.id == server and s.tool_mode is not None:
                return s.tool_mode
        return self._tool_mode

    def _specs(self, modes: Collection[str]) -> list[ToolSpec]:
        # Each spec carries the generation it was read under; nothing is kept here, where
        # concurrent turns (and a re-offer within a turn) would overwrite each other.
        return [
            ToolSpec(t.public_name, t.description, t.parameters,
                     risk="read" if t.risk == "read" else t.risk, generation=t.generation)
            for t in self.host.exposed() if self.mode(t.server) in modes
        ]

    def tools(self, context: TurnContext) -> list[ToolSpec]:  # noqa: ARG002 - same for all
        """The tools offered as functions (servers in ``native`` or ``both`` mode)."""
        return self._specs(("native", "both"))

    def code_tools(self) -> list[ToolSpec]:
        """The tools Code Mode programs may call (servers in ``code`` or ``both`` mode)."""
        return self._specs(("code", "both"))

    @property
    def code_mode(self) -> bool:
        """Whether any server (or the shared content tools) is in code or both mode."""
        return self._tool_mode != "native" or any(
            s.tool_mode in ("code", "both") for s in self.host.manager.settings.servers)

    def instructions(self, offered: Collection[str] | None = None) -> dict[str, str]:
        """Server instructions, keyed by server id (size-limited by the catalog), of the
        servers that have an allowed tool, resource or prompt among ``offered``."""
        return self.host.instructions(offered)

    def quota(self, context: TurnContext) -> RunQuota:
        quota = context.state.get(_QUOTA)
        if not isinstance(quota, RunQuota):
            quota = context.state[_QUOTA] = RunQuota(
                self.host.manager.settings.max_external_calls_per_run)
        return quota

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        name = spec.name
        quota = self.quota(context)
        try:
            if context.parent is not None and (context.defer is None
                                               or not context.defer.open):
                # Seed 000: a nested call whose result could not be reported to the model
                # is not made at all (no quota charged, no server contacted).
                raise McpError("the Code Mode run has no open channel to report this call "
                               "to the model; it was not made",
                               code="MCP_RESULT_CONTEXT_UNAVAILABLE",
                               details={"parent": context.parent})
            if name in (RESOURCES_TOOL, RESOURCE_TOOL, PROMPT_TOOL):
                result = await self.host.call_generic(name, arguments, quota=quota,
                                                      parent=context.parent)
            else:
                result = await self.host.call_tool(
                    name, arguments, generation=spec.generation, quota=quota,
                    progress=_relay_progress(name, context), parent=context.parent,
                    session_id=context.session_id, asker=_terminal_asker(context))
        except McpError as exc:
            failed: CallRecord = {"tool": name, "source": "mcp", "code": exc.code}
            if context.parent is not None:
                failed["parent"] = context.parent
            context.calls.append(failed)
            return ToolOutcome.failure(exc, name)
        text = result.preview
        images: list[tuple[str, dict[str, Any]]] = []
        evidence_tokens = 0
        if result.images:
            blocks = await self._evidence(result, context, images)
            evidence_tokens = sum(estimate_tokens(len(b)) for b, read in blocks if read)
            text = "\n\n".join([text, *(b for b, _ in blocks)])
        record: CallRecord = {
            "tool": name, "source": "mcp", "server": result.server,
            "is_error": result.is_error, "result_sha256": result.result_sha256,
            "images": len(result.images),
        }
        if context.parent is not None:
            record["parent"] = context.parent
        context.calls.append(record)
        return ToolOutcome(text, result.is_error, {"result_sha256": result.result_sha256,
                                                   "server": result.server,
                                                   "images": len(result.images)},
                           tuple(images), evidence_tokens=evidence_tokens)

    async def _evidence(
        self, result: CallResult, context: TurnContext, images: list[tuple[str, dict[str, Any]]]
    ) -> list[tuple[str, bool]]:
        """What stands for each image of a result, in order (:func:`deliver_image`: pixels
        for a seeing model, evidence for a blind one), each with whether it holds evidence
        (True) or a note (the image was not read, or goes as pixels)."""
        out: list[tuple[str, bool]] = []
        for number, ref in enumerate(result.images):
            sha = ref.blob.sha256
            if number >= MAX_RESULT_IMAGES or len(context.images) >= self._max_images:
                out.append((f"[image sha256:{sha[:16]}: not read; the turn's image limit "
                            "is reached]", False))
                continue
            try:
                data = await self._bridge.read_image(sha)
                (meta,) = await self._bridge.admit_all([data])
                delivered = await deliver_image(self._bridge, context, meta,
                                                what="tool's image")
            except DeepSeekEyesError as exc:
                out.append((f"[image sha256:{sha[:16]} from the tool could not be read "
                            f"({exc.code})]", False))
                continue
            images.append((delivered.image_id, delivered.part))
            out.append((delivered.text, delivered.evidence_tokens > 0))
        return out

    async def close(self) -> None:
        await self.host.manager.stop()


def _terminal_asker(context: TurnContext) -> Asker | None:
    """The person at chat's terminal, for an ask-first call (the turn's approver when it
    asks there); None elsewhere: the call then waits in the web console's Approvals."""
    approver = context.approver
    if approver is None or approver.via != "cli":
        return None
    asked_by = approver

    async def ask(request: Mapping[str, Any]) -> str:
        context.emit({"type": "approval.wanted", "ask_id": str(request.get("ask_id")),
                      "session_id": context.session_id, "via": asked_by.via,
                      "text": describe_plan(request)})
        decision = await asked_by.decide(request)
        context.emit({"type": "approval.decided", "ask_id": str(request.get("ask_id")),
                      "decision": decision})
        return decision

    return ask


#: Characters of a server's progress message shown to a front end.
PROGRESS_MESSAGE_CHARS = 200


def _relay_progress(name: str, context: TurnContext) -> OnProgress:
    """A call's progress notifications as ``tool.progress`` events, so that a front end
    shows a long tool's advance instead of a frozen line. The message is the server's: cut
    to one short printable line (a front end prints it on a terminal)."""
    started = time.monotonic()

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        event: ProgressEvent = {"type": "tool.progress", "tool": name, "source": "mcp",
                                "progress": progress, "total": total,
                                "elapsed_s": round(time.monotonic() - started, 1)}
        if message:
            text = "".join(c if c.isprintable() else " " for c in message)
            event["text"] = text[:PROGRESS_MESSAGE_CHARS]
        context.emit(event)

    return relay

