"""One turn: a conversation in, the final model's answer out, every step recorded.

The path is chosen once per turn:

* **text** — no image in the conversation: the messages go to the final model as sent.
  No router, probe or attempt record.
* **native** — the final model declares image input (settings or its ``/models`` entry):
  the current message's images go through unchanged (earlier ones as references), no
  evidence, probe or router call; counted as a ``native_visual_turns`` event.
* **bridged** — every image is replaced by validated evidence (cache first) and the model
  gets the ``look`` tool. The final model never receives an image part or unvalidated
  evidence.

On every path the model is offered the runtime's tools (:class:`ToolHub`: ``look``, MCP,
the terminal, as ``[runtime] tool_sources`` lists them), and the turn is a loop: model
call, the runtime's own tool calls, model call, … until an answer. Decisions a newcomer
would otherwise undo:

* **Bounded per user instruction.** ``max_model_calls_per_turn`` counts every model call
  since the latest user message, across HTTP requests (a client returning its own tool
  results continues the same instruction). When the bound is reached, one last call
  *without tools* asks for the answer, so a loop ends in an answer, not an error.
* **Nothing is dropped.** One model response may call the runtime's tools and the client's
  own: the runtime's run here, the client's go back to the client. The runtime's exchange
  is logged (marked ``internal``) and, when the client continues the session, put back
  where it was, so the model sees every result it asked for.
* **The session log is the history.** A request that extends its session is rendered from
  the stored log plus the new messages (which is how internal exchanges come back); one
  that does not starts a fork (see :meth:`TurnRunner._log_request`).
* **Thinking mode.** DeepSeek refuses a tool-call assistant message without the
  ``reasoning_content`` it came with. The log stores every answer's exact reasoning; the
  view sends it back for each exchange that called tools, and a turn's own tool rounds
  render their assistant message the same way (:func:`~deepseek_eyes.runtime.view.
  render_assistant`), so the next request shares the prefix. Reasoning a client dropped
  is restored before the request is logged; what cannot be restored is refused there,
  before any upstream call (:meth:`TurnRunner._thinking`).
* **Retries.** The client retries a busy upstream; each attempt it reports becomes an
  ``llm.request`` audit row, and only the answered one carries usage.
* **Usage.** Each model call is exact ``final`` usage, or ``mcp_continuation`` when it reads
  results of MCP calls; the MCP tool definitions it carried are estimated as
  ``mcp_schema``.

The same code serves the CLI (``ask``) and the gateway, streamed or not. A streamed turn is
not blind: tool progress and approval requests travel as ``deepseekeyes`` event chunks
(``choices: []``), the last chunk carries the same ``deepseekeyes`` object (session id,
path, evidence) a whole answer carries, and the client's tool-call deltas are forwarded as
they arrive (:class:`_ToolRelay`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError, LLMError, TurnError
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.client import MAX_TOOL_CALLS, ChatClient, ChatResult, ToolCall
from deepseek_eyes.llm.retry import attempts_json
from deepseek_eyes.llm.thinking import ThinkingMode, model_defaults, reasoning_gaps, thinking_mode
from deepseek_eyes.runtime.messages import image_refs
from deepseek_eyes.runtime.reasoning import restore_reasoning
from deepseek_eyes.runtime.tools import Notify, Offer, ToolHub, ToolOutcome, TurnContext
from deepseek_eyes.runtime.view import (
    EvidenceSlot,
    View,
    build_view,
    native_pixels,
    render_assistant,
    sends_reasoning,
)
from deepseek_eyes.settings import LLMSettings, RuntimeSettings
from deepseek_eyes.store.events import Fork, SessionStore, TurnRecord, body_digest, message_calls
from deepseek_eyes.usage import ProviderUsage, UsageCategory, UsageTracker
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = [
    "TurnRequest", "TurnResult", "TurnRunner", "TurnStream", "deepseekeyes_json", "usage_json",
]

#: OpenAI request fields passed to the final model unchanged.
PASSTHROUGH = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "presence_penalty",
    "frequency_penalty", "response_format", "seed", "logprobs", "top_logprobs", "user",
    "thinking", "reasoning_effort", "parallel_tool_calls", "logit_bias",
})


@dataclass
class TurnRequest:
    messages: list[dict[str, Any]]  # the whole conversation, runtime format
    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    client_tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    session_id: str | None = None
    source: str = "gateway"
    include_usage: bool = False
    approver: Any = None  # deepseek_eyes.runtime.approval.Approver, or None: nobody
    notify: Notify | None = None  # progress events (tool calls, approvals)


@dataclass
class TurnResult:
    turn_id: str
    session_id: str
    model: str
    path: str
    content: str
    reasoning: str
    finish_reason: str
    tool_calls: list[ToolCall]
    usage: ProviderUsage
    evidence: list[dict[str, Any]]
    rereads: int
    model_calls: int
    created: int
    fork: Fork | None = None  # set when the history did not extend the named session
    tools: list[dict[str, Any]] = field(default_factory=list)  # the runtime's calls (audit rows)
    requests: list[dict[str, Any]] = field(default_factory=list)  # upstream request hashes
    audit: dict[str, Any] | None = None  # the chain's head (and checkpoint) after the turn
    thinking: dict[str, Any] | None = None  # the thinking mode, restored reasoning, fallback


def add_usage(a: ProviderUsage, b: ProviderUsage) -> ProviderUsage:
    return ProviderUsage(
        a.prompt_tokens + b.prompt_tokens,
        a.completion_tokens + b.completion_tokens,
        a.reasoning_tokens + b.reasoning_tokens,
        a.cache_hit_tokens + b.cache_hit_tokens,
        a.cache_miss_tokens + b.cache_miss_tokens,
    )


def usage_json(usage: ProviderUsage) -> dict[str, Any]:
    """Usage in the OpenAI shape, with DeepSeek's cache fields beside it: OpenAI clients
    (openai, langchain-openai, pydantic-ai) read cache hits only from
    ``prompt_tokens_details.cached_tokens``."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_cache_hit_tokens": usage.cache_hit_tokens,
        "prompt_cache_miss_tokens": usage.cache_miss_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_hit_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def deepseekeyes_json(result: TurnResult) -> dict[str, Any]:
    """The ``deepseekeyes`` object of a response: what a client cannot learn elsewhere."""
    out: dict[str, Any] = {
        "session_id": result.session_id,
        "path": result.path,
        "evidence": result.evidence,
        "rereads": result.rereads,
    }
    if result.tools:
        out["tools"] = result.tools
    if result.fork is not None:
        out["fork"] = {"from": result.fork.parent, "at": result.fork.at}
    if result.thinking is not None:
        out["thinking"] = result.thinking
    out["provenance"] = {
        # image hash -> attempts (operation) -> evidence hash -> request hash -> usage,
        # each resolvable with `deepseek-eyes audit show` (the turn id resolves them all)
        "turn_id": result.turn_id,
        "images": [
            {k: e[k] for k in ("sha256", "operation_id", "record_sha256") if k in e}
            for e in result.evidence
        ],
        "requests": result.requests,
        "audit": result.audit,
    }
    return out


