"""The ``code`` tool source: Code Mode's ``tools_search`` and ``run_code``.

Offered when some MCP server's tool mode is ``code`` or ``both`` (docs/code-mode.md). The
model searches the tools it may call (names, one-line summaries, Python signatures on
request) and sends a program; the program runs in the sandbox
(:class:`~deepseek_eyes.runtime.code.sandbox.Sandbox`) and each tool call it makes comes
back over the pipe to :meth:`CodeToolSource._nested`, which runs it through
:meth:`ToolHub.dispatch` — the function a native call goes through — on an offer built
with the hub's own stages (risk gate, namespace) from the tools allowed in code mode. So a
nested call meets the same allow/deny, catalog generation, quota, admission, artifacts,
images into the vision bridge and audit as a native one; ``context.parent`` names the run
in its audit row.

What reaches the model is the program's printed output (bounded) and one marker per nested
call (tool, status, digest, image count and ids), never the intermediate results.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.code.sandbox import Run, Sandbox
from deepseek_eyes.runtime.code.sdk import Declared, declaration, module_source, summary
from deepseek_eyes.runtime.mcp_tools import McpToolSource
from deepseek_eyes.runtime.tools import (
    CallRecord,
    DeferChannel,
    Offer,
    ToolHub,
    ToolOutcome,
    ToolSource,
    ToolSpec,
    TurnContext,
    prefixed,
    risk_gated,
)

__all__ = ["MARKER", "RUN_SPEC", "SEARCH_SPEC", "CodeToolSource"]

#: The prefix of a deferred marker line (one per nested call) in run_code's result.
MARKER = "[deepseekeyes:mcp-context]"
MAX_SEARCH_RESULTS = 40
MAX_STDERR_CHARS = 1500
MAX_CODE_CHARS = 100_000
#: run_code's description lists the callable tools' signatures while they fit in this many
#: characters (a model that sees them writes its program at once, with no tools_search
#: round trip); a longer catalog is left to tools_search.
MAX_LISTED_CHARS = 2_000

SEARCH_SPEC = ToolSpec(
    "tools_search",
    "Find the tools a run_code program can call: names and one-line summaries matching "
    "the query (words, any order; empty: all); signatures=true adds each Python signature.",
    {"type": "object", "properties": {
        "query": {"type": "string"}, "signatures": {"type": "boolean"}},
     "required": ["query"], "additionalProperties": False},
)
RUN_SPEC = ToolSpec(
    "run_code",
    "Run a Python 3 program in a sandbox (no network, no files but its own scratch "
    "directory). `import tools`; call tools.<name>(**args) (see tools_search) or "
    "tools.call(public_name, **args); each returns the result text or raises "
    "tools.ToolError. Only what the program prints comes back: print just what you need.",
    {"type": "object", "properties": {"code": {"type": "string"}},
     "required": ["code"], "additionalProperties": False},
    risk="exec",
)


class CodeToolSource:
    name = "code"
    prefix = ""  # its two names are its own; the namespace stage still keeps them unique

    def __init__(self, hub: ToolHub, mcp: McpToolSource, sandbox: Sandbox) -> None:
        self._hub = hub
        self._mcp = mcp
        self._sandbox = sandbox

    def tools(self, context: TurnContext) -> list[ToolSpec]:  # noqa: ARG002 - same for all
        return [SEARCH_SPEC, self.run_spec()] if self._mcp.code_mode else []

    def run_spec(self) -> ToolSpec:
        """run_code, its description listing the callable tools' signatures when they fit
        in :data:`MAX_LISTED_CHARS` (the listing changes only with the catalog, so the
        request prefix stays cacheable)."""
        listing = "\n".join(declaration(_declared(s)) for s in self.offer().specs)
        if not listing or len(listing) > MAX_LISTED_CHARS:
            return RUN_SPEC
        return replace(RUN_SPEC, description=f"{RUN_SPEC.description}\nTools:\n{listing}")

    def offer(self) -> Offer:
        """The tools a program may call now: code-mode tools through the hub's risk gate
        and namespace stages (allow/deny and the server's own gate are the host's)."""
        items: list[tuple[ToolSpec, ToolSource]] = [
            (spec, self._mcp) for spec in self._mcp.code_tools()]
        for stage in (risk_gated(self._hub.read_only), prefixed()):
            items = stage(items)
        return Offer(tuple(s for s, _ in items), {s.name: src for s, src in items})

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        if spec.name == SEARCH_SPEC.name:
            return self._search(arguments)
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip() or len(code) > MAX_CODE_CHARS:
            return ToolOutcome(f"run_code needs code: a Python program of at most "
                               f"{MAX_CODE_CHARS} characters", True,
                               {"code": "RUNTIME_TOOL_ARGUMENTS"})
        return await self._run(code, context)

    # tools_search ----------------------------------------------------------------------
    def _matches(self, query: str) -> list[ToolSpec]:
        words = query.lower().split()
        return [s for s in self.offer().specs
                if all(w in f"{s.name} {s.description}".lower() for w in words)]

    def _search(self, arguments: Mapping[str, Any]) -> ToolOutcome:
        query = arguments.get("query", "")
        if not isinstance(query, str):
            return ToolOutcome("query must be a string", True, {"code": "RUNTIME_TOOL_ARGUMENTS"})
        found = self._matches(query)
        if not found:
            return ToolOutcome(f"no tool matches {query[:80]!r}")
        lines = []
        for spec in found[:MAX_SEARCH_RESULTS]:
            if arguments.get("signatures") is True:
                lines.append(declaration(_declared(spec)))
            else:
                lines.append(f"{spec.name} — {summary(spec.description)}")
        if len(found) > MAX_SEARCH_RESULTS:
            lines.append(f"… {len(found) - MAX_SEARCH_RESULTS} more: narrow the query")
        return ToolOutcome("\n".join(lines))

    # run_code --------------------------------------------------------------------------
    async def _run(self, code: str, context: TurnContext) -> ToolOutcome:
        run_id = f"run-{uuid.uuid4().hex[:16]}"
        offer = self.offer()
        channel = DeferChannel(run_id)
        markers = channel.markers
        nested: list[ToolOutcome] = []

        async def handle(request: Mapping[str, Any]) -> dict[str, Any]:
            if request.get("op") == "search":
                query = request.get("query")
                found = self._matches(query if isinstance(query, str) else "")
                return {"tools": [{"name": s.name, "summary": summary(s.description),
                                   "signature": declaration(_declared(s))} for s in found]}
            tool, args = request.get("tool"), request.get("arguments")
            if request.get("op") != "call" or not isinstance(tool, str) \
                    or not isinstance(args, dict):
                return {"error": "a request is {op: call, tool, arguments} or {op: search}",
                        "code": "RUNTIME_CODE_PROTOCOL"}
            if not channel.open:  # the run is over: nothing could report this call
                return {"error": "the run has ended", "code": "MCP_RESULT_CONTEXT_UNAVAILABLE"}
            try:
                outcome = await self._hub.dispatch(offer, tool, json.dumps(args), context)
            except asyncio.CancelledError:
                # The run was stopped while the call was in flight: the server may have
                # acted, so the model is told of the call all the same.
                markers.append({"call": len(markers) + 1, "tool": tool, "status": "cancelled"})
                raise
            nested.append(outcome)
            markers.append(_marker(len(markers) + 1, tool, outcome))
            if outcome.is_error:
                return {"error": outcome.content, "code": outcome.details.get("code")}
            return {"content": outcome.content}

        record: CallRecord = {"tool": RUN_SPEC.name, "source": self.name, "parent": run_id}
        context.parent, context.defer = run_id, channel
        try:
            run: Run | None = await self._sandbox.run(code, module_source(
                _declared(s) for s in offer.specs), handle)
            failure: DeepSeekEyesError | None = None
        except DeepSeekEyesError as exc:
            run, failure = None, exc
        finally:
            channel.open = False
            context.parent, context.defer = None, None
        lines: list[str] = []
        if run is not None:
            lines.append(f"run_code: exit {run.exit_code} in {run.seconds:.2f} s, "
                         f"{len(markers)} nested calls")
            lines.append(_unforged(run.stdout.decode("utf-8", "replace").rstrip("\n")))
            if run.exit_code != 0:
                tail = run.stderr.decode("utf-8", "replace")[-MAX_STDERR_CHARS:]
                lines.append(f"stderr (its end):\n{_unforged(tail.rstrip())}")
                failure = DeepSeekEyesError(f"the program exited with {run.exit_code}",
                                            code="RUNTIME_CODE_FAILED")
        if failure is not None:
            lines.insert(0, f"run_code failed ({failure.code}): {failure.message}")
        lines += [f"{MARKER} {json.dumps(m, separators=(',', ':'))}" for m in markers]
        record.update({"nested": len(markers), "is_error": failure is not None,
                       "code": failure.code if failure is not None else None})
        context.calls.append(record)
        # The images the nested calls brought stay attachments the model can `look` at
        # (their ids are in the markers); none goes inline.
        images = tuple((i, {k: v for k, v in part.items() if k != "pixels"})
                       for o in nested for i, part in o.images)
        details: dict[str, Any] = {"parent": run_id, "nested": len(markers)}
        if failure is not None:
            details["code"] = failure.code
        return ToolOutcome("\n".join(line for line in lines if line), failure is not None,
                           details, images)

    async def close(self) -> None:
        return None


def _unforged(text: str) -> str:
    """The program's output with any line that looks like a marker defused: only the
    host writes markers (a program, or a tool result it prints, could forge one)."""
    if MARKER not in text:
        return text
    return "\n".join(f"(printed) {line}" if line.lstrip().startswith(MARKER) else line
                     for line in text.split("\n"))


def _declared(spec: ToolSpec) -> Declared:
    return Declared(spec.name, spec.description, spec.parameters)


def _marker(number: int, tool: str, outcome: ToolOutcome) -> dict[str, Any]:
    """A nested call as the model sees it: identity, status, digest, images; no text."""
    code = outcome.details.get("code")
    # The host's result digest already reads "sha256:…"; a failure's is made here.
    digest = str(outcome.details.get("result_sha256") or hashlib.sha256(
        outcome.content.encode()).hexdigest()).removeprefix("sha256:")
    marker: dict[str, Any] = {"call": number, "tool": tool}
    if outcome.details.get("server"):
        marker["server"] = outcome.details["server"]
    marker["status"] = "failed" if code else "tool-error" if outcome.is_error else "ok"
    if code:
        marker["code"] = code
    marker["digest"] = f"sha256:{digest}"
    # The result's images, read or not; the ids are those the bridge took in.
    marker["images"] = int(outcome.details.get("images") or len(outcome.images))
    if outcome.images:
        marker["image_ids"] = [i for i, _ in outcome.images]
    return marker
