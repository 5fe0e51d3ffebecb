"""Builds the router's routes from settings: configured routes, auto-detected models, local.

The local route always exists (as ``local`` unless a configured route takes that name), so
``see`` works on a fresh install with no key and no network. Auto-detection turns each
``llm.models`` entry that declares image input into a route named ``llm/<model>`` on the
final-answer endpoint; it only joins the order when ``vision.auto_detect`` is on.
"""

from __future__ import annotations

import re

from deepseek_eyes.settings import LLMSettings, RouteSettings, VisionSettings
from deepseek_eyes.vision.routes.local_ocr import LocalRoute
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.types import VisionRoute

__all__ = ["auto_route_settings", "build_routes"]


def auto_route_settings(llm: LLMSettings) -> list[RouteSettings]:
    routes: list[RouteSettings] = []
    for model in llm.models:
        if "image" not in model.input:
            continue
        slug = re.sub(r"[^a-z0-9._-]+", "-", model.id.lower()).strip("-")[:56] or "model"
        routes.append(
            RouteSettings(
                name=f"llm/{slug}",
                kind="openai",
                base_url=llm.base_url,
                model=model.id,
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

    The OpenAI-compatible route (and with it the HTTP client) is imported only when a remote
    route exists: the local-only default starts without it (`see` on a cached image).
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
        for settings in auto_route_settings(llm):
            if settings.name not in entries:
                entries[settings.name] = RouteEntry(_remote(settings))
                auto.append(settings.name)
    return entries, auto
