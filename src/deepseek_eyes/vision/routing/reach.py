"""Routes the settings define that no acquisition can ever try: ``config check``'s warnings.

A route that is configured but never considered is worse than an error, because nothing
says so: the file validates and the route simply never serves. Names that cannot resolve
(an unknown name in ``vision.route_priority`` or ``vision.route``, two routes with one name)
are already validation errors (``CONFIG_INVALID``). What is left is judged here, each
warning with the code ``CONFIG_ROUTE_UNREACHABLE`` and a ``reason``:

* ``shadowed``: with ``vision.auto_detect`` on, a model that declares text and image input
  would be the route ``llm/<model>``, but a ``[[vision.routes]]`` entry or an earlier model
  already has that name;
* ``over_limit``: an auto-detected model beyond the first
  :data:`~deepseek_eyes.vision.routing.detect.MAX_AUTO_ROUTES`;
* ``unordered``: a configured route the order leaves out. The order places every
  configured route, so this is a safety net that asks
  :func:`~deepseek_eyes.vision.routing.order.route_order` itself rather than restating it.

Only the settings are read (``config check`` makes no network call): models that only the
endpoint's ``/models`` declares are not judged. The module imports no route, client or
engine, so the check stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.routing.detect import (
    MAX_AUTO_ROUTES,
    auto_route_name,
    settings_vision_models,
)
from deepseek_eyes.vision.routing.order import route_order

__all__ = ["UNREACHABLE_CODE", "RouteWarning", "unreachable_routes"]

#: The warning code (registered in ``errors.ERROR_CODES``, documented in docs/errors.md).
UNREACHABLE_CODE = "CONFIG_ROUTE_UNREACHABLE"


@dataclass(frozen=True)
class RouteWarning:
    """One route no acquisition can try, and why (``reason``, a stable word)."""

    route: str
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    code: str = UNREACHABLE_CODE

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "details": {"route": self.route, "reason": self.reason, **self.details},
        }


def _auto_warnings(settings: Settings, configured: set[str]) -> list[RouteWarning]:
    warnings: list[RouteWarning] = []
    owners: dict[str, str] = {}
    for index, model_id in enumerate(settings_vision_models(settings.llm, limit=None)):
        name = auto_route_name(model_id)
        if name in configured:
            warnings.append(RouteWarning(
                name, "shadowed",
                f"model {model_id!r} cannot serve as the auto-detected route {name!r}: "
                f"a [[vision.routes]] entry has that name",
                {"model": model_id, "shadowed_by": "vision.routes"},
            ))
        elif name in owners:
            warnings.append(RouteWarning(
                name, "shadowed",
                f"model {model_id!r} cannot serve as the auto-detected route {name!r}: "
                f"model {owners[name]!r} has that name first",
                {"model": model_id, "shadowed_by": owners[name]},
            ))
        elif index >= MAX_AUTO_ROUTES:
            warnings.append(RouteWarning(
                name, "over_limit",
                f"model {model_id!r} is not auto-detected: only the first "
                f"{MAX_AUTO_ROUTES} models that declare text and image input become routes",
                {"model": model_id, "limit": MAX_AUTO_ROUTES},
            ))
        else:
            owners[name] = model_id
    return warnings


def unreachable_routes(settings: Settings) -> list[RouteWarning]:
    """Every route the settings define that no acquisition can try (the module docstring
    lists the reasons), configured routes first."""
    vision = settings.vision
    configured = [route.name for route in vision.routes]
    known = {*configured, "local"}
    order = route_order(
        known=known, configured=configured, priority=vision.route_priority,
        selected=vision.route,
    )
    warnings = [
        RouteWarning(name, "unordered", f"route {name!r} is configured but never tried")
        for name in configured if name not in order
    ]
    if vision.auto_detect:
        warnings.extend(_auto_warnings(settings, set(configured)))
    return warnings
