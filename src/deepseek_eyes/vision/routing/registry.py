"""Builds the router's routes from settings: configured routes, auto-detected models, local.

The local route always exists (as ``local`` unless a configured route takes that name), so
``see`` works on a fresh install with no key and no network. Auto-detection turns each
``[llm]`` model that declares text and image input
(:mod:`deepseek_eyes.vision.routing.detect`) into a route named ``llm/<model>`` on the
final-answer endpoint; it only joins the order when ``vision.auto_detect`` is on.

A configured route wins its name: an auto-detected model whose route name a
``[[vision.routes]]`` entry already takes is not added (``config check`` warns about it,
``CONFIG_ROUTE_UNREACHABLE``). Where each route stands in the order is
:func:`~deepseek_eyes.vision.routing.order.route_order`'s business, not this module's.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping

from deepseek_eyes.settings import LLMSettings, RouteSettings, VisionSettings
from deepseek_eyes.vision.routes.local_ocr import LocalRoute
from deepseek_eyes.vision.routing.detect import (
    RouteDetector,
    auto_route_name,
    settings_vision_models,
)
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.types import VisionRoute

__all__ = ["AutoRoutes", "auto_route_settings", "build_routes"]


def auto_route_settings(llm: LLMSettings, model_ids: Iterable[str]) -> list[RouteSettings]:
    """One route per model id, on the ``[llm]`` endpoint with its key; of two ids with one
    route name (:func:`auto_route_name`), the first keeps it."""
    routes: list[RouteSettings] = []
    names: set[str] = set()
    for model_id in model_ids:
        name = auto_route_name(model_id)
        if name in names:
            continue
        names.add(name)
        routes.append(
            RouteSettings(
                name=name,
                kind="openai",
                base_url=llm.base_url,
                model=model_id,
                api_key=llm.api_key,
                timeout=min(llm.timeout, 600.0),
            )
        )
    return routes


def _remote(settings: RouteSettings) -> VisionRoute:
    from deepseek_eyes.vision.routes.openai_compat import OpenAIRoute

    return OpenAIRoute(settings)


def build_routes(
    vision: VisionSettings, llm: LLMSettings
) -> tuple[dict[str, RouteEntry], list[str]]:
    """All routes by name, and the names of auto-detected ones (empty unless enabled).

    Auto-detection here reads the settings alone; :class:`AutoRoutes` adds what ``/models``
    declares once the router asks it. The OpenAI-compatible route (and with it the HTTP
    client) is imported only when a remote route exists: the local-only default starts
    without it (`see` on a cached image).
    """
    entries: dict[str, RouteEntry] = {}
    for settings in vision.routes:
        if settings.kind == "local":
            entries[settings.name] = RouteEntry(LocalRoute(settings.name, vision.local))
        else:
            entries[settings.name] = RouteEntry(_remote(settings), probe=settings.probe)
    if "local" not in entries:
        entries["local"] = RouteEntry(LocalRoute("local", vision.local))
    auto: list[str] = []
    if vision.auto_detect:
        for settings in auto_route_settings(llm, settings_vision_models(llm)):
            if settings.name not in entries:
                entries[settings.name] = RouteEntry(_remote(settings))
                auto.append(settings.name)
    return entries, auto


class AutoRoutes:
    """The auto-detected rows of a route table, kept current with the model catalog.

    ``initial`` names the auto routes already in the table (from :func:`build_routes`).
    A name, once given to a model, keeps its route for the life of the process; a model the
    listing stops declaring leaves the order but keeps its row (its state and cached
    evidence stay addressable).
    """

    def __init__(
        self, llm: LLMSettings, detector: RouteDetector, *, initial: Iterable[str] = ()
    ) -> None:
        self._llm = llm
        self._detector = detector
        self._ours: set[str] = set(initial)

    async def refresh(self, routes: MutableMapping[str, RouteEntry]) -> tuple[str, ...]:
        """Add a row to ``routes`` for each newly detected model; return the auto-detected
        names in catalog order (those a configured route shadows left out)."""
        names: list[str] = []
        for settings in auto_route_settings(self._llm, await self._detector.models()):
            name = settings.name
            if name not in routes:
                routes[name] = RouteEntry(_remote(settings))
                self._ours.add(name)
            if name in self._ours:
                names.append(name)
        return tuple(names)

    async def aclose(self) -> None:
        await self._detector.aclose()
