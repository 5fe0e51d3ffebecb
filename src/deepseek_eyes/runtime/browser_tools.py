"""The ``browser`` tool source: a headless Chromium per conversation, for the final model.

The tools are the browser MCP server's (:data:`deepseek_eyes.browser.tools.TOOLS`), run by
a :class:`BrowserService` kept per conversation session, so a state id the model saw in one
turn is still the newest in the next (and another conversation can never act on it). At
most ``browser.max_sessions`` browsers are open; the least recently used is closed first.

Screenshots never reach the text model as pixels. When the visual mode delivers one, the
service calls the :class:`~deepseek_eyes.toolkit.visual.Describe` this source builds for
the turn: the PNG is admitted through the vision bridge (stored by its hash), turned into
validated evidence (or, for a visual assertion, a targeted reread answering its question),
and given an image id (``tool-img-N``) the model can ``look`` at later, like any image of
the conversation.
"""

from __future__ import annotations

from pathlib import Path

from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.browser.tools import TOOLS
from deepseek_eyes.runtime.screen_tools import ScreenToolSource, specs_of
from deepseek_eyes.settings import BrowserSettings
from deepseek_eyes.store.blobs import BlobStore
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["BrowserToolSource"]


class BrowserToolSource(ScreenToolSource[BrowserService]):
    name = "browser"
    prefix = "browser_"
    specs = specs_of(TOOLS)

    def __init__(self, settings: BrowserSettings, *, bridge: VisionBridge, blobs: BlobStore,
                 downloads_dir: Path, max_images: int = 8) -> None:
        super().__init__(bridge=bridge, max_sessions=settings.max_sessions,
                         max_images=max_images)
        self.settings = settings
        self._blobs = blobs
        self._downloads = downloads_dir

    def _make_service(self, session_id: str) -> BrowserService:
        return BrowserService(self.settings, downloads_dir=self._downloads, blobs=self._blobs,
                              audit=self._bridge.home.audit, owner=session_id)
