"""The runtime's tools: sources, one exposure chain, and the per-turn guard.

The runtime is the hub every capability reaches the model through. A :class:`ToolSource`
(``look``, ``mcp``, ``terminal``, ``browser``, ``desktop``) says which tools it
offers in a turn and runs a call; the :class:`ToolHub` holds the enabled sources
(``[runtime] tool_sources``) and decides, for each model call, what is offered.

What is offered is decided by one chain of small stages (:data:`Stage`), each with one job:

1. **filter** — a client's own tool of the same name wins (the runtime's is not offered);
2. **risk gate** — with ``runtime.tool_risk = "read-only"`` only read tools are offered;
3. **prefix** — each source offers only names inside its own namespace (``mcp__…``,
   ``terminal_…``, ``look``), so no source can shadow another's tool;
4. **budget** — at most ``runtime.max_tools`` tools and ``runtime.max_tool_schema_tokens``
   estimated schema tokens, in source order.

Dispatch goes through the same chain: a call runs only when its name was in the
:class:`Offer` of the model call that produced it, so a tool withdrawn, over budget or
gated never runs, whatever the model says. The source then checks again at call time
(the MCP host re-resolves policy and catalog generation; the terminal re-judges plans).

Tool failures are results, not exceptions: the model reads what went wrong (with the
error's code) and can answer without it; only the turn's own limits stop the loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Required, TypedDict, runtime_checkable

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.approval import Approver
from deepseek_eyes.store import scopes
from deepseek_eyes.toolkit import exposure
from deepseek_eyes.usage import estimate_tokens

__all__ = [
    "CallRecord",
    "DeferChannel",
    "Notify",
    "Offer",
    "ProgressEvent",
    "Stage",
    "ToolHub",
    "ToolOutcome",
    "ToolSource",
    "ToolSpec",
    "TurnContext",
    "budgeted",
    "excluding",
    "prefixed",
    "risk_gated",
]

READ_RISKS = exposure.READ_RISKS


class OpenAIFunction(TypedDict):
    name: str
    description: str
    parameters: dict[str, object]  # a JSON Schema


class OpenAITool(TypedDict):
    """A tool as an OpenAI ``tools`` entry."""

    type: str  # "function"
    function: OpenAIFunction


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: Mapping[str, Any]
    risk: str = "read"  # read | write | exec | unknown: what calling it may do
    #: The catalog generation the definition was read under (MCP tools; None: a fixed
    #: table). It travels with the offer, so a call is judged against the schema the model
    #: was shown, not against whatever another turn was offered since.
    generation: int | None = None

    def openai(self) -> OpenAITool:
        """The tool as an OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    @property
    def schema_tokens(self) -> int:
        """Estimated tokens of the definition as the model receives it."""
        return estimate_tokens(len(json.dumps(self.openai(), separators=(",", ":"))))


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)  # audit-safe: ids, hashes, codes
    # Images the result brought (id, image part with its route), kept with the logged result
    # so later turns can still look at them.
    images: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    #: Estimated tokens of validated evidence in ``content`` (a reread, a screenshot, an
    #: MCP image): booked as bridge input when the model receives it.
    evidence_tokens: int = 0

    @classmethod
    def failure(cls, exc: DeepSeekEyesError, what: str) -> ToolOutcome:
        """An error the model reads: what failed, the stable code, the message."""
        return cls(f"{what} failed ({exc.code}): {exc.message}", True, {"code": exc.code})


class ProgressEvent(TypedDict, total=False):
    """A progress event of a turn, for a front end (``deepseekeyes.event`` in a stream)."""

    type: Required[str]  # tool.started tool.progress tool.finished approval.wanted
    #                      approval.decided turn.final_call session.forked
    tool: str
    source: str
    is_error: bool
    code: str | None
    model_calls: int
    plan_id: str
    #: approval.wanted / approval.decided of an ask-first MCP call (instead of plan_id).
    ask_id: str
    session_id: str
    forked_from: str
    via: str
    text: str
    decision: str
    #: tool.progress: a server's progress notification (MCP ``notifications/progress``);
    #: total is None when the server does not know it. tool.progress and tool.finished
    #: carry the seconds since the tool started.
    progress: float
    total: float | None
    elapsed_s: float


Notify = Callable[[ProgressEvent], None]


