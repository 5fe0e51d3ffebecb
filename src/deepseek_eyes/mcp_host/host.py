"""Exposure and dispatch: what the model may see and call, checked again at every call.

:meth:`McpHost.exposed` applies, in order: the global switch and suspension, each server's
state, allow/deny selectors (deny wins, empty allows nothing), the ``read-only`` risk gate,
then the global ``max_tools`` and ``max_schema_tokens`` budgets — the selectors, the gate and
the budget are the toolkit's exposure stages (:mod:`deepseek_eyes.toolkit.exposure`), the
same the runtime's tool hub composes. :meth:`McpHost.call_tool`,
:meth:`read_resource` and :meth:`get_prompt` repeat the same checks, enforce the per-run
quota, and pass the result through admission before hashing, storing or previewing it
(:meth:`list_resources` too, though it asks no server). Which shared content tools are
offered, and the resource list's pages, are :mod:`~deepseek_eyes.mcp_host.content`'s.
The CLI uses exactly these methods, so an operator sees what the model would.

A failure's message is scrubbed by the server's redactor before it is audited (as a hash)
or raised to be shown. The audit names a resource read by the allowed *template* it matched,
or by the SHA-256 of its URI: a concrete URI can carry an identifier, a path or a query
the audit must not keep. Prompt results keep each message's role, and embedded resources
keep their text, so the preview says who says what.
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

import anyio

from deepseek_eyes import telemetry
from deepseek_eyes.errors import McpError, McpPolicyError, StoreError
from deepseek_eyes.mcp_host.admission import admit
from deepseek_eyes.mcp_host.asking import Asker, AskQueue, asks_first
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.catalog import ToolEntry
from deepseek_eyes.mcp_host.content import (
    GENERIC_SCHEMAS,
    PROMPT_TOOL,
    RESOURCE_TOOL,
    RESOURCES_TOOL,
    as_content,
    offered_planes,
    plane_items,
    plane_tools,
    resource_page,
    template_regex,
    uri_digest,
)
from deepseek_eyes.mcp_host.manager import McpManager, ServerState
from deepseek_eyes.mcp_host.policy import permitted, risk_allowed
from deepseek_eyes.mcp_host.results import (
    MARKER_CHARS,
    ImageRef,
    canonical_json,
    decode_images,
    preview_text,
    store_images,
    truncation_marker,
    write_artifact,
)
from deepseek_eyes.mcp_host.review import review_text
from deepseek_eyes.mcp_host.wire import noting_requests
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.telemetry.conventions import (
    mcp_attributes,
    mcp_span_name,
    mcp_wire_attributes,
)
from deepseek_eyes.toolkit import exposure
from deepseek_eyes.usage import UsageCategory, UsageTracker, estimate_tokens

__all__ = [
    "PROMPT_TOOL",
    "RESOURCES_TOOL",
    "RESOURCE_TOOL",
    "CallResult",
    "ExposedTool",
    "McpHost",
    "OnProgress",
    "RunQuota",
]

#: The MCP method of each kind of call, and the network.transport of each server transport.
_METHODS = {"tool": "tools/call", "resource": "resources/read", "prompt": "prompts/get"}
_TRANSPORTS = {"stdio": "pipe", "streamable-http": "tcp"}

#: The span of a call while traces are off: none (a nullcontext can be entered again).
_UNTRACED: contextlib.nullcontext[None] = contextlib.nullcontext()
#: The request ids noted while traces are off: none. Noting them (a context variable set
#: and reset around the call) is only for the span, and cost more than a tenth of a
#: call's overhead over the bare SDK client.
_UNNOTED: contextlib.nullcontext[Sequence[Any]] = contextlib.nullcontext(())

#: Admitted results up to this many characters are finished on the event loop.
INLINE_RESULT_CHARS = 64 * 1024


class OnProgress(Protocol):
    """Told each progress notification of a call (the SDK's progress callback shape)."""

    async def __call__(self, progress: float, total: float | None,
                       message: str | None) -> None: ...


@dataclass(frozen=True)
class ExposedTool:
    """A model-facing definition; ``generation`` must come back with the call."""

    public_name: str
    server: str
    name: str
    description: str
    parameters: Mapping[str, Any]
    risk: str
    generation: int
    schema_tokens: int


@dataclass
class RunQuota:
    """External calls one run may make (``0`` = unlimited); charged before contacting."""

    limit: int
    used: int = 0

    def charge(self) -> None:
        if self.limit and self.used >= self.limit:
            raise McpPolicyError(f"the run reached its {self.limit} external MCP calls",
                                 code="MCP_CALL_QUOTA", details={"limit": self.limit})
        self.used += 1


class CallResult(NamedTuple):
    """One call's outcome. A ``NamedTuple``, immutable like a frozen dataclass and built
    about ten times quicker (one per call)."""

    server: str
    name: str
    is_error: bool
    preview: str
    truncated: bool
    result_sha256: str
    artifact: str | None
    images: tuple[ImageRef, ...] = ()


def _allowed_tools(state: ServerState) -> list[ExposedTool]:
    """A live server's tools its policy lets through: allow/deny selectors (deny wins),
    then its ``read-only`` risk gate."""
    s, cat = state.settings, state.catalog
    assert cat is not None
    if not s.tools_enabled or state.tools_status != "ready":
        return []
    policy: exposure.Stage[ToolEntry] = exposure.chained([
        exposure.filtered(lambda tool: permitted(s, "tools", tool.name)),
        exposure.risk_gated(s.risk_policy != "allow", lambda tool: tool.risk),
    ])
    return [ExposedTool(tool.public_name, s.id, tool.name, tool.description, tool.input_schema,
                        tool.risk, cat.generation, tool.schema_tokens)
            for tool in policy(list(cat.tools))]


def _content_tools(planes: Collection[str]) -> list[ExposedTool]:
    """The shared tools of ``planes`` (in a fixed order, whatever server asked for them)."""
    out = []
    for name in plane_tools(planes):
        desc, schema = GENERIC_SCHEMAS[name]
        out.append(ExposedTool(name, "deepseekeyes", name, desc, schema, "read", 0,
                               (len(desc) + len(str(schema))) // 4))
    return out


class McpHost:
    def __init__(self, manager: McpManager, *, blobs: BlobStore, artifacts: Any,
                 audit: McpAudit, usage: UsageTracker | None = None) -> None:
        self.manager = manager
        self.blobs = blobs
        self.artifacts = artifacts
        self.audit = audit
        self.usage = usage
        #: Ask-first calls waiting for a person (``mcp.servers[].ask``), and the last decided.
        self.asks = AskQueue(audit.ask_row)
        # exposed() is asked on every call; it is recomputed only when what it depends on —
        # the settings object and each live server's state, settings and (immutable)
        # catalog — is no longer the very same objects (a restart makes a new state).
        self._exposure: tuple[tuple[object, ...], list[ExposedTool], frozenset[str]] | None = None
        #: Public name -> (server, tool) of the calls resolved against that same exposure:
        #: a call to a tool resolved before skips the policy walk (the walk's outcome is a
        #: function of the exposure's inputs; refusals are not kept). Emptied with it.
        self._resolved: dict[str, tuple[ServerState, ToolEntry]] = {}

    # -- exposure ------------------------------------------------------------------------------
    def _live(self) -> list[ServerState]:
        if self.manager.suspended or not self.manager.settings.enabled:
            return []
        return [s for s in self.manager.servers.values()
                if s.status == "ready" and s.catalog is not None]

    def discovered(self, server_id: str) -> list[dict[str, Any]]:
        """Every discovered tool of one server, its risk class and whether it is exposed.

        Raises:
            McpError: ``MCP_SERVER_UNKNOWN``, ``MCP_SERVER_DISABLED``, ``MCP_SERVER_UNAVAILABLE``.
        """
        state = self._listed(server_id)
        exposed = {t.public_name for t in self.exposed()}
        return [{"name": t.name, "public_name": t.public_name, "risk": t.risk,
                 "exposed": t.public_name in exposed, "description": t.description,
                 "flags": review_text(t.description)}
                for t in (state.catalog.tools if state.catalog else ())]

    def server_instructions(self, server_id: str) -> dict[str, Any]:
        """The server's instructions as the model reads them (size-limited), and flags.

        Raises:
            McpError: as :meth:`discovered`.
        """
        state = self._listed(server_id)
        text = state.catalog.instructions if state.catalog else None
        return {"text": text, "flags": review_text(text or "")}

    def public_name_of(self, server_id: str, tool: str) -> str:
        """The public name of a *discovered* tool (exposure is checked at the call).

        Raises:
            McpError: ``MCP_SERVER_UNKNOWN``, ``MCP_SERVER_DISABLED``,
                ``MCP_SERVER_UNAVAILABLE`` or ``MCP_TOOL_NOT_EXPOSED``.
        """
        state = self._listed(server_id)
        assert state.catalog is not None
        for entry in state.catalog.tools:
            if entry.name == tool:
                return entry.public_name
        raise McpPolicyError(f"{server_id} has no tool {tool!r}", code="MCP_TOOL_NOT_EXPOSED",
                             details={"server": server_id})

    def _listed(self, server_id: str) -> ServerState:
        state = self.manager.require(server_id)
        if state.status == "disabled":
            raise McpError(f"{server_id} is disabled in the settings",
                           code="MCP_SERVER_DISABLED", details={"server": server_id})
        if state.catalog is None:
            raise McpError(
                f"{server_id} is not connected (last error: {state.last_error or 'none'})",
                code="MCP_SERVER_UNAVAILABLE",
                details={"server": server_id, "last_error": state.last_error})
        return state

    def _current_exposure(self, live: list[ServerState] | None = None
                          ) -> tuple[list[ExposedTool], frozenset[str]]:
        """The exposure and its public names, recomputed only when an input changed.

        ``live``: :meth:`_live` when the caller already holds it (a call resolving its
        tool has just walked it), so it is not listed twice.
        """
        if live is None:
            live = self._live()
        inputs = (self.manager.settings, *live, *(s.settings for s in live),
                  *(s.catalog for s in live))
        cached = self._exposure
        if (
            cached is not None
            and len(cached[0]) == len(inputs)
            and all(map(operator.is_, cached[0], inputs))
        ):
            return cached[1], cached[2]
        tools = self._compute_exposed(live)
        self._exposure = (inputs, tools, frozenset(t.public_name for t in tools))
        self._resolved = {}
        return tools, self._exposure[2]

    def exposed(self) -> list[ExposedTool]:
        """The tools the model is offered now (policy, risk and budgets applied)."""
        return list(self._current_exposure()[0])

    def _compute_exposed(self, live: list[ServerState]) -> list[ExposedTool]:
        """Each live server's tools through its own policy, then the shared tools of each
        content plane some server offers allowed items of, all under one budget (in
        server order)."""
        cfg = self.manager.settings
        candidates = [tool for state in live for tool in _allowed_tools(state)]
        # A plane's shared tools only when some server has that plane on and an allowed
        # item: a tool that could only fail would still cost schema budget.
        planes: set[str] = set()
        for state in live:
            assert state.catalog is not None
            if state.content_status == "ready":  # a failed or withdrawn plane offers nothing
                planes |= offered_planes(state.settings, state.catalog)
        candidates += _content_tools(planes)
        budget: exposure.Stage[ExposedTool] = exposure.budgeted(
            cfg.max_tools, cfg.max_schema_tokens, lambda tool: tool.schema_tokens)
        return budget(candidates)

    def instructions(self, offered: Collection[str] | None = None) -> dict[str, str]:
        """Server instructions, size-limited, keyed by the server that sent them — only of
        servers that expose at least one allowed tool, resource or prompt to this caller.

        ``offered``: the public tool names this caller is offered (a turn's offer, after
        its own budgets and exclusions); None: everything :meth:`exposed` holds. A server
        with nothing allowed gives the model nothing to use its words on, so its words
        never reach the system prompt (a hostile server's "ignore the user" included).
        """
        names = frozenset(t.public_name for t in self.exposed()) if offered is None \
            else frozenset(offered)
        users = {t.server for t in self.exposed() if t.public_name in names}
        content: dict[str, tuple[Literal["resources", "prompts"], str]] = {
            RESOURCES_TOOL: ("resources", "resources_enabled"),
            RESOURCE_TOOL: ("resources", "resources_enabled"),
            PROMPT_TOOL: ("prompts", "prompts_enabled")}
        out: dict[str, str] = {}
        for state in self._live():
            s, cat = state.settings, state.catalog
            if cat is None or not cat.instructions:
                continue
            reachable = s.id in users or any(
                generic in names and getattr(s, enabled) and any(
                    permitted(s, plane, item) for item in plane_items(cat, plane))
                for generic, (plane, enabled) in content.items())
            if reachable:
                out[s.id] = cat.instructions
        return out

    # -- dispatch ------------------------------------------------------------------------------
    def _resolve(self, public_name: str) -> tuple[ServerState, ToolEntry]:
        if self.manager.suspended:
            raise McpPolicyError("MCP exposure is suspended", code="MCP_EXPOSURE_SUSPENDED")
        live = self._live()
        exposed = self._current_exposure(live)[1]  # first: it empties a stale _resolved
        known = self._resolved.get(public_name)
        if known is not None:
            return known
        for state in live:
            assert state.catalog is not None
            tool = state.catalog.by_public.get(public_name)
            if tool is None or not state.settings.tools_enabled:
                continue
            if not permitted(state.settings, "tools", tool.name):
                break
            if not risk_allowed(state.settings, tool.risk):
                raise McpPolicyError(
                    f"{public_name} is {tool.risk}; the server is read-only",
                    code="MCP_TOOL_RISK_BLOCKED", details={"risk": tool.risk})
            if public_name not in exposed:
                break
            self._resolved[public_name] = (state, tool)  # exposed names only: bounded
            return state, tool
        raise McpPolicyError(f"no exposed MCP tool {public_name!r}", code="MCP_TOOL_NOT_EXPOSED")

    async def call_tool(self, public_name: str, arguments: Mapping[str, Any], *,
                        generation: int | None = None, quota: RunQuota | None = None,
                        progress: OnProgress | None = None,
                        parent: str | None = None, session_id: str | None = None,
                        asker: Asker | None = None) -> CallResult:
        """Run one exposed tool; ``progress`` is told each of the server's progress
        notifications for this call (progress, total or None, message or None); ``parent``
        names the Code Mode run that made the call (its audit row carries it). An ask-first
        tool's call waits for a person first (listed in :attr:`asks` under ``session_id``;
        ``asker`` may answer too, e.g. chat's terminal).

        Raises:
            McpError: a policy, quota, generation, transport or ``MCP_RESULT_*`` code;
                ``MCP_CALL_DENIED`` or ``MCP_APPROVAL_TIMEOUT`` for an ask-first call
                nobody approved.
        """
        state, tool = self._resolve(public_name)
        return await self._dispatch(state, "tool", tool.name, tool.risk, dict(arguments),
                                    generation, quota, progress=progress, parent=parent,
                                    session_id=session_id, asker=asker)

    async def _dispatch(self, state: ServerState, kind: str, name: str, risk: str,
                        arguments: dict[str, Any], generation: int | None,
                        quota: RunQuota | None, *, audit_name: str | None = None,
                        progress: OnProgress | None = None,
                        parent: str | None = None, session_id: str | None = None,
                        asker: Asker | None = None) -> CallResult:
        started = time.perf_counter()
        # A resource is read by URI with no arguments: its URI is what the hash covers.
        args_hash = canonical_json(arguments if kind != "resource" else {"uri": name})[1]
        audited = audit_name or name
        try:
            if kind == "tool" and asks_first(state.settings, name):
                # Before anything else: nothing reaches the server (nor the quota) unless a
                # person approves; the checks below then run on the catalog as it is now.
                await self.asks.ask(state.settings.id, name, arguments, session_id=session_id,
                                    timeout=self.manager.settings.ask_timeout, asker=asker)
            live = state.catalog.generation if state.catalog else -1
            if generation is not None and generation != live:
                raise McpError("the tool belongs to an older catalog generation",
                               code="MCP_GENERATION_STALE", details={"live": live})
            # Without a run's quota there is nothing to charge: a fresh one (a cap of zero
            # or more calls, none used) could never refuse, so none is made per call.
            if quota is not None:
                quota.charge()
            client = state.client
            if client is None:
                raise McpError(f"{state.settings.id} is not connected",
                               code="MCP_SERVER_UNAVAILABLE")
            timeout = state.settings.call_timeout
            try:
                # The request is counted while it runs: no liveness check competes with it,
                # and its reply (or its transport failure) is what liveness learns from.
                method = _METHODS[kind]
                # The span's name and attributes are built, and the request's id noted
                # for it, only when traces are on.
                noted: contextlib.AbstractContextManager[Sequence[Any]]
                if telemetry.active():
                    traced = telemetry.client_span(
                        mcp_span_name(method, name if kind != "resource" else None),
                        mcp_attributes(method, state.settings.id,
                                       tool=name if kind == "tool" else None,
                                       transport=_TRANSPORTS[state.settings.transport]))
                    noted = noting_requests()
                else:
                    traced, noted = _UNTRACED, _UNNOTED
                with state.activity.request(), state.faults.guard(timeout + 1), \
                        traced as span, noted as written:
                    # The trace context travels in params._meta (None when traces are off).
                    meta: Any = telemetry.trace_meta()
                    try:
                        if kind == "tool":
                            raw: Any = await client.call_tool(name, arguments,
                                                              read_timeout_seconds=timeout,
                                                              progress_callback=progress,
                                                              meta=meta)
                        elif kind == "resource":
                            raw = await client.read_resource(name, meta=meta)
                        else:
                            raw = await client.get_prompt(name, arguments or None, meta=meta)
                    finally:
                        if span is not None:
                            span.set_attributes(mcp_wire_attributes(
                                session_id=state.wire.session_id, protocol=state.protocol,
                                request_id=written[0] if written else None))
                    if getattr(raw, "is_error", False):  # the MCP conventions' tool_error
                        telemetry.fail(span, "tool_error")
            except Exception as exc:
                raise map_call_error(exc) from None
            now = state.catalog.generation if state.catalog else -1
            if now != live:
                raise McpError("the catalog changed during the call; its result was dropped",
                               code="MCP_GENERATION_STALE", details={"live": now})
            value = raw.model_dump(mode="json", by_alias=True, exclude_none=True)
            if kind != "tool":
                value = as_content(value)
            # Admission is bounded by its limits (lengths are read, never scanned), so it runs
            # here; it also tells how big the rest of the work is. A small text result is
            # hashed and previewed inline (a thread hop would cost more than the work); a big
            # one or one with images (blob writes) goes to a thread.
            size = admit(value)
            if size.images == 0 and size.string_chars + size.raw_bytes <= INLINE_RESULT_CHARS:
                result = self._store(value)
            else:
                result = await anyio.to_thread.run_sync(self._store, value)
        except (McpError, StoreError) as exc:  # StoreError: STORE_FULL storing the result
            state.redactor.scrub_error(exc)
            self.audit.record(server=state.settings.id, tool=audited, kind=kind, risk=risk,
                              status="failed", started=started, arguments_sha256=args_hash,
                              code=exc.code, message=exc.message, parent=parent)
            raise
        is_error = bool(value.get("isError"))
        self.audit.record(server=state.settings.id, tool=audited, kind=kind, risk=risk,
                          status="tool-error" if is_error else "ok", started=started,
                          arguments_sha256=args_hash, result_sha256=result[1], parent=parent)
        if self.usage is not None:  # summed per server until the audit row's flush
            self.usage.add_estimate(UsageCategory.MCP_RESULT, estimate_tokens(len(result[0])),
                                    source=state.settings.id)
        return CallResult(state.settings.id, name, is_error, result[0], result[2], result[1],
                          result[3], tuple(result[4]))

    def _store(self, value: Any) -> tuple[str, str, bool, str | None, list[ImageRef]]:
        """Hash, decode images, preview and keep an artifact of an *admitted* value; a cut
        preview ends with the marker saying so (within ``max_result_chars``)."""
        cfg = self.manager.settings
        data, digest = canonical_json(value)
        images = store_images(self.blobs, decode_images(value))
        preview, total, text_only = preview_text(value, images, cfg.max_result_chars)
        truncated = len(preview) < total
        artifact = None
        if cfg.persist_results and (truncated or not text_only):
            artifact = str(write_artifact(self.artifacts, data, digest))
        if truncated:
            kept = max(cfg.max_result_chars - MARKER_CHARS, 0)
            preview = preview[:kept] + truncation_marker(
                total - kept, total, digest if artifact is not None else None)
        return preview, digest, truncated, artifact, images

    # -- content plane -------------------------------------------------------------------------
    def _content_state(self, server_id: str, plane: str) -> ServerState:
        state = self.manager.require(server_id)
        if not getattr(state.settings, f"{plane}_enabled") or self.manager.suspended:
            raise McpError(f"{plane} are disabled for {server_id}", code="MCP_SERVER_DISABLED")
        if state not in self._live() or state.content_status != "ready":
            raise McpError(f"{server_id} is not connected", code="MCP_SERVER_UNAVAILABLE",
                           details={"server": server_id, "content_status": state.content_status,
                                    "last_error": state.content_error})
        return state

    def resources(self, server_id: str) -> list[dict[str, Any]]:
        state = self._content_state(server_id, "resources")
        assert state.catalog is not None
        return [{"uri": r.uri, "name": r.name, "template": r.template,
                 "allowed": permitted(state.settings, "resources", r.uri)}
                for r in state.catalog.resources]

    def prompts(self, server_id: str) -> list[dict[str, Any]]:
        state = self._content_state(server_id, "prompts")
        assert state.catalog is not None
        return [{"name": p.name, "arguments": [a for a, _ in p.arguments],
                 "allowed": permitted(state.settings, "prompts", p.name)}
                for p in state.catalog.prompts]

    def list_resources(self, server_id: str, cursor: str | None = None) -> CallResult:
        """One page of the server's *allowed* resources and templates, as the model reads
        it: admitted, hashed and previewed like any result (:mod:`.content` says why it
        pages over the discovered catalog; no server is contacted, so no quota is charged).

        Raises:
            McpError: as :meth:`resources`, or :func:`~.content.resource_page`'s codes.
        """
        state = self._content_state(server_id, "resources")
        assert state.catalog is not None
        value = resource_page(state.settings, state.catalog, cursor,
                              max_chars=self.manager.settings.max_result_chars - 200)
        admit(value)
        preview, digest, truncated, artifact, _ = self._store(value)
        return CallResult(server_id, RESOURCES_TOOL, False, preview, truncated, digest,
                          artifact)

    async def read_resource(self, server_id: str, uri: str, *,
                            quota: RunQuota | None = None,
                            parent: str | None = None) -> CallResult:
        state = self._content_state(server_id, "resources")
        assert state.catalog is not None
        match = next((
            r for r in state.catalog.resources
            if permitted(state.settings, "resources", r.uri) and (
                (not r.template and r.uri == uri)
                or (r.template and template_regex(r.uri).match(uri) is not None))
        ), None)
        if match is None or len(uri) > 2048:
            raise McpPolicyError(f"{uri!r} is not an allowed resource",
                                 code="MCP_RESOURCE_NOT_ALLOWED")
        audited = match.uri if match.template else uri_digest(uri)
        return await self._dispatch(state, "resource", uri, "read", {}, None, quota,
                                    audit_name=audited, parent=parent)

    async def get_prompt(self, server_id: str, name: str, arguments: Mapping[str, Any], *,
                         quota: RunQuota | None = None,
                         parent: str | None = None) -> CallResult:
        state = self._content_state(server_id, "prompts")
        assert state.catalog is not None
        prompt = next((p for p in state.catalog.prompts if p.name == name), None)
        if prompt is None or not permitted(state.settings, "prompts", name):
            raise McpPolicyError(f"no allowed prompt {name!r}", code="MCP_PROMPT_NOT_ALLOWED")
        known = {a for a, _ in prompt.arguments}
        missing = [a for a, required in prompt.arguments if required and a not in arguments]
        bad = [k for k, v in arguments.items() if k not in known or not isinstance(v, str)]
        if missing or bad:
            raise McpError("prompt arguments are invalid", code="MCP_ARGUMENTS_INVALID",
                           details={"missing": missing, "invalid": bad[:16]})
        return await self._dispatch(state, "prompt", name, "read", dict(arguments), None, quota,
                                    parent=parent)

    async def call_generic(self, public_name: str, arguments: Mapping[str, Any], *,
                           quota: RunQuota | None = None,
                           parent: str | None = None) -> CallResult:
        """Dispatch the shared content tools by their public names; one that is not
        offered now (its plane off, nothing allowed, or over the budget) is refused.
        ``parent`` names the Code Mode run that made the call (the read's or prompt's
        audit row carries it; listing contacts no server and writes no row).

        Raises:
            McpError: ``MCP_TOOL_NOT_EXPOSED``, or what the plane's method raises.
        """
        if public_name in GENERIC_SCHEMAS and public_name not in self._current_exposure()[1]:
            raise McpPolicyError(f"no exposed MCP tool {public_name!r}",
                                 code="MCP_TOOL_NOT_EXPOSED")
        server = str(arguments.get("server", ""))
        if public_name == RESOURCES_TOOL:
            cursor = arguments.get("cursor")
            if cursor is not None and not isinstance(cursor, str):
                raise McpError("cursor must be a string", code="MCP_ARGUMENTS_INVALID",
                               details={"invalid": ["cursor"]})
            return self.list_resources(server, cursor)
        if public_name == RESOURCE_TOOL:
            return await self.read_resource(server, str(arguments.get("uri", "")), quota=quota,
                                            parent=parent)
        if public_name == PROMPT_TOOL:
            args = arguments.get("arguments") or {}
            if not isinstance(args, Mapping):
                raise McpError("arguments must be an object", code="MCP_ARGUMENTS_INVALID")
            return await self.get_prompt(server, str(arguments.get("name", "")), args,
                                         quota=quota, parent=parent)
        return await self.call_tool(public_name, arguments, quota=quota, parent=parent)


def map_call_error(exc: BaseException) -> McpError:
    # A failed call came over a connection, which loaded the connection code already.
    from deepseek_eyes.mcp_host.connection import map_error

    return map_error(exc)
