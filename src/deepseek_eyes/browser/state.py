"""States, refs bound to them, and the delta between two states.

The rules, and why:

* **Every observation is a new state** with a new ``state_id`` (``s1``, ``s2``, … never
  reused while the service lives, across browser restarts too). Every action that can change
  the page (click, type, …) ends in a new observation, hence a new state.
* **Only the newest state can be acted on.** An action names the ``state_id`` it was
  planned on; any other is refused with ``BROWSER_STATE_STALE`` before the page is touched.
  So a plan made on what the page *was* never runs on what it *is*.
* **Our refs, not Playwright's.** Playwright's refs restart at ``e1`` in a new document and
  may then name a different element; browser-use users report clicks landing on shifted
  indexes. Our public refs are allocated per (document token, Playwright ref) and never
  reused for another pair, so a ref from a replaced document does not exist in any later
  state — it cannot resolve to the new document's element that reuses its Playwright name.
  The same element in the same document keeps its public ref across states, which is what
  makes deltas readable.
"""

from __future__ import annotations

import difflib
import itertools
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, TypedDict

from deepseek_eyes.browser.observe import Control, PageView, quote
from deepseek_eyes.errors import BrowserStaleError
from deepseek_eyes.untrusted import escape_controls

__all__ = ["BrowserState", "RefRegistry", "StateBook", "StateDelta", "StateSummary"]


class StateSummary(TypedDict):
    """A state as a report lists it: no page text beyond a cut, escaped title."""

    state_id: str
    url: str
    title: str
    controls: int
    dialog: str | None
    modal: str | None
    frames: int

#: Delta entries listed per kind; the rest are counted.
MAX_DELTA_LINES = 60
MAX_DELTA_TEXTS = 8
MAX_REGISTRY = 200_000
DIALOG_CHARS = 300


class RefRegistry:
    """Public refs for (document token, Playwright ref) pairs: allocated once, never reused.

    Bounded: the oldest pairs are forgotten past :data:`MAX_REGISTRY` (a forgotten pair seen
    again simply gets a new public ref; an old ref never comes back to mean something else).
    """

    def __init__(self, limit: int = MAX_REGISTRY) -> None:
        self._refs: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._next = itertools.count(1)
        self._limit = limit

    def public(self, document: str, pw_ref: str) -> str:
        key = (document, pw_ref)
        found = self._refs.get(key)
        if found is not None:
            self._refs.move_to_end(key)
            return found
        ref = f"e{next(self._next)}"
        self._refs[key] = ref
        if len(self._refs) > self._limit:
            self._refs.popitem(last=False)
        return ref


@dataclass
class BrowserState:
    state_id: str
    url: str  # redacted (deepseek_eyes.untrusted.redact_url): no query value, no fragment
    title: str
    document: str | None  # the main frame's document token
    view: PageView
    dialog: str | None = None  # the kind of an open JavaScript dialog (alert, confirm, …)
    modal: str | None = None  # an open modal dialog of the page, by its label
    dialog_message: str = ""  # the open JavaScript dialog's text (page text: quote it)
    frames: dict[str, str | None] = field(default_factory=dict)  # frame key -> token
    viewport: tuple[float, float] = (0.0, 0.0)
    scroll: tuple[float, float] = (0.0, 0.0)
    scroll_height: float = 0.0
    created: float = field(default_factory=time.monotonic)

    def control(self, ref: str) -> Control | None:
        return self.view.controls.get(ref)

    def summary(self) -> StateSummary:
        """For reports: what this state was, without its page text (a dialog by its kind,
        never its message)."""
        return {"state_id": self.state_id, "url": self.url,
                "title": escape_controls(self.title[:300]),
                "controls": len(self.view.controls), "dialog": self.dialog,
                "modal": escape_controls(self.modal[:120]) if self.modal else None,
                "frames": len(self.frames)}


