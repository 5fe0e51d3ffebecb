"""What the ``browser`` and ``desktop`` tool sources share: a stateful screen per
conversation, and screenshots that reach a seeing final model as pixels and a blind one as
evidence (:func:`~deepseek_eyes.runtime.delivery.deliver_image`).

A source keeps one service per conversation session, so a state id the model saw in one
request is still the newest state in the next; at most ``max_sessions`` services are open and
the least recently used is closed first. When a call's result should reach the model
visually, the service calls the ``describe`` this class builds for the turn: the PNG is
admitted through the vision bridge (stored by its hash), given an image id (``tool-img-N``)
the model can ``look`` at later, like any image of the conversation, and delivered: as
pixels to a seeing model, or as validated evidence (with a question, a targeted reread).
What a vision failure becomes is the subclass's choice
(:attr:`ScreenToolSource.vision_failure_as_text`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.delivery import deliver_image
from deepseek_eyes.runtime.tools import ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.toolkit.results import ToolResult
from deepseek_eyes.toolkit.spec import ToolDef
from deepseek_eyes.toolkit.visual import Describe
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["ScreenToolSource", "specs_of"]


def specs_of(table: tuple[ToolDef, ...]) -> tuple[ToolSpec, ...]:
    """A capability's tool table as the runtime offers it (risk from its annotations)."""
    return tuple(ToolSpec(t.name, t.description, t.parameters, risk=t.risk) for t in table)


class _Service(Protocol):
    async def call(self, name: str, arguments: Mapping[str, Any], *,
                   describe: Describe | None = None) -> ToolResult: ...

    async def aclose(self) -> None: ...


S = TypeVar("S", bound=_Service)


class ScreenToolSource(Generic[S]):
    name: str
    prefix: str
    specs: ClassVar[tuple[ToolSpec, ...]]
    #: True: a screenshot the vision routes cannot read becomes a bracketed note in the
    #: result. False: the failure goes back to the service, which decides (the desktop
    #: forwards its validated semantic state alone, marked pixels-not-decoded).
    vision_failure_as_text: ClassVar[bool] = True

    def __init__(self, *, bridge: VisionBridge, max_sessions: int, max_images: int) -> None:
        self._bridge = bridge
        self._max_sessions = max_sessions
        self._max_images = max_images
        self.services: OrderedDict[str, S] = OrderedDict()

    def _make_service(self, session_id: str) -> S:
        raise NotImplementedError

    def tools(self, context: TurnContext) -> list[ToolSpec]:  # noqa: ARG002 - same for all
        return list(self.specs)

    async def service(self, session_id: str) -> S:
        """The conversation's service; the least recently used one is closed first when
        ``max_sessions`` are open."""
        found = self.services.get(session_id)
        if found is not None:
            self.services.move_to_end(session_id)
            return found
        while len(self.services) >= self._max_sessions:
            _, oldest = self.services.popitem(last=False)
            await oldest.aclose()
        service = self._make_service(session_id)
        self.services[session_id] = service
        return service

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        name = spec.name
        service = await self.service(context.session_id)
        images: list[tuple[str, Mapping[str, Any]]] = []
        evidence: list[int] = []  # estimated tokens of each evidence block delivered

        async def describe(png: bytes, question: str | None) -> str:
            return await self._evidence(png, question, context, images, evidence)

        result = await service.call(name, arguments, describe=describe)
        shot = result.screenshot
        context.calls.append({
            "tool": name, "source": self.name, "state_id": result.data.get("state_id"),
            "code": result.code, "screenshot_sha256": shot.sha256 if shot else None,
        })
        details: dict[str, Any] = {"state_id": result.data.get("state_id")}
        if result.code:
            details["code"] = result.code
        return ToolOutcome(result.text, result.is_error, details, tuple(images),
                           evidence_tokens=sum(evidence))

    async def _evidence(self, png: bytes, question: str | None, context: TurnContext,
                        images: list[tuple[str, Mapping[str, Any]]],
                        evidence: list[int]) -> str:
        """What stands for a screenshot in the result (pixels for a seeing model, else
        validated evidence); the evidence's estimated tokens go to ``evidence`` (a note
        instead of evidence counts nothing)."""
        if len(context.images) >= self._max_images:
            return "[the screenshot was stored but not read: the turn's image limit is reached]"
        try:
            (meta,) = await self._bridge.admit_all([png])
            delivered = await deliver_image(self._bridge, context, meta, question=question,
                                            what="screenshot")
        except DeepSeekEyesError as exc:
            if not self.vision_failure_as_text:
                raise
            return f"[the screenshot could not be read ({exc.code})]"
        images.append((delivered.image_id, delivered.part))
        if delivered.evidence_tokens:
            evidence.append(delivered.evidence_tokens)
        return delivered.text

    async def close(self) -> None:
        while self.services:
            _, service = self.services.popitem()
            await service.aclose()
