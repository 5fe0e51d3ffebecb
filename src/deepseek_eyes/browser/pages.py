"""An observation in pages: the viewport first, the rest in document order.

The first page holds what is in the viewport (and open dialogs and notices, wherever they
are); the rest follows in document order, in pages of ``page_chars`` characters, cut at item
boundaries so a control is never split. Compact detail folds a run of text into one summary
line; ``detail="text"`` shows every block; ``find`` keeps only what contains the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deepseek_eyes.browser.observe import (
    SUMMARY_CHARS,
    TEXT_BLOCK_CHARS,
    Item,
    PageView,
    quote,
)
from deepseek_eyes.untrusted import fence

__all__ = ["Rendered", "render_page"]


@dataclass(frozen=True)
class Rendered:
    body: str  # the page's lines (page strings quoted), not yet fenced
    page: int
    pages: int
    controls_here: int
    controls_total: int

    @property
    def text(self) -> str:
        """The page's lines, fenced."""
        return fence([self.body])




def _lines(items: Sequence[Item], detail: str) -> list[tuple[Item, str]]:
    """Each item's rendered line; in compact detail a run of text items becomes one
    summary line."""
    out: list[tuple[Item, str]] = []
    run: list[Item] = []

    def flush() -> None:
        if not run:
            return
        joined = " ".join(i.full or "" for i in run)
        if len(joined) <= SUMMARY_CHARS:
            out.append((run[0], quote(joined, SUMMARY_CHARS)))
        else:
            shown = quote(joined, SUMMARY_CHARS)
            out.append((run[0], f"{shown} (+{len(joined) - SUMMARY_CHARS + 1} chars"
                                f"{f' in {len(run)} blocks' if len(run) > 1 else ''})"))
        run.clear()

    for item in items:
        if item.kind == "text":
            if detail == "text":
                out.append((item, quote(item.full or "", TEXT_BLOCK_CHARS)))
                continue
            if run and run[-1].context != item.context:
                flush()
            run.append(item)
            continue
        flush()
        out.append((item, item.line))
    flush()
    return out


def _paginate(lines: list[tuple[Item, str]], page_chars: int) -> list[list[tuple[Item, str]]]:
    pages: list[list[tuple[Item, str]]] = []
    current: list[tuple[Item, str]] = []
    size = 0
    for entry in lines:
        cost = len(entry[1]) + 2 * len(entry[0].context) + 1
        if current and size + cost > page_chars:
            pages.append(current)
            current, size = [], 0
        current.append(entry)
        size += cost
    if current or not pages:
        pages.append(current)
    return pages


def _emit(entries: Sequence[tuple[Item, str]]) -> str:
    out: list[str] = []
    shown: tuple[str, ...] = ()
    for item, line in entries:
        context = item.context
        common = 0
        while common < min(len(shown), len(context)) and shown[common] == context[common]:
            common += 1
        out.extend("  " * depth + context[depth] + ":" for depth in range(common, len(context)))
        shown = context
        out.append("  " * len(context) + line)
    return "\n".join(out)


def render_page(view: PageView, page: int, page_chars: int, *, detail: str = "compact",
                find: str | None = None) -> Rendered:
    """Page ``page`` (1-based; clamped) of the observation.

    Page 1 is the viewport plus pinned items (dialogs, notices); later pages hold the rest
    in document order. With ``find``, only items whose text contains it (case-insensitive),
    with every matching text block in full.
    """
    if find:
        needle = find.casefold()
        items = [i for i in view.items
                 if needle in (i.full or i.line).casefold()]
        entries = _lines(items, "text")
        pages = _paginate(entries, page_chars)
    else:
        first = [i for i in view.items if i.visible or i.pinned]
        rest = [i for i in view.items if not (i.visible or i.pinned)]
        first_lines = _lines(first, detail)
        head = _paginate(first_lines, page_chars)
        pages = head + (_paginate(_lines(rest, detail), page_chars) if rest else [])
        if not head[0] and len(pages) > 1:
            pages = pages[1:]
    number = min(max(1, page), len(pages))
    entries = pages[number - 1]
    controls_here = sum(len(item.refs) for item, _ in entries)
    body = _emit(entries) or "(nothing here)"
    return Rendered(body, number, len(pages),
                    controls_here, len(view.controls))
