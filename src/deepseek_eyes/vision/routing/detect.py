"""Auto-detection: which ``[llm]`` models may serve as vision routes (``vision.auto_detect``).

A model qualifies when it explicitly declares both text and image input (the seed's
step 4): its ``[[llm.models]]`` entry says ``input = ["text", "image"]``, or, when the
settings leave ``input`` unset, its ``/models`` entry lists both input modalities. The
rule and the shapes read are the model catalog's
(:meth:`~deepseek_eyes.llm.catalog.ModelCatalog.text_and_image_models`); a model that
declares only ``image`` input, or only a vision flag, is not a vision route.

Decisions a newcomer would otherwise undo:

* Two views, one rule. :func:`settings_vision_models` reads the settings alone (no
  network: the route table a bridge starts with, and what ``config check`` can judge);
  :class:`RouteDetector` adds the upstream listing, fetched through the catalog (cached for
  ``llm.models_ttl``; a failed listing leaves the settings' answer standing).
* The listing has its own short deadline (:data:`LISTING_TIMEOUT_S`) and no retries: it
  runs before an acquisition's cache lookup, so a slow or down upstream must cost seconds,
  not ``llm.timeout``, and then the catalog waits before asking again.
* At most :data:`MAX_AUTO_ROUTES` models become routes: an aggregator lists hundreds of
  image-capable models, and the failover budget tries only a few anyway.
* This module imports the LLM client only when a listing is made, so that the settings
  view (``config check``, a local-only bridge) does not load the HTTP stack.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import LLMSettings

if TYPE_CHECKING:
    from deepseek_eyes.llm.catalog import ModelCatalog
    from deepseek_eyes.llm.client import ChatClient

__all__ = [
    "AUTO_ROUTE_PREFIX",
    "LISTING_TIMEOUT_S",
    "MAX_AUTO_ROUTES",
    "RouteDetector",
    "auto_route_name",
    "settings_vision_models",
]

#: Auto-detected routes are named ``llm/<model slug>``.
AUTO_ROUTE_PREFIX = "llm/"
#: Deadline of the ``/models`` listing auto-detection makes (seconds).
LISTING_TIMEOUT_S = 10.0
#: At most this many auto-detected models become routes (catalog order).
MAX_AUTO_ROUTES = 32

_SLUG_CHARS = 56  # "llm/" + 56 stays within a route name's 64 characters


def auto_route_name(model_id: str) -> str:
    """The route name of an auto-detected model: ``llm/`` and a lower-case slug of its id.
    Two ids may share a slug (``Vision-1``, ``vision.1``...): the first one keeps it."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", model_id.lower()).strip("-")[:_SLUG_CHARS]
    return AUTO_ROUTE_PREFIX + (slug or "model")


def settings_vision_models(llm: LLMSettings, *, limit: int | None = MAX_AUTO_ROUTES) -> list[str]:
    """Ids of the ``[[llm.models]]`` entries whose ``input`` declares text and image
    (``input`` defaults to text only, so only an explicit one can), at most ``limit``."""
    ids = [m.id for m in llm.models if {"text", "image"} <= set(m.input)]
    return ids if limit is None else ids[:limit]


class RouteDetector:
    """The models that may serve as vision routes, from the settings and ``/models``.

    ``catalog`` may be given (tests, or a caller that already holds one); otherwise one is
    made on first use, over a client of its own with :data:`LISTING_TIMEOUT_S`. When the
    endpoint's key reference names an unset variable, there is no listing and the settings
    alone answer.
    """

    def __init__(self, llm: LLMSettings, *, catalog: ModelCatalog | None = None) -> None:
        self._llm = llm
        self._catalog = catalog
        self._client: ChatClient | None = None
        self._no_listing = False

    def _open(self) -> ModelCatalog | None:
        if self._catalog is not None or self._no_listing:
            return self._catalog
        from deepseek_eyes.llm.catalog import ModelCatalog
        from deepseek_eyes.llm.client import ChatClient
        from deepseek_eyes.llm.retry import RetryPolicy

        llm = self._llm
        try:
            api_key = None if llm.api_key is None else llm.api_key.resolve()
        except ConfigError:
            self._no_listing = True
            return None
        timeout = min(llm.timeout, LISTING_TIMEOUT_S)
        self._client = ChatClient(
            llm.base_url, api_key=api_key, timeout=timeout,
            connect_timeout=min(llm.connect_timeout, timeout), retry=RetryPolicy(max_retries=0),
            base_url_source=llm.base_url_source,
        )
        self._catalog = ModelCatalog(llm, self._client)
        return self._catalog

    async def models(self) -> list[str]:
        """Ids of the models that declare text and image input, settings first then the
        listing's, at most :data:`MAX_AUTO_ROUTES`. Never raises for the listing: a failed
        one leaves the settings' (or the last good listing's) answer."""
        catalog = self._open()
        if catalog is None:
            return settings_vision_models(self._llm)
        return (await catalog.text_and_image_models())[:MAX_AUTO_ROUTES]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