class CallRecord(TypedDict, total=False):
    """One of the runtime's tool calls as a turn reports it (``deepseekeyes.tools``, the
    turn record): audit-safe identities, hashes and codes, never arguments or results."""

    tool: Required[str]
    source: str
    code: str | None
    is_error: bool
    server: str
    parent: str  # the Code Mode run that made this call
    nested: int  # run_code: the calls its program made
    result_sha256: str | None
    images: int
    image: str
    route: str
    cached: bool
    record_sha256: str
    region: list[float] | None  # look's zoom, normalized [x, y, w, h]
    pixels: bool  # look answered a seeing model with the image itself
    state_id: str | None
    screenshot_sha256: str | None
    plan_id: str
    receipt_id: str | None
    risk: str
    state: str
    status: str
    exit_code: int | None
    decision: str
    via: str


@dataclass
class DeferChannel:
    """Where a Code Mode run reports its nested calls to the model: one marker each, in
    its ``run_code`` result. Open while the program runs; closed when the run ends, after
    which a nested call is refused before the server (``MCP_RESULT_CONTEXT_UNAVAILABLE``)."""

    run_id: str
    markers: list[dict[str, Any]] = field(default_factory=list)
    open: bool = True


@dataclass
class TurnContext:
    """What one turn's tools can see, and how much they have used.

    ``state`` holds per-run state a source keeps across the calls of one user instruction
    (the MCP call quota); ``notify`` receives progress events (tool started/finished,
    approval wanted) for a front end to show; ``approver`` decides plans that need a
    person (None: nobody can approve here).
    """

    session_id: str
    images: dict[str, dict[str, Any]]  # image id ("img-1") -> image part + "route"
    max_tool_calls: int
    max_rereads: int
    tool_calls: int = 0
    rereads: int = 0
    calls: list[CallRecord] = field(default_factory=list)  # audit rows of this turn
    state: dict[str, Any] = field(default_factory=dict)
    notify: Notify | None = None
    approver: Approver | None = None
    scope: str = scopes.CLI  # whose turn this is: what its look may learn of the cache
    #: How an image a tool brings reaches the model: "pixels" (it sees), "both" (pixels and
    #: evidence) or "evidence"; a text turn decides at the first image
    #: (``resolve_delivery``, then kept here).
    delivery: str = "evidence"
    resolve_delivery: Callable[[], Awaitable[str]] | None = None
    #: The Code Mode run whose program is making the current call (``exec.parent``), None
    #: for a native call: nested calls' audit rows and records name it.
    parent: str | None = None
    #: The run's channel back to the model (``exec.deferContext``): a nested call is made
    #: only while it is open, so every call that reaches a server is reported once.
    defer: DeferChannel | None = None

    async def image_delivery(self) -> str:
        """How the images tools bring reach the model in this turn (decided once)."""
        if self.resolve_delivery is not None:
            resolve, self.resolve_delivery = self.resolve_delivery, None
            self.delivery = await resolve()
        return self.delivery

    def image(self, ref: str) -> tuple[str, dict[str, Any]] | None:
        """Resolve ``img-N``, ``sha256:<prefix>`` or a bare hex prefix (≥ 8 chars)."""
        if ref in self.images:
            return ref, self.images[ref]
        prefix = ref.removeprefix("sha256:").lower()
        if len(prefix) >= 8:
            matches = [
                (key, img) for key, img in self.images.items() if img["sha256"].startswith(prefix)
            ]
            if len(matches) == 1:
                return matches[0]
        return None

    def add_image(self, image: dict[str, Any]) -> str:
        """Register an image that reached the turn through a tool; returns its id.

        Tool images are numbered apart (``tool-img-N``, in the order results brought them):
        the conversation's own ``img-N`` follow user messages and would shift under them
        when a later message brings an image.
        """
        for key, known in self.images.items():
            if known["sha256"] == image["sha256"]:
                return key
        count = sum(1 for key in self.images if key.startswith("tool-img-"))
        image_id = f"tool-img-{count + 1}"
        self.images[image_id] = image
        return image_id

    def emit(self, event: ProgressEvent) -> None:
        if self.notify is not None:
            self.notify(event)


@runtime_checkable
class ToolSource(Protocol):
    """A capability offering tools to the model.

    ``name`` names the source in ``[runtime] tool_sources``; ``prefix`` is its namespace
    (every tool it offers starts with it).
    """

    name: str
    prefix: str

    def tools(self, context: TurnContext) -> Sequence[ToolSpec]: ...

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        """Run ``spec`` (the definition as this model call offered it)."""
        ...

    async def close(self) -> None: ...


Candidate = tuple[ToolSpec, ToolSource]
Stage = Callable[[list[Candidate]], list[Candidate]]


# The stages are the toolkit's exposure wrappers over (spec, source) pairs; the MCP host
# applies the same wrappers to its catalogs.
def excluding(names: frozenset[str]) -> Stage:
    """Filter: a client's own tool of the same name wins."""
    return exposure.filtered(lambda item: item[0].name not in names)


