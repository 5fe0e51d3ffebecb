"""How a state, a page of it, or a delta reads as text for the model.

Outside the fenced block are only our own words: the state id, hints, counts, the next
call to make. Everything a page controls — its URL (redacted), its title, a dialog's
message, a modal's label, events that name a URL or a file, and the page's lines — is
inside one block, quoted (:func:`deepseek_eyes.untrusted.quote`) and fenced
(:func:`deepseek_eyes.untrusted.fence`). A page that rewrites its URL with
``history.replaceState`` or opens an ``alert`` full of instructions is still only data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepseek_eyes.browser.pages import Rendered
from deepseek_eyes.browser.state import DIALOG_CHARS, BrowserState, StateDelta
from deepseek_eyes.untrusted import escape_controls, fence, quote, redact_urls_in

__all__ = ["clean_event", "delta_text", "observation_text", "page_lines", "state_data",
           "state_header"]

DIALOG_KINDS = frozenset({"alert", "confirm", "prompt", "beforeunload"})
MAX_EVENTS = 20
EVENT_CHARS = 300


def _kind(state: BrowserState) -> str:
    return state.dialog if state.dialog in DIALOG_KINDS else "JavaScript"


def state_header(state: BrowserState, *, after: str | None = None) -> list[str]:
    """Our own lines about ``state``: its id, and what blocks it (no page text)."""
    where = f"state {state.state_id}"
    if after:
        where += f" ({after})"
    lines = [escape_controls(where)]
    if state.dialog:
        lines.append(f"a JavaScript {_kind(state)} dialog is open and blocks the page (its "
                     'text is in the page content): answer it with browser_dialog {"state_id": '
                     f'"{state.state_id}", "accept": true|false}}')
    if state.modal:
        lines.append("a modal dialog of the page is open (its label is in the page content): "
                     "only its controls can be used (browser_dialog with accept=false presses "
                     "Escape)")
    return lines


def page_lines(state: BrowserState) -> list[str]:
    """What the page controls about ``state``, quoted, for inside the fence."""
    lines = [f"url {quote(state.url, 500)}", f"title {quote(state.title, 120)}"]
    if state.dialog:
        lines.append(f"dialog {_kind(state)} {quote(state.dialog_message, DIALOG_CHARS)}")
    if state.modal:
        lines.append(f"modal {quote(state.modal, 80)}")
    return lines


def clean_event(event: str) -> str:
    """An event line (our words around a page's URL or file name): URLs redacted, controls
    escaped, cut."""
    text = escape_controls(redact_urls_in(event))
    return text if len(text) <= EVENT_CHARS else text[: EVENT_CHARS - 1] + "…"


def _events(events: Sequence[str]) -> list[str]:
    return [f"event: {clean_event(e)}" for e in events[:MAX_EVENTS]]


def observation_text(state: BrowserState, rendered: Rendered, *, events: Sequence[str] = (),
                     lead: Sequence[str] = (), find: str | None = None) -> str:
    whole = rendered.pages == 1 and not find
    lines = [*(escape_controls(line) for line in lead), *state_header(state)]
    content = [*page_lines(state), *_events(events)]
    if state.dialog:
        return "\n".join([*lines, fence(content)])
    if find:
        lines.append(f"items containing {quote(find, 80)} (page {rendered.page} of "
                     f"{rendered.pages})")
    elif not whole:  # a page that fits in one needs no paging line
        if rendered.page == 1:
            top, bottom = state.scroll[1], state.scroll[1] + state.viewport[1]
            where = f"the viewport (y {top:.0f}–{bottom:.0f} of {state.scroll_height:.0f} px)"
        else:
            where = "the rest of the page in document order"
        lines.append(f"page {rendered.page} of {rendered.pages}: {where}; "
                     f"{rendered.controls_here} of {rendered.controls_total} controls")
    lines.append(fence([*content, rendered.body]))
    if rendered.page < rendered.pages:
        lines.append(f'more: browser_observe {{"state_id": "{state.state_id}", "page": '
                     f"{rendered.page + 1}}} (pages {rendered.page + 1}–{rendered.pages})")
    if state.view.thin and not find:
        lines.append("note: little text or few controls in view; browser_screenshot shows "
                     "the pixels")
    return "\n".join(lines)


def delta_text(state: BrowserState, delta: StateDelta, *, action: str,
               events: Sequence[str] = ()) -> str:
    lines = state_header(state, after=f"was {delta.previous}, after {action}")
    content = [*page_lines(state), *_events(events)]
    if state.dialog:
        return "\n".join([*lines, fence(content)])
    lines += [f"changes: {len(delta.added)} added, {len(delta.removed)} removed, "
              f"{len(delta.changed)} changed; browser_observe shows the whole page",
              fence([*content, *delta.render()])]
    return "\n".join(lines)


def state_data(state: BrowserState, rendered: Rendered | None = None) -> dict[str, Any]:
    """The structured content beside the text: the URL redacted, page strings escaped."""
    data: dict[str, Any] = {
        "state_id": state.state_id, "url": escape_controls(state.url),
        "title": escape_controls(state.title), "dialog": state.dialog,
        "dialog_message": escape_controls(state.dialog_message) if state.dialog else None,
        "modal": escape_controls(state.modal) if state.modal else None,
        "controls": len(state.view.controls)}
    if rendered is not None:
        data["page"] = rendered.page
        data["pages"] = rendered.pages
    return data
