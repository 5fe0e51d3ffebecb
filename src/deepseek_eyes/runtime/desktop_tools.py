"""The ``desktop`` tool source: the Linux desktop for the final model.

The tools are the desktop MCP server's (:data:`deepseek_eyes.desktop.tools.TOOLS`), run by
a :class:`DesktopService` kept per conversation session, so a state id the model saw in one
turn is still the newest in the next (and another conversation can never act on it). At
most ``desktop.max_sessions`` are open; the least recently used is closed first (a desktop
is one shared screen, so the default is small).

Screenshots never reach the text model as pixels. When the visual mode delivers one, the
PNG goes through the vision bridge and becomes validated evidence with an image id
(``tool-img-N``). When every vision route fails, the failure is passed back to the service,
which forwards only the validated semantic state with an explicit pixels-not-decoded
marker — never the pixels, never a guess.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.desktop.tools import TOOLS
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.render import render_evidence, render_target
from deepseek_eyes.runtime.tools import ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.settings import DesktopSettings
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["DesktopToolSource"]

_SPECS = tuple(ToolSpec(t.name, t.description, t.parameters, risk=t.risk) for t in TOOLS)


class DesktopToolSource:
    name = "desktop"
    prefix = "desktop_"

    def __init__(self, settings: DesktopSettings, *, bridge: VisionBridge, blobs: BlobStore,
                 max_images: int = 8, environment: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self._bridge = bridge
        self._blobs = blobs
        self._max_images = max_images
        self._environment = environment
        self.services: OrderedDict[str, DesktopService] = OrderedDict()

    def tools(self, context: TurnContext) -> list[ToolSpec]:  # noqa: ARG002 - same for all
        return list(_SPECS)

    async def service(self, session_id: str) -> DesktopService:
        found = self.services.get(session_id)
        if found is not None:
            self.services.move_to_end(session_id)
            return found
        while len(self.services) >= self.settings.max_sessions:
            _, oldest = self.services.popitem(last=False)
            await oldest.aclose()
        service = DesktopService(self.settings, blobs=self._blobs,
                                 environment=self._environment,
                                 audit=self._bridge.home.audit, owner=session_id)
        self.services[session_id] = service
        return service

    async def call(
        self, name: str, arguments: Mapping[str, Any], context: TurnContext
    ) -> ToolOutcome:
        service = await self.service(context.session_id)
        images: list[tuple[str, Mapping[str, Any]]] = []

        async def describe(png: bytes, question: str | None) -> str:
            return await self._evidence(png, question, context, images)

        result = await service.call(name, arguments, describe=describe)
        shot = result.screenshot
        context.calls.append({
            "tool": name, "source": "desktop", "state_id": result.data.get("state_id"),
            "code": result.code, "screenshot_sha256": shot.sha256 if shot else None,
        })
        details: dict[str, Any] = {"state_id": result.data.get("state_id")}
        if result.code:
            details["code"] = result.code
        return ToolOutcome(result.text, result.is_error, details, tuple(images))

    async def _evidence(self, png: bytes, question: str | None, context: TurnContext,
                        images: list[tuple[str, Mapping[str, Any]]]) -> str:
        """Validated evidence of a screenshot. A vision failure propagates: the service
        then forwards the semantic state alone, marked pixels-not-decoded."""
        if len(context.images) >= self._max_images:
            return "[the screenshot was stored but not read: the turn's image limit is reached]"
        (meta,) = await self._bridge.admit_all([png])
        if question:
            seen = await self._bridge.reread(meta.sha256, question)
        else:
            seen = await self._bridge.see_stored(meta.sha256)
        part = {**image_part(meta), "route": seen.route}
        image_id = context.add_image(part)
        images.append((image_id, part))
        render = render_target if question else render_evidence
        return render(image_id, part, seen.record.evidence, route=seen.route,
                      record_sha256=seen.record.record_sha256)

    async def close(self) -> None:
        while self.services:
            _, service = self.services.popitem()
            await service.aclose()
