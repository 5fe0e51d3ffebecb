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

from collections.abc import Mapping

from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.desktop.tools import TOOLS
from deepseek_eyes.runtime.screen_tools import ScreenToolSource, specs_of
from deepseek_eyes.settings import DesktopSettings
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["DesktopToolSource"]


class DesktopToolSource(ScreenToolSource[DesktopService]):
    name = "desktop"
    prefix = "desktop_"
    specs = specs_of(TOOLS)
    vision_failure_as_text = False  # the service forwards the semantic state, marked

    def __init__(self, settings: DesktopSettings, *, bridge: VisionBridge, blobs: BlobStore,
                 max_images: int = 8, environment: Mapping[str, str] | None = None) -> None:
        super().__init__(bridge=bridge, max_sessions=settings.max_sessions,
                         max_images=max_images)
        self.settings = settings
        self._blobs = blobs
        self._environment = environment

    def _make_service(self, session_id: str) -> DesktopService:
        return DesktopService(self.settings, blobs=self._blobs, environment=self._environment,
                              audit=self._bridge.home.audit, owner=session_id)