@dataclass(frozen=True)
class StateDelta:
    previous: str | None
    state_id: str
    url: str
    title: str
    url_changed: bool
    title_changed: bool
    document_replaced: bool
    dialog: str | None  # "opened: …" / "closed"
    modal: str | None
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    notices: tuple[str, ...]
    texts: tuple[str, ...]
    omitted: int = 0

    @property
    def size(self) -> int:
        return len(self.added) + len(self.removed) + len(self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {"previous": self.previous, "state_id": self.state_id, "url": self.url,
                "title": escape_controls(self.title), "url_changed": self.url_changed,
                "title_changed": self.title_changed,
                "document_replaced": self.document_replaced, "dialog": self.dialog,
                "modal": self.modal, "added": list(self.added), "removed": list(self.removed),
                "changed": list(self.changed), "notices": list(self.notices),
                "new_text": list(self.texts), "omitted": self.omitted}

    def render(self) -> list[str]:
        """The delta's lines (page strings quoted; the caller fences them)."""
        out: list[str] = []
        if self.document_replaced:
            out.append("a new document was loaded")
        if self.dialog:
            out.append(f"dialog {self.dialog}")
        if self.modal:
            out.append(f"modal {self.modal}")
        out.extend(f"notice: {n}" for n in self.notices)
        out.extend(f"added: {line}" for line in self.added)
        out.extend(f"changed: {line}" for line in self.changed)
        if self.removed:
            out.append("removed: " + ", ".join(self.removed))
        out.extend(f"new text: {quote(t, 200)}" for t in self.texts)
        if self.omitted:
            out.append(f"(+{self.omitted} more changes: browser_observe shows the whole state)")
        if not out:
            out.append("no visible change")
        return out


class StateBook:
    """The states of one browser service, newest last; only the newest can be acted on."""

    def __init__(self) -> None:
        self.current: BrowserState | None = None
        self.registry = RefRegistry()
        self._seq = itertools.count(1)
        self.history: list[StateSummary] = []  # for the report

    def next_id(self) -> str:
        return f"s{next(self._seq)}"

    def commit(self, state: BrowserState) -> StateDelta:
        previous = self.current
        self.current = state
        if len(self.history) < 10_000:
            self.history.append(state.summary())
        return delta(previous, state)

    def require(self, state_id: Any) -> BrowserState:
        """The current state if ``state_id`` names it.

        Raises:
            BrowserStaleError: ``BROWSER_STATE_STALE`` for any other id (or none yet).
        """
        current = self.current
        if current is None or not isinstance(state_id, str) or state_id != current.state_id:
            newest = current.state_id if current else None
            raise BrowserStaleError(
                f"state {str(state_id)[:40]!r} is not the newest state"
                + (f" ({newest})" if newest else " (observe first)")
                + "; the action was not executed",
                code="BROWSER_STATE_STALE",
                details={"given": str(state_id)[:40], "current": newest})
        return current


def _renamed(old: dict[str, Control], new: dict[str, Control], added: list[str],
             removed: list[str]) -> dict[str, str]:
    """New ref -> old ref, for controls of the same role and frame at the same place whose
    names are alike (a button whose label changed from "Save" to "Saved", or "Clicked 1
    times" to "Clicked 2 times", is the same button; a panel's "Edit" replaced by another
    panel's "Download" in the same spot is not)."""
    places = {(old[r].role, old[r].frame, old[r].position): r for r in removed
              if old[r].position is not None}
    pairs: dict[str, str] = {}
    for ref in added:
        control = new[ref]
        key = (control.role, control.frame, control.position)
        was = places.get(key) if control.position is not None else None
        if was is not None and _alike(old[was].name, control.name):
            del places[key]
            pairs[ref] = was
    return pairs


def _alike(before: str, after: str) -> bool:
    return difflib.SequenceMatcher(None, before.casefold(), after.casefold()).ratio() >= 0.6


def _new_entries(before: list[str], after: list[str], limit: int) -> list[str]:
    """Entries of ``after`` that ``before`` did not have (as a multiset), at most ``limit``."""
    seen = Counter(before)
    out: list[str] = []
    for entry in after:
        if seen[entry] > 0:
            seen[entry] -= 1
        elif len(out) < limit:
            out.append(entry)
    return out


def _opened(state: BrowserState) -> str | None:
    if not state.dialog:
        return None
    return f"opened: {state.dialog} {quote(state.dialog_message, DIALOG_CHARS)}"


def delta(before: BrowserState | None, after: BrowserState) -> StateDelta:
    """What changed from ``before`` to ``after``, bounded."""
    if before is None:
        return StateDelta(None, after.state_id, after.url, after.title, True, True, True,
                          _opened(after), quote(after.modal, 80) if after.modal else None,
                          (), (), (), tuple(after.view.notices[:MAX_DELTA_LINES]), ())
    old, new = before.view.controls, after.view.controls
    replaced = before.document != after.document
    added_refs = [r for r in new if r not in old]
    removed = [r for r in old if r not in new]
    changed = [new[r].line for r in new if r in old and old[r].signature != new[r].signature]
    if not replaced:  # an element whose name changed got a new ref: say so, in place
        renamed = _renamed(old, new, added_refs, removed)
        changed += [f"{new[r].line} (was {was})" for r, was in renamed.items()]
        added_refs = [r for r in added_refs if r not in renamed]
        removed = [r for r in removed if r not in renamed.values()]
    added = [new[r].line for r in added_refs]
    notices = _new_entries(before.view.notices, after.view.notices, MAX_DELTA_LINES)
    texts = _new_entries(before.view.texts, after.view.texts, MAX_DELTA_TEXTS)
    omitted = max(0, len(added) - MAX_DELTA_LINES) + max(0, len(changed) - MAX_DELTA_LINES) \
        + max(0, len(removed) - MAX_DELTA_LINES * 4)
    dialog: str | None = None
    if after.dialog and (after.dialog, after.dialog_message) != (before.dialog,
                                                                 before.dialog_message):
        dialog = _opened(after)
    elif before.dialog and not after.dialog:
        dialog = "closed"
    modal = after.modal if after.modal != before.modal else None
    if before.modal and not after.modal:
        modal = "closed"
    return StateDelta(
        before.state_id, after.state_id, after.url, after.title, before.url != after.url,
        before.title != after.title, replaced, dialog,
        quote(modal, 80) if modal and modal != "closed" else modal,
        tuple(added[:MAX_DELTA_LINES]), tuple(removed[:MAX_DELTA_LINES * 4]),
        tuple(changed[:MAX_DELTA_LINES]), tuple(notices), tuple(texts), omitted)