def _visible_digest(message: Mapping[str, Any]) -> str:
    """A message as the client sees and resends it: an assistant message without the
    reasoning the client is not asked to send back."""
    if message.get("role") != "assistant":
        return body_digest(dict(message))
    visible: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        visible["tool_calls"] = message["tool_calls"]
    return body_digest(visible)


def _tool_call_json(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in calls
    ]


#: Server instructions put into the system prompt: per server, and in all.
MAX_INSTRUCTIONS_PER_SERVER = 2000
MAX_INSTRUCTIONS_CHARS = 6000


@dataclass
class _Turn:
    """Everything prepared before the first model call."""

    request: TurnRequest
    turn_id: str
    session_id: str
    model: str
    path: str
    view: View
    context: TurnContext
    offer: Offer
    payload: dict[str, Any]
    started: float
    evidence: list[dict[str, Any]]
    prior_calls: int = 0  # model calls of this instruction in earlier requests
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    model_calls: int = 0
    fork: Fork | None = None
    continuation: bool = False  # the next model call reads MCP results
    forced_final: bool = False
    client_names: frozenset[str] = frozenset()
    requests: list[dict[str, Any]] = field(default_factory=list)
    thinking: ThinkingMode = None
    thinking_note: dict[str, Any] | None = None

    @property
    def internal(self) -> frozenset[str]:
        return self.offer.names