def risk_gated(read_only: bool) -> Stage:
    """Risk gate: with ``read_only`` only tools whose risk is ``read`` pass."""
    return exposure.risk_gated(read_only, lambda item: item[0].risk, READ_RISKS)


def prefixed() -> Stage:
    """Prefix: names inside each source's namespace, each name once (first source wins)."""
    return exposure.namespaced(lambda item: item[0].name, lambda item: item[1].prefix)


def budgeted(max_tools: int, max_schema_tokens: int) -> Stage:
    """Budget: tools in source order while both the count and the schema tokens fit."""
    return exposure.budgeted(max_tools, max_schema_tokens, lambda item: item[0].schema_tokens)


@dataclass(frozen=True)
class Offer:
    """The tools of one model call, and which source runs each."""

    specs: tuple[ToolSpec, ...] = ()
    routes: Mapping[str, ToolSource] = field(default_factory=dict)

    def openai(self) -> list[OpenAITool]:
        return [spec.openai() for spec in self.specs]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.routes)

    def spec(self, name: str) -> ToolSpec | None:
        return next((s for s in self.specs if s.name == name), None)

    def schema_tokens(self, source: str) -> int:
        """Estimated schema tokens of the tools ``source`` has in this offer."""
        return sum(s.schema_tokens for s in self.specs if self.routes[s.name].name == source)


class ToolHub:
    def __init__(
        self,
        sources: Sequence[ToolSource] = (),
        *,
        max_tools: int = 64,
        max_schema_tokens: int = 24_000,
        read_only: bool = False,
    ) -> None:
        self.sources = list(sources)
        self._max_tools = max_tools
        self._max_schema_tokens = max_schema_tokens
        self._read_only = read_only

    @property
    def read_only(self) -> bool:
        """Whether the risk gate lets only read tools through (``runtime.tool_risk``)."""
        return self._read_only

    def add(self, source: ToolSource) -> None:
        self.sources.append(source)

    def source(self, name: str) -> ToolSource | None:
        return next((s for s in self.sources if s.name == name), None)

    def chain(self, exclude: frozenset[str]) -> list[Stage]:
        return [
            excluding(exclude),
            risk_gated(self._read_only),
            prefixed(),
            budgeted(self._max_tools, self._max_schema_tokens),
        ]

    def offer(self, context: TurnContext, *, exclude: frozenset[str] = frozenset()) -> Offer:
        """What the next model call is offered (the chain applied to every source)."""
        items: list[Candidate] = [
            (spec, source) for source in self.sources for spec in source.tools(context)
        ]
        for stage in self.chain(exclude):
            items = stage(items)
        return Offer(tuple(s for s, _ in items), {s.name: src for s, src in items})

    async def call(
        self, offer: Offer, name: str, arguments_json: str, context: TurnContext
    ) -> ToolOutcome:
        """Run one call under the turn's limits; every failure becomes an error outcome."""
        context.tool_calls += 1
        if context.tool_calls > context.max_tool_calls:
            return ToolOutcome(
                f"tool call limit of {context.max_tool_calls} for this turn reached; "
                "answer with what you have", True, {"code": "RUNTIME_TOOL_LIMIT"},
            )
        return await self.dispatch(offer, name, arguments_json, context)

    async def dispatch(
        self, offer: Offer, name: str, arguments_json: str, context: TurnContext
    ) -> ToolOutcome:
        """Run one call of ``offer`` (the path every call takes after the per-turn count:
        a native call through :meth:`call`, a Code Mode program's nested call directly,
        counted by the run's quota instead)."""
        source = offer.routes.get(name)
        spec = offer.spec(name)
        if source is None or spec is None:
            return ToolOutcome(f"no tool named {name[:80]!r} is available", True,
                               {"code": "RUNTIME_TOOL_UNKNOWN"})
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            return ToolOutcome("the arguments are not valid JSON", True,
                               {"code": "RUNTIME_TOOL_ARGUMENTS"})
        if not isinstance(arguments, dict):
            return ToolOutcome("the arguments must be a JSON object", True,
                               {"code": "RUNTIME_TOOL_ARGUMENTS"})
        context.emit({"type": "tool.started", "tool": name, "source": source.name})
        started = time.monotonic()
        try:
            outcome = await source.call(spec, arguments, context)
        except DeepSeekEyesError as exc:
            outcome = ToolOutcome.failure(exc, name)
        context.emit({"type": "tool.finished", "tool": name, "source": source.name,
                      "is_error": outcome.is_error, "code": outcome.details.get("code"),
                      "elapsed_s": round(time.monotonic() - started, 1)})
        return outcome

    async def close(self) -> None:
        for source in self.sources:
            await source.close()
