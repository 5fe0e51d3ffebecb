"""The order in which an acquisition considers vision routes: one pure function.

The seed's order ("Route ordering and failover"), with where each step comes from here:

1. the route that produced the current base evidence, for a targeted reread (``look``);
2. the explicitly selected route: ``see --route`` (or the MCP ``see`` tool's ``route``),
   then ``vision.route``;
3. ``vision.route_priority``, one route per entry;
4. every other ``[[vision.routes]]`` entry, in file order;
5. the models auto-detected on the ``[llm]`` endpoint (``vision.auto_detect``): those that
   declare both text and image input.

Each name appears once, at its first place: an explicit route that is also in the priority
list moves to the front and the rest stays behind it as failover. With nothing from any
step, the built-in routes serve in their order: the ``deepseek`` route (a seeing DeepSeek
model on the ``[llm]`` upstream, when its key resolves), then the embedded local route, so
a fresh install with only a DeepSeek key sees through DeepSeek and falls over to OCR, and
one with no key sees offline.

Decisions a newcomer would otherwise undo:

* An explicit route *prepends*; it never replaces the order. ``see --route B`` tries B and,
  when B fails, fails over to the order as configured.
* Step 4 exists so that no configured route is silently unused: a route in ``vision.routes``
  but not in ``route_priority`` still serves, after the priority list and before anything
  the endpoint merely advertises.
* A base route that no longer exists (evidence from a route since removed from the
  settings) is skipped, not refused: it is a hint from history, and the rest of the order
  still answers the reread. An unknown *explicit* route is the caller's mistake and is
  refused.
* The built-in routes (``deepseek``, ``local``) are candidates only when they are named
  (explicitly, in the priority list, or as a configured route) or when nothing else is: a
  remote setup does not quietly fall back to OCR, or spend DeepSeek tokens, unless asked
  to.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from deepseek_eyes.errors import VisionError

__all__ = ["route_order"]


def route_order(
    *,
    known: Collection[str],
    configured: Sequence[str] = (),
    priority: Sequence[str] = (),
    selected: str | None = None,
    auto: Sequence[str] = (),
    explicit: str | None = None,
    base_route: str | None = None,
    fallback: Sequence[str] = ("deepseek", "local"),
) -> list[str]:
    """Candidate route names, best first (the module docstring gives the order).

    ``known`` holds every route that exists; a name outside it is never returned.
    ``configured`` are the ``[[vision.routes]]`` names in file order, ``priority`` is
    ``vision.route_priority``, ``selected`` is ``vision.route``, ``auto`` the auto-detected
    routes in catalog order, ``explicit`` the route a caller asked for and ``base_route`` the
    route of the base evidence being reread.

    Raises:
        VisionError: ``VISION_ROUTE_UNKNOWN`` for an ``explicit`` route not in ``known``.
    """
    if explicit is not None and explicit not in known:
        raise VisionError(
            f"no route is named {explicit!r}; the known routes are "
            f"{', '.join(sorted(known)) or 'none'} (`deepseek-eyes routes` lists them)",
            code="VISION_ROUTE_UNKNOWN",
            details={"route": explicit, "known": sorted(known)},
        )
    ordered: list[str] = []
    for name in (base_route, explicit, selected, *priority, *configured, *auto):
        if name is not None and name in known and name not in ordered:
            ordered.append(name)
    if not ordered:
        ordered.extend(name for name in fallback if name in known)
    return ordered
