"""States and refs without a browser: only the newest state can be acted on, refs are
allocated per (document, Playwright ref) and never reused, and deltas say what changed."""

from __future__ import annotations

import pytest

from deepseek_eyes.browser.observe import Control, PageView
from deepseek_eyes.browser.state import BrowserState, RefRegistry, StateBook, delta
from deepseek_eyes.errors import BrowserStaleError


def test_refs_are_bound_to_documents_and_never_reused() -> None:
    registry = RefRegistry()
    first = registry.public("doc-A", "e5")
    assert registry.public("doc-A", "e5") == first  # the same element keeps its ref
    second = registry.public("doc-B", "e5")  # Playwright reuses "e5" in a new document
    assert second != first
    assert registry.public("doc-A", "e5") == first


def test_a_bounded_registry_forgets_old_pairs_without_reusing_refs() -> None:
    registry = RefRegistry(limit=2)
    a, b = registry.public("d", "e1"), registry.public("d", "e2")
    registry.public("d", "e3")
    again = registry.public("d", "e1")  # forgotten: a new ref, never someone else's old one
    assert again not in (a, b)


def _state(book: StateBook, controls: dict[str, str], *, document: str = "doc",
           notices: tuple[str, ...] = (), texts: tuple[str, ...] = ()) -> BrowserState:
    view = PageView(controls={ref: Control(ref, ref, "", "button", f"{sig} [ref={ref}]", sig)
                              for ref, sig in controls.items()},
                    notices=list(notices), texts=list(texts))
    return BrowserState(book.next_id(), "http://x/", "T", document, view)


def test_only_the_newest_state_can_be_acted_on() -> None:
    book = StateBook()
    with pytest.raises(BrowserStaleError) as nothing_yet:
        book.require("s1")
    assert nothing_yet.value.code == "BROWSER_STATE_STALE"
    first = _state(book, {})
    book.commit(first)
    assert book.require(first.state_id) is first
    second = _state(book, {})
    book.commit(second)
    with pytest.raises(BrowserStaleError) as stale:
        book.require(first.state_id)
    assert stale.value.details == {"given": first.state_id, "current": second.state_id}
    for bad in (None, 7, "", "s999"):
        with pytest.raises(BrowserStaleError):
            book.require(bad)


def test_the_delta_names_added_removed_and_changed_refs_and_new_text() -> None:
    book = StateBook()
    before = _state(book, {"e1": 'button "Save"', "e2": 'checkbox "A"'},
                    notices=('status "Old"',), texts=("Hello",))
    after = _state(book, {"e2": 'checkbox "A" checked', "e3": 'button "Undo"'},
                   notices=('status "Old"', 'status "Saved"'), texts=("Hello", "Saved!"))
    change = delta(before, after)
    assert change.added == ('button "Undo" [ref=e3]',)
    assert change.removed == ("e1",)
    assert change.changed == ('checkbox "A" checked [ref=e2]',)
    assert change.notices == ('status "Saved"',)
    assert change.texts == ("Saved!",)
    assert not change.document_replaced
    replaced = delta(after, _state(book, {}, document="other"))
    assert replaced.document_replaced
    assert "no visible change" in delta(after, after).render()


def test_a_renamed_control_in_place_is_changed_not_added_and_removed() -> None:
    book = StateBook()

    def at(ref: str, sig: str, where: tuple[int, int]) -> Control:
        name = sig.split('"')[1]
        return Control(ref, ref, "", "button", f"{sig} [ref={ref}]", sig, where, name)

    before = BrowserState(book.next_id(), "u", "t", "doc", PageView(controls={
        "e1": at("e1", 'button "Save"', (10, 10)), "e2": at("e2", 'button "X"', (10, 50))}))
    after = BrowserState(book.next_id(), "u", "t", "doc", PageView(controls={
        "e3": at("e3", 'button "Saved"', (10, 10)), "e4": at("e4", 'button "Y"', (90, 90)),
        "e5": at("e5", 'button "Download invoice"', (10, 50))}))
    change = delta(before, after)
    assert change.changed == ('button "Saved" [ref=e3] (was e1)',)
    # In e2's place, but nothing like it: another element, not a renamed one.
    assert change.added == ('button "Y" [ref=e4]', 'button "Download invoice" [ref=e5]')
    assert change.removed == ("e2",)
