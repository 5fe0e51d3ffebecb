"""Builds the router's routes from settings: configured routes, auto-detected models, the
built-in ``deepseek`` route, local.

The local route always exists (as ``local`` unless a configured route takes that name), so
``see`` works on a fresh install with no key and no network. The ``deepseek`` route
(``[vision.deepseek]``) is a seeing DeepSeek model (``deepseek-flash``) on the ``[llm]``
upstream with the ``[llm]`` key: no second key. It is built only when that key resolves
(or ``llm.api_key = false``): without a key there is nothing it could call, and the offline
default stays the local route alone. Whether the upstream really serves that model, and
whether it sees, its health check (``/models``) and its pixel probe find out; a text-only
upstream fails them and the order goes on to ``local``. Auto-detection turns each
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

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.settings import DEEPSEEK_ROUTE, LLMSettings, RouteSettings, VisionSettings
from deepseek_eyes.vision.routes.local_ocr import LocalRoute
from deepseek_eyes.vision.routing.detect import (
    RouteDetector,
    auto_route_name,
    settings_vision_models,
)
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.types import VisionRoute

__all__ = ["AutoRoutes", "auto_route_settings", "build_routes", "deepseek_route_settings"]


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


def deepseek_route_settings(vision: VisionSettings, llm: LLMSettings) -> RouteSettings | None:
    """The built-in ``deepseek`` route on the ``[llm]`` upstream, or None when it is off or
    the ``[llm]`` key reference names an unset variable."""
    if not vision.deepseek.enabled:
        return None
    if llm.api_key is not None:
        try:
            llm.api_key.resolve()
        except ConfigError:
            return None
    return RouteSettings(
        name=DEEPSEEK_ROUTE, kind="openai", base_url=llm.base_url, model=vision.deepseek.model,
        api_key=llm.api_key, timeout=min(vision.deepseek.timeout, llm.timeout),
        connect_timeout=llm.connect_timeout, thinking=vision.deepseek.thinking,
    )


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
    if DEEPSEEK_ROUTE not in entries:
        deepseek = deepseek_route_settings(vision, llm)
        if deepseek is not None:
            entries[DEEPSEEK_ROUTE] = RouteEntry(_remote(deepseek))
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