def _instructions_prompt(instructions: Mapping[str, str]) -> str | None:
    """Server instructions as one bounded system message, marked as the servers' words."""
    pieces: list[str] = []
    total = 0
    for server, text in sorted(instructions.items()):
        text = text.strip()[:MAX_INSTRUCTIONS_PER_SERVER]
        if not text or total + len(text) > MAX_INSTRUCTIONS_CHARS:
            continue
        total += len(text)
        pieces.append(f"[{server}]\n{text}")
    if not pieces:
        return None
    return ("Instructions from the connected MCP servers about their own tools (the "
            "servers' words, not the user's):\n\n" + "\n\n".join(pieces))


def _prior_calls(messages: Sequence[Mapping[str, Any]]) -> int:
    """Model calls already made for the latest user message (its assistant messages)."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant":
            count += 1
    return count


class TurnRunner:
    def __init__(
        self,
        *,
        settings: RuntimeSettings,
        llm: LLMSettings,
        bridge: VisionBridge,
        client: ChatClient,
        catalog: ModelCatalog,
        tools: ToolHub,
        sessions: SessionStore,
        usage: UsageTracker,
    ) -> None:
        self._settings = settings
        self._llm = llm
        self._bridge = bridge
        self._client = client
        self._catalog = catalog
        self._tools = tools
        self._sessions = sessions
        self._usage = usage

    # preparation -------------------------------------------------------------
    async def _prepare(self, request: TurnRequest) -> _Turn:
        started = time.time()
        model = request.model or await self._catalog.default_model()
        images = image_refs(request.messages)
        if len(images) > self._settings.max_images_per_turn:
            raise TurnError(
                f"the conversation holds {len(images)} images; at most "
                f"{self._settings.max_images_per_turn} are allowed",
                code="RUNTIME_TOO_MANY_IMAGES",
                details={"images": len(images), "limit": self._settings.max_images_per_turn},
            )
        if not images:
            path = "text"
        elif await self._catalog.image_input(model):
            path = "native"
        else:
            path = "bridged"
        request, thinking, note = self._thinking(request, model)
        session_id, fork, conversation = self._log_request(request)
        try:
            turn = await self._bridge_and_build(
                request, conversation, model, path, session_id, started, thinking)
            turn.fork = fork
            turn.thinking_note = note
            return turn
        except DeepSeekEyesError as exc:
            # The request is logged; its failure to reach the model is recorded with it,
            # and the caller learns which session holds it.
            exc.details.setdefault("session_id", session_id)
            self._sessions.record_turn(TurnRecord(
                id=f"turn-{uuid.uuid4().hex[:20]}", session_id=session_id,
                started_at=started, ended_at=time.time(), model=model, path=path,
                outcome="failed", code=exc.code, details={"stage": "prepare"},
            ))
            raise

    def _thinking(
        self, request: TurnRequest, model: str
    ) -> tuple[TurnRequest, ThinkingMode, dict[str, Any] | None]:
        """DeepSeek's thinking mode for this request, before anything is logged: reasoning
        a client dropped is restored from the session store; a tool-call message whose
        reasoning cannot be restored is refused (``LLM_REASONING_MISSING``, no upstream
        call) or, with ``llm.thinking_fallback = "disable"``, sent with thinking off.

        Raises:
            LLMError: ``LLM_REASONING_MISSING`` (details: message_index, tool_call_ids,
                model, param).
        """
        mode = thinking_mode(model, request.params, self._llm)
        messages, restored = restore_reasoning(request.messages, self._sessions)
        request = dataclasses.replace(request, messages=messages)
        gaps = reasoning_gaps(messages) if mode == "enabled" else []
        note: dict[str, Any] = {"mode": mode, "reasoning_restored": restored}
        if gaps:
            first = gaps[0]
            ids = [str(c.get("id")) for c in message_calls(messages[first])][:8]
            if self._llm.thinking_fallback == "refuse":
                raise LLMError(
                    f"messages[{first}] is an assistant message with tool calls and no "
                    f"reasoning_content, which {model} requires in thinking mode, and this "
                    "gateway did not issue those calls, so it cannot restore it. Send each "
                    "assistant message back with the reasoning_content it came with, or "
                    'send thinking = {"type": "disabled"} (or set llm.thinking_fallback = '
                    '"disable")',
                    code="LLM_REASONING_MISSING",
                    details={"message_index": first, "messages": len(gaps),
                             "tool_call_ids": ids, "model": model,
                             "param": f"messages[{first}].reasoning_content"},
                )
            mode = "disabled"
            params = {**request.params, "thinking": {"type": "disabled"}}
            request = dataclasses.replace(request, params=params)
            note = {"mode": mode, "reasoning_restored": restored,
                    "fallback": "disabled", "reason": "LLM_REASONING_MISSING",
                    "message_index": first}
        return request, mode, note if mode is not None or restored else None

    async def _bridge_and_build(
        self,
        request: TurnRequest,
        conversation: list[dict[str, Any]],
        model: str,
        path: str,
        session_id: str,
        started: float,
        thinking: ThinkingMode = None,
    ) -> _Turn:
        context = TurnContext(
            session_id=session_id,
            images={},
            max_tool_calls=self._settings.max_tool_calls_per_turn,
            max_rereads=self._settings.max_rereads_per_turn,
            notify=request.notify,
            approver=request.approver,
        )
        evidence: list[dict[str, Any]] = []
        slots: dict[str, EvidenceSlot] = {}
        originals: dict[str, bytes] = {}
        if path == "bridged":
            for number, image in enumerate(image_refs(conversation), start=1):
                image_id = f"img-{number}"
                result = await self._bridge.see_stored(image["sha256"])
                slots[image["sha256"]] = EvidenceSlot(
                    image_id, image, result.route, result.record.record_sha256,
                    result.record.evidence,
                )
                context.images[image_id] = {**image, "route": result.route}
                evidence.append({
                    "image": image_id, "sha256": image["sha256"], "route": result.route,
                    "record_sha256": result.record.record_sha256, "cached": result.cached,
                    "operation_id": result.operation_id,
                })
        # Images earlier tool results brought keep their ids (their evidence is in the text).
        for message in conversation:
            for image in message.get("images") or () if message.get("role") == "tool" else ():
                context.images.setdefault(str(image["id"]), {
                    k: v for k, v in image.items() if k != "id"})
        if path == "native":
            self._usage.count(UsageCategory.NATIVE_VISUAL_TURNS, source=model)
            for sha in native_pixels(conversation, self._settings.native_history_images):
                originals[sha] = await self._bridge.read_image(sha)
        view = build_view(
            conversation,
            path=path,
            slots=slots,
            image_bytes=originals,
            budget_tokens=self._settings.history_budget_tokens if path != "text" else None,
            history_evidence=self._settings.history_evidence,
            native_history_images=self._settings.native_history_images,
            thinking=thinking,
        )
        if path == "bridged":
            self._usage.record_estimate(
                UsageCategory.BRIDGE_INPUT, view.evidence_tokens, source=model, calls=1
            )
            if view.avoided_tokens:
                # Pointers instead of earlier images' full evidence, by the same estimate
                # as the evidence sent; nothing in history_evidence = "full".
                self._usage.record_estimate(
                    UsageCategory.AVOIDED_REPLAY, view.avoided_tokens, source="pointers",
                    calls=1,
                )
        client_names = frozenset(
            str(t.get("function", {}).get("name")) for t in request.client_tools
            if isinstance(t, Mapping)
        )
        offer = self._tools.offer(context, exclude=client_names)
        messages = list(view.messages)
        mcp = self._tools.source("mcp")
        instructions = getattr(mcp, "instructions", None)
        if offer.schema_tokens("mcp") and instructions is not None:
            # Only servers with an allowed tool, resource or prompt in *this* offer speak.
            prompt = _instructions_prompt(instructions(
                [name for name, source in offer.routes.items() if source is mcp]))
            if prompt is not None:
                at = 1 if path == "bridged" else 0
                messages.insert(at, {"role": "system", "content": prompt})
        payload: dict[str, Any] = {"model": model, "messages": messages}
        payload.update({k: v for k, v in request.params.items() if k in PASSTHROUGH})
        for key, value in model_defaults(model, self._llm).items():  # the model's settings
            if payload.get(key) is None:
                payload[key] = value
        tools = list(request.client_tools) + offer.openai()
        if tools:
            payload["tools"] = tools
            if request.tool_choice is not None:
                payload["tool_choice"] = request.tool_choice
        return _Turn(
            request=request, turn_id=f"turn-{uuid.uuid4().hex[:20]}", session_id=session_id,
            model=model, path=path, view=view, context=context, offer=offer,
            payload=payload, started=started, evidence=evidence,
            prior_calls=_prior_calls(conversation), client_names=client_names,
            thinking=thinking,
        )

    def _log_request(
        self, request: TurnRequest
    ) -> tuple[str, Fork | None, list[dict[str, Any]]]:
        """Append the messages the session has not seen yet.

        Returns the session id, the fork (when one was started) and the conversation the
        model is shown: for a continued session, the stored log (with the runtime's own
        internal exchanges) followed by the new messages.

        Clients resend the whole history each turn. One that extends the stored history
        continues the session. One that does not (an edited or regenerated message, a
        trimmed or different history under the same id) would otherwise be appended as
        if it continued; it starts a new session instead, forked from the named one at the
        last shared message, and the answer says so (``deepseekeyes.fork``).
        """
        if request.session_id is None:  # a session of its own: one transaction, no lookups
            session_id = self._sessions.new_id()
            self._sessions.append(session_id, request.messages, create=request.source)
            return session_id, None, list(request.messages)
        session_id = request.session_id
        self._sessions.ensure(session_id, request.source)
        log = self._sessions.messages(session_id)
        stored = [_visible_digest(m) for m in log if not m.get("internal")]
        # The runtime's internal exchanges are skipped on both sides (``ask --session``
        # resends the stored history, internal messages included).
        matched = common = 0
        for message in request.messages:
            if message.get("internal"):
                common += 1
                continue
            if matched == len(stored) or stored[matched] != _visible_digest(message):
                break
            matched += 1
            common += 1
        if matched < len(stored):
            fork = Fork(session_id, matched)
            forked = self._sessions.new_id()
            self._sessions.append(forked, request.messages, create=request.source, fork=fork)
            return forked, fork, list(request.messages)
        new = [m for m in request.messages[common:] if not m.get("internal")]
        self._sessions.append(session_id, new)
        return session_id, None, [*log, *new]

    # the loop ------------------------------------------------------------------
    def _split(
        self, turn: _Turn, calls: Sequence[ToolCall]
    ) -> tuple[list[ToolCall], list[ToolCall]]:
        if turn.forced_final:  # no tools were offered: whatever it called is not run
            return [], []
        internal = [c for c in calls if c.name in turn.internal]
        external = [c for c in calls if c.name not in turn.internal]
        return internal, external

    def _payload(self, turn: _Turn) -> dict[str, Any]:
        """The next model call's request; past the bound, one last call without tools."""
        calls = turn.prior_calls + turn.model_calls
        if calls < self._settings.max_model_calls_per_turn:
            if turn.offer.schema_tokens("mcp"):
                self._usage.record_estimate(
                    UsageCategory.MCP_SCHEMA, turn.offer.schema_tokens("mcp"), source="mcp",
                    calls=1)
            return turn.payload
        turn.forced_final = True
        turn.context.emit({"type": "turn.final_call", "model_calls": calls})
        # Without tools the model can only answer. No note is appended: a message after
        # the tool results would break providers that expect the results last.
        return {k: v for k, v in turn.payload.items() if k not in ("tools", "tool_choice")}

    def _count_call(self, turn: _Turn, result: ChatResult, payload: Mapping[str, Any]) -> None:
        turn.model_calls += 1
        turn.usage = add_usage(turn.usage, result.usage)
        category = UsageCategory.MCP_CONTINUATION if turn.continuation else UsageCategory.FINAL
        self._usage.record_exact(
            category, result.usage, source=turn.path, model=result.model or turn.model
        )
        # The request as sent, by hash, with the usage it was billed: the audit row is on
        # the chain, so an answer's provenance reaches the exact upstream request.
        self._record_retries(turn, attempts_json(result.retries), call=turn.model_calls)
        request = {
            "request_sha256": result.request_sha256 or body_digest(dict(payload)),
            "call": turn.model_calls,
            "model": result.model or turn.model, "usage": usage_json(result.usage),
        }
        if result.retries:
            request["attempt"] = len(result.retries) + 1
        turn.requests.append(request)
        self._bridge.home.audit.append("llm.request", turn.turn_id, **request)

    def _record_retries(self, turn: _Turn, attempts: Sequence[Any], *, call: int) -> None:
        """One audited ``llm.request`` row per attempt that was sent and failed (nothing is
        billed for them, so no usage is recorded)."""
        for number, attempt in enumerate(attempts, start=1):
            if isinstance(attempt, Mapping):
                self._bridge.home.audit.append(
                    "llm.request", turn.turn_id, call=call, attempt=number,
                    model=turn.model, outcome="failed",
                    **{k: attempt.get(k) for k in ("request_sha256", "code", "status",
                                                   "waited_s")})

    def _failed(self, turn: _Turn, exc: DeepSeekEyesError) -> None:
        """A turn that ended in an error: its failed attempts and its record."""
        exc.details.setdefault("session_id", turn.session_id)
        attempts = exc.details.get("attempts")
        if isinstance(attempts, list):
            self._record_retries(turn, attempts, call=turn.model_calls + 1)
        self._record(turn, "failed", exc.code)

    async def _call_tools(
        self, turn: _Turn, calls: Sequence[ToolCall]
    ) -> list[tuple[ToolCall, ToolOutcome]]:
        done: list[tuple[ToolCall, ToolOutcome]] = []
        for call in calls:
            outcome = await self._tools.call(turn.offer, call.name, call.arguments, turn.context)
            done.append((call, outcome))
        turn.continuation = any(
            turn.offer.routes[c.name].name == "mcp" for c in calls if c.name in turn.offer.routes)
        return done

    def _tool_messages(
        self, done: Sequence[tuple[ToolCall, ToolOutcome]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Tool results for the upstream, and as logged (named, marked internal)."""
        upstream = [{"role": "tool", "tool_call_id": c.id, "content": o.content}
                    for c, o in done]
        logged = [{**m, "name": c.name, "internal": True}
                  for m, (c, _) in zip(upstream, done, strict=True)]
        for entry, (_, outcome) in zip(logged, done, strict=True):
            if outcome.images:
                entry["images"] = [{"id": i, **part} for i, part in outcome.images]
        return upstream, logged

    async def _run_tools(self, turn: _Turn, result: ChatResult, calls: list[ToolCall]) -> None:
        """One round of the runtime's own calls; the loop goes on."""
        done = await self._call_tools(turn, calls)
        # The runtime's own tool exchange is logged but marked internal: the client never
        # sees it, so its next request is compared without it (see _log_request). It goes
        # upstream as later turns render it from the log, reasoning included (thinking mode
        # refuses a tool-call message without it), so their requests share this prefix.
        stored = {"role": "assistant", "content": result.content, "reasoning": result.reasoning,
                  "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                 for c in calls], "internal": True}
        assistant = render_assistant(stored, reasoning=sends_reasoning(stored, turn.thinking))
        upstream, logged = self._tool_messages(done)
        turn.payload["messages"] = [*turn.payload["messages"], assistant, *upstream]
        self._reoffer(turn)
        self._sessions.append(turn.session_id, [stored, *logged], turn_id=turn.turn_id)

    def _reoffer(self, turn: _Turn) -> None:
        """After tool results, what is offered may have grown (``look`` once a tool brought
        an image); the list only changes when it must, to keep the request prefix."""
        offer = self._tools.offer(turn.context, exclude=turn.client_names)
        if offer.names == turn.offer.names:
            return
        turn.offer = offer
        tools = list(turn.request.client_tools) + offer.openai()
        if tools:
            turn.payload["tools"] = tools
        else:
            turn.payload.pop("tools", None)
            turn.payload.pop("tool_choice", None)

    async def _finish(
        self, turn: _Turn, result: ChatResult, internal: list[ToolCall],
        external: list[ToolCall],
    ) -> TurnResult:
        """The turn's answer. Runtime calls that came with client calls run first; their
        exchange is logged after the answer so a continuing client gets it back."""
        done = await self._call_tools(turn, internal) if internal else []
        # The exact reasoning received, even empty: a later request may have to send it back.
        message: dict[str, Any] = {"role": "assistant", "content": result.content,
                                   "reasoning": result.reasoning}
        if external:
            message["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in external
            ]
        if done:
            message["internal_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c, _ in done
            ]
        finish = result.finish_reason or "stop"
        if finish == "tool_calls" and not external:
            finish = "stop"
        outcome = TurnResult(
            turn_id=turn.turn_id, session_id=turn.session_id, model=turn.model, path=turn.path,
            content=result.content, reasoning=result.reasoning, finish_reason=finish,
            tool_calls=external, usage=turn.usage, evidence=turn.evidence,
            rereads=turn.context.rereads, model_calls=turn.model_calls,
            created=int(turn.started), fork=turn.fork, tools=list(turn.context.calls),
            requests=list(turn.requests), thinking=turn.thinking_note,
        )
        self._sessions.append(
            turn.session_id, [message, *self._tool_messages(done)[1]], turn_id=turn.turn_id,
            turn=self._turn_record(turn, "ok"),
        )
        outcome.audit = self._bridge.home.seal()
        return outcome

    def _record(self, turn: _Turn, outcome: str, code: str | None) -> None:
        self._sessions.record_turn(self._turn_record(turn, outcome, code))

    def _turn_record(self, turn: _Turn, outcome: str, code: str | None = None) -> TurnRecord:
        return TurnRecord(
            id=turn.turn_id, session_id=turn.session_id, started_at=turn.started,
            ended_at=time.time(), model=turn.model, path=turn.path, outcome=outcome, code=code,
            details={
                "model_calls": turn.model_calls, "rereads": turn.context.rereads,
                "tool_calls": turn.context.calls, "evidence": turn.evidence,
                "omitted_messages": turn.view.omitted,
                "usage": usage_json(turn.usage),
                "forced_final": turn.forced_final,
                "requests": [r["request_sha256"] for r in turn.requests],
            },
        )

    async def run(self, request: TurnRequest) -> TurnResult:
        """Run a turn to its answer (no streaming).

        Raises:
            DeepSeekEyesError: TurnError, ImageError, VisionError or LLMError with its code.
        """
        turn = await self._prepare(request)
        try:
            while True:
                payload = self._payload(turn)
                result = await self._client.complete(payload, stream=False)
                self._count_call(turn, result, payload)
                internal, external = self._split(turn, result.tool_calls)
                if internal and not external:
                    await self._run_tools(turn, result, internal)
                    continue
                return await self._finish(turn, result, internal, external)
        except DeepSeekEyesError as exc:
            self._failed(turn, exc)
            raise

    def stream(self, request: TurnRequest) -> TurnStream:
        """Run a turn, yielding OpenAI ``chat.completion.chunk`` objects as they come."""
        return TurnStream(self, request)


class _ToolRelay:
    """Tool-call deltas of one model call, forwarded to the client as they arrive.

    A call is judged by its name, which arrives in its opening delta: the runtime's own
    tools (``look``) are held back, the client's are forwarded at once and renumbered from
    0, so the client sees only its own calls, with dense indices. Deltas that come before
    the name are held until it does. A server that sends no ``index`` cannot be relayed
    piece by piece; its calls are sent whole at the end (:meth:`unsent`).
    """

    def __init__(self, internal: frozenset[str], *, forward: bool = True) -> None:
        self._internal = internal
        self._forward = forward  # False: the call had no tools; nothing is relayed
        self._routes: dict[int, int | None] = {}  # upstream index -> client index, None: ours
        self._waiting: dict[int, list[dict[str, Any]]] = {}  # deltas before the name
        self._sent_ids: set[str] = set()
        self.forwarded = 0  # client indices used

    def take(self, calls: Any) -> list[dict[str, Any]]:
        """The client's deltas among ``calls`` (one upstream chunk's ``tool_calls``)."""
        out: list[dict[str, Any]] = []
        if not isinstance(calls, list) or not self._forward:
            return out
        for call in calls:  # bounded by the stream's byte limit
            if not isinstance(call, dict):
                continue
            index = call.get("index")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                continue  # sent whole at the end
            if index in self._routes:
                target = self._routes[index]
                if target is not None:
                    out.append(self._delta(call, target))
                continue
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(name, str) or not name:
                if index in self._waiting or len(self._waiting) < MAX_TOOL_CALLS:
                    self._waiting.setdefault(index, []).append(call)
                continue
            early = self._waiting.pop(index, [])
            if name in self._internal:
                self._routes[index] = None
                continue
            target = self._routes[index] = self.forwarded
            self.forwarded += 1
            out.extend(self._delta(piece, target) for piece in [*early, call])
        return out

    def _delta(self, call: dict[str, Any], target: int) -> dict[str, Any]:
        delta: dict[str, Any] = {"index": target}
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id:
            delta["id"] = call_id
            delta["type"] = "function"
            self._sent_ids.add(call_id)
        function = call.get("function")
        if isinstance(function, dict):
            piece: dict[str, Any] = {}
            name = function.get("name")
            if isinstance(name, str) and name:
                piece["name"] = name
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # Ollama sends an object
                arguments = json.dumps(arguments)
            if isinstance(arguments, str):
                piece["arguments"] = arguments
            if piece:
                delta["function"] = piece
        return delta

    def unsent(self, external: Sequence[ToolCall]) -> list[ToolCall]:
        """The client's calls of the finished answer that were not relayed piece by piece."""
        if self.forwarded == len(external):
            return []
        if self.forwarded == 0:
            return list(external)
        return [c for c in external if not c.id or c.id not in self._sent_ids]


class TurnStream:
    """``async for chunk in runner.stream(request)``; ``result`` is set at the end.

    Content, reasoning and the client's tool-call deltas are forwarded as the upstream
    sends them; calls to the runtime's own tools never reach the client. The last chunk
    carries ``deepseekeyes`` (and ``usage`` when asked). ``session_id`` is set once the
    turn is prepared, before the first chunk is yielded.
    """

    def __init__(self, runner: TurnRunner, request: TurnRequest) -> None:
        self._runner = runner
        self._request = request
        self.result: TurnResult | None = None
        self.session_id: str | None = None
        self.chunk_id = f"chatcmpl-{uuid.uuid4().hex}"

    def _chunk(
        self, turn: _Turn, delta: dict[str, Any], finish: str | None = None
    ) -> dict[str, Any]:
        return {
            "id": self.chunk_id,
            "object": "chat.completion.chunk",
            "created": int(turn.started),
            "model": turn.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._iterate()

    def _event(self, turn: _Turn, event: dict[str, Any]) -> dict[str, Any]:
        """A progress event as a chunk OpenAI clients pass over (no choices)."""
        return {**self._chunk(turn, {}), "choices": [], "deepseekeyes": {"event": event}}

    @staticmethod
    async def _while(
        work: Any, queue: asyncio.Queue[dict[str, Any]], out: list[Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """Run ``work``, yielding the events it queues as they come; its result goes to
        ``out`` (its exception is raised after the events queued before it)."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
            out.append(task.result())
        finally:
            if not task.done():
                task.cancel()

    async def _iterate(self) -> AsyncIterator[dict[str, Any]]:
        runner = self._runner
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        given = self._request.notify

        def notify(event: dict[str, Any]) -> None:
            queue.put_nowait(event)
            if given is not None:
                given(event)

        turn = await runner._prepare(dataclasses.replace(self._request, notify=notify))
        self.session_id = turn.session_id
        sent_role = False

        def with_role(delta: dict[str, Any]) -> dict[str, Any]:
            nonlocal sent_role
            if sent_role:
                return delta
            sent_role = True
            return {"role": "assistant", **delta}

        try:
            while True:
                payload = runner._payload(turn)
                while not queue.empty():
                    yield self._event(turn, queue.get_nowait())
                relay = _ToolRelay(turn.internal, forward=not turn.forced_final)
                async with runner._client.stream(payload) as chunks:
                    async for chunk in chunks:
                        choices = chunk.get("choices") or []
                        if not choices or not isinstance(choices[0], dict):
                            continue
                        delta = choices[0].get("delta") or {}
                        if not isinstance(delta, dict):
                            continue
                        forward: dict[str, Any] = {}
                        if delta.get("reasoning_content"):
                            forward["reasoning_content"] = delta["reasoning_content"]
                        if delta.get("content"):
                            forward["content"] = delta["content"]
                        calls = relay.take(delta.get("tool_calls"))
                        if calls:
                            forward["tool_calls"] = calls
                        if forward:
                            yield self._chunk(turn, with_role(forward))
                    result = chunks.result
                runner._count_call(turn, result, payload)
                internal, external = runner._split(turn, result.tool_calls)
                if internal and not external:
                    async for event in self._while(
                        runner._run_tools(turn, result, internal), queue, []
                    ):
                        yield self._event(turn, event)
                    continue
                done: list[TurnResult] = []
                async for event in self._while(
                    runner._finish(turn, result, internal, external), queue, done
                ):
                    yield self._event(turn, event)
                final = done[0]
                late = relay.unsent(external)
                if late:
                    yield self._chunk(turn, with_role({"tool_calls": [
                        {"index": relay.forwarded + i, **call}
                        for i, call in enumerate(_tool_call_json(late))
                    ]}))
                if not sent_role:
                    yield self._chunk(turn, with_role({"content": ""}))
                extra = {"deepseekeyes": deepseekeyes_json(final)}
                if self._request.include_usage:
                    yield self._chunk(turn, {}, final.finish_reason)
                    yield {**self._chunk(turn, {}), "choices": [],
                           "usage": usage_json(final.usage), **extra}
                else:
                    yield {**self._chunk(turn, {}, final.finish_reason), **extra}
                self.result = final
                return
        except DeepSeekEyesError as exc:
            runner._failed(turn, exc)
            raise
