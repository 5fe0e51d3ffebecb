"""Folding one listing into a server's state, plane by plane: what each plane keeps, when
it is withdrawn, and what is published.

The rules, each of which a newcomer might otherwise "simplify" away:

* The planes are judged apart. A failed plane keeps what it last published (or is
  ``failed`` when it had nothing) and never takes the other plane down with it.
* The empty rule is per plane and sticky. A plane whose non-empty listing turns empty is
  ``withdrawn`` (it offers nothing), and a withdrawn plane that lists empty again *stays*
  withdrawn: only a probe (:meth:`~deepseek_eyes.mcp_host.manager.McpManager.probe`, a separate
  uncached connection) that also lists it empty publishes it ``ready`` and empty (seed 000).
  Judging the catalog as a whole would miss tools going empty beside listed resources.
* The server's catalog is published while either plane is ready, with a failed or withdrawn
  plane's entries empty; an unchanged catalog keeps its generation (calls in flight stay
  valid), any change is a new generation.
"""

from __future__ import annotations

from deepseek_eyes.mcp_host.catalog import Catalog, PromptEntry, ResourceEntry, ToolEntry
from deepseek_eyes.mcp_host.connection import map_error
from deepseek_eyes.mcp_host.discovery import ContentPlane, Listing, ToolsPlane, content_wanted
from deepseek_eyes.mcp_host.state import ServerState

__all__ = ["apply_listing", "confirm_by_probe", "publish"]


def apply_listing(state: ServerState, listing: Listing) -> None:
    """Fold one listing into the state, plane by plane.

    A failed plane keeps what it last published (or is ``failed`` when it had nothing);
    a plane whose non-empty listing turns empty, or that is already ``withdrawn`` and
    lists empty again, is ``withdrawn`` (offers nothing) until a probe confirms the
    empty listing (:func:`confirm_by_probe`). The server is published while either plane
    is ready.
    """
    s, prev = state.settings, state.catalog
    tools = prev.tools if prev is not None else ()
    resources = prev.resources if prev is not None else ()
    prompts = prev.prompts if prev is not None else ()
    if s.tools_enabled:
        if listing.tools_error is not None:
            state.tools_error = _plane_failed(state, listing.tools_error, "tools")
        else:
            plane = listing.tools or ToolsPlane()
            if plane.empty and (state.tools_status == "withdrawn" or (
                    state.tools_status == "ready" and tools)):
                state.tools_status, tools = "withdrawn", ()
            else:
                state.tools_status, tools = "ready", plane.tools
            state.tools_error = None
    if content_wanted(s):
        if listing.content_error is not None:
            state.content_error = _plane_failed(state, listing.content_error, "content")
        else:
            content = listing.content or ContentPlane()
            if content.empty and (state.content_status == "withdrawn" or (
                    state.content_status == "ready" and (resources or prompts))):
                state.content_status, resources, prompts = "withdrawn", (), ()
            else:
                state.content_status = "ready"
                resources, prompts = content.resources, content.prompts
            state.content_error = None
    publish(state, tools, resources, prompts, listing.instructions)


def _plane_failed(state: ServerState, exc: BaseException, plane: str) -> str:
    """Keep a plane's failure; a plane with nothing published becomes ``failed``."""
    err = map_error(exc)
    state.fail(err)
    if getattr(state, f"{plane}_status") not in ("ready", "withdrawn"):
        setattr(state, f"{plane}_status", "failed")
    return err.code


def publish(state: ServerState, tools: tuple[ToolEntry, ...],
            resources: tuple[ResourceEntry, ...], prompts: tuple[PromptEntry, ...],
            instructions: str | None) -> None:
    """The next generation, or none while neither plane is ready; an unchanged catalog
    keeps its generation (in-flight calls stay valid)."""
    prev = state.catalog
    if "ready" not in (state.tools_status, state.content_status):
        if prev is not None:
            state.catalog = None
            state.generation += 1
        return
    catalog = Catalog(generation=state.generation + 1, tools=tools,
                      resources=resources, prompts=prompts, instructions=instructions,
                      content_listed=content_wanted(state.settings),
                      by_public={t.public_name: t for t in tools})
    if prev is not None and _same(prev, catalog):
        return
    state.generation = catalog.generation
    state.catalog = catalog


def confirm_by_probe(state: ServerState, listing: Listing) -> None:
    """A probe's verdict on each withdrawn plane: an empty listing confirms it (published
    ready and empty), entries ask the live connection to list again, a failure leaves
    it withdrawn."""
    refresh = False
    if state.tools_status == "withdrawn" and listing.tools is not None:
        if listing.tools.empty:
            state.tools_status = "ready"
        else:
            refresh = True
    if state.content_status == "withdrawn" and listing.content is not None:
        if listing.content.empty:
            state.content_status = "ready"
        else:
            refresh = True
    if state.status == "ready":
        prev = state.catalog
        publish(state, prev.tools if prev else (), prev.resources if prev else (),
                prev.prompts if prev else (), listing.instructions)
    if refresh:
        state.refresh.set()


def _same(a: Catalog, b: Catalog) -> bool:
    return (a.tools, a.resources, a.prompts, a.instructions) == (
        b.tools, b.resources, b.prompts, b.instructions)
