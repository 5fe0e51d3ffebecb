"""The ``browser`` tool source: a headless Chromium per conversation, for the final model.

The tools are the browser MCP server's (:data:`deepseek_eyes.browser.tools.TOOLS`), run by
a :class:`BrowserService` kept per conversation session, so a state id the model saw in one
turn is still the newest in the next (and another conversation can never act on it). At
most ``browser.max_sessions`` browsers are open; the least recently used is closed first.

Screenshots never reach the text model as pixels. When the visual mode delivers one, the
service calls the :class:`~deepseek_eyes.browser.visual.Describe` this source builds for
the turn: the PNG is admitted through the vision bridge (stored by its hash), turned into
validated evidence (or, for a visual assertion, a targeted reread answering its question),
and given an image id (``tool-img-N``) the model can ``look`` at later, like any image of
the conversation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.browser.tools import TOOLS
from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.render import render_evidence, render_target
from deepseek_eyes.runtime.tools import ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.settings import BrowserSettings
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["BrowserToolSource"]

_SPECS = tuple(ToolSpec(t.name, t.description, t.parameters, risk=t.risk) for t in TOOLS)


class BrowserToolSource:
    name = "browser"
    prefix = "browser_"

    def __init__(self, settings: BrowserSettings, *, bridge: VisionBridge, blobs: BlobStore,
                 downloads_dir: Path, max_images: int = 8) -> None:
        self.settings = settings
        self._bridge = bridge
        self._blobs = blobs
        self._downloads = downloads_dir
        self._max_images = max_images
        self.services: OrderedDict[str, BrowserService] = OrderedDict()

    def tools(self, context: TurnContext) -> list[ToolSpec]:  # noqa: ARG002 - same for all
        return list(_SPECS)

    async def service(self, session_id: str) -> BrowserService:
        """The conversation's browser service; the least recently used one is closed when
        ``browser.max_sessions`` are open."""
        found = self.services.get(session_id)
        if found is not None:
            self.services.move_to_end(session_id)
            return found
        while len(self.services) >= self.settings.max_sessions:
            _, oldest = self.services.popitem(last=False)
            await oldest.aclose()
        service = BrowserService(self.settings, downloads_dir=self._downloads,
                                 blobs=self._blobs, audit=self._bridge.home.audit,
                                 owner=session_id)
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
            "tool": name, "source": "browser", "state_id": result.data.get("state_id"),
            "code": result.code, "screenshot_sha256": shot.sha256 if shot else None,
        })
        details: dict[str, Any] = {"state_id": result.data.get("state_id")}
        if result.code:
            details["code"] = result.code
        return ToolOutcome(result.text, result.is_error, details, tuple(images))

    async def _evidence(self, png: bytes, question: str | None, context: TurnContext,
                        images: list[tuple[str, Mapping[str, Any]]]) -> str:
        """Validated evidence of a screenshot (named, never sent as pixels)."""
        if len(context.images) >= self._max_images:
            return "[the screenshot was stored but not read: the turn's image limit is reached]"
        try:
            (meta,) = await self._bridge.admit_all([png])
            if question:
                seen = await self._bridge.reread(meta.sha256, question)
            else:
                seen = await self._bridge.see_stored(meta.sha256)
        except DeepSeekEyesError as exc:
            return f"[the screenshot could not be read ({exc.code})]"
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
