"""How a state, a page of it, or a delta reads as text for the model.

Our own words (state ids, hints, counts) stay outside the fenced block; everything the page
said is inside it, JSON-quoted (see :mod:`deepseek_eyes.browser.observe`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from deepseek_eyes.browser.observe import CONTENT_END, CONTENT_START, quote
from deepseek_eyes.browser.pages import Rendered
from deepseek_eyes.browser.state import BrowserState, StateDelta

__all__ = ["delta_text", "observation_text", "state_data", "state_header"]


def state_header(state: BrowserState, *, after: str | None = None) -> list[str]:
    where = f"state {state.state_id}"
    if after:
        where += f" ({after})"
    lines = [f"{where} · {state.url[:500]} · title {quote(state.title, 120)}"]
    if state.dialog:
        lines.append(f"a JavaScript {state.dialog} dialog is open and blocks the page: answer "
                     f'it with browser_dialog {{"state_id": "{state.state_id}", "accept": '
                     "true|false}")
    if state.modal:
        lines.append(f"a modal dialog {quote(state.modal, 80)} is open: only its controls "
                     "can be used (browser_dialog with accept=false presses Escape)")
    return lines


def _events(events: Sequence[str]) -> list[str]:
    return [f"event: {e}" for e in events[:20]]


def observation_text(state: BrowserState, rendered: Rendered, *, events: Sequence[str] = (),
                     lead: Sequence[str] = (), find: str | None = None) -> str:
    whole = rendered.pages == 1 and not find
    lines = [*lead, *state_header(state), *_events(events)]
    if state.dialog:
        return "\n".join(lines)
    if find:
        lines.append(f"items containing {json.dumps(find[:80], ensure_ascii=False)} (page "
                     f"{rendered.page} of {rendered.pages})")
    elif not whole:  # a page that fits in one needs no paging line
        if rendered.page == 1:
            top, bottom = state.scroll[1], state.scroll[1] + state.viewport[1]
            where = f"the viewport (y {top:.0f}–{bottom:.0f} of {state.scroll_height:.0f} px)"
        else:
            where = "the rest of the page in document order"
        lines.append(f"page {rendered.page} of {rendered.pages}: {where}; "
                     f"{rendered.controls_here} of {rendered.controls_total} controls")
    lines.append(rendered.text)
    if rendered.page < rendered.pages:
        lines.append(f'more: browser_observe {{"state_id": "{state.state_id}", "page": '
                     f"{rendered.page + 1}}} (pages {rendered.page + 1}–{rendered.pages})")
    if state.view.thin and not find:
        lines.append("note: little text or few controls in view; browser_screenshot shows "
                     "the pixels")
    return "\n".join(lines)


def delta_text(state: BrowserState, delta: StateDelta, *, action: str,
               events: Sequence[str] = ()) -> str:
    lines = [*state_header(state, after=f"was {delta.previous}, after {action}"),
             *_events(events)]
    if state.dialog:
        return "\n".join(lines)
    changes = delta.render()
    lines += [f"changes: {len(delta.added)} added, {len(delta.removed)} removed, "
              f"{len(delta.changed)} changed; browser_observe shows the whole page",
              CONTENT_START, *changes, CONTENT_END]
    return "\n".join(lines)


def state_data(state: BrowserState, rendered: Rendered | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"state_id": state.state_id, "url": state.url,
                            "title": state.title, "dialog": state.dialog,
                            "modal": state.modal, "controls": len(state.view.controls)}
    if rendered is not None:
        data["page"] = rendered.page
        data["pages"] = rendered.pages
    return data
