"""The compact observation: an aria tree in, one line per thing the model can use out.

What a line is:

* **control** — every element a person could operate (button, link, textbox, checkbox,
  combobox, tab, …, and any element with a pointer cursor that is not inside one):
  ``role "name" = "value" states [ref=e12]``. Every control is addressable; none is pruned.
* **heading** — ``h2 "Title"``; **landmarks** (main, nav, dialog, frame, table, …) are not
  lines of their own but the context lines above the items inside them, indented.
* **notice** — ``alert``/``status``/``log`` text (toasts, validation messages), in full.
* **row** — a table row on one line, cells ``|``-separated, its controls inline.
* **text** — everything else, as a bare quoted string. Compact detail keeps the first words
  of a run of text and says how much was left out; ``detail="text"`` shows every block in
  full.

Every string that came from the page is JSON-quoted (:func:`deepseek_eyes.untrusted.quote`:
controls escaped, the fence's delimiter broken up), so page text can neither start a line
nor pose as a ref or as our own markers; the whole block is fenced as untrusted data. A
secret field's value (password, one-time code, card data) is hidden wherever the tree shows
it, and link URLs are redacted like every URL we write.

Paging (the first page is the viewport) is :mod:`deepseek_eyes.browser.pages`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from deepseek_eyes.browser.snapshot import AriaNode, Box
from deepseek_eyes.untrusted import fence_end, fence_start, quote, redact_url

__all__ = [
    "CONTENT_END",
    "CONTENT_START",
    "SECRET_FIELD_JS",
    "Control",
    "Item",
    "PageView",
    "RefAllocator",
    "build_view",
    "quote",
]

#: A page script (one argument, the element) that says whether a field holds a secret:
#: a password input, an ``autocomplete`` of a password, a one-time code or card data, or a
#: name or id that says password, passcode, OTP or card security code.
SECRET_FIELD_JS = (
    "e => (e.type || '').toLowerCase() === 'password'"  # noqa: S105 - detects, not holds
    " || /(^|\\s)(current-password|new-password|one-time-code|cc-[a-z-]+)(\\s|$)/i"
    ".test(e.getAttribute('autocomplete') || '')"
    " || /passw(or)?d|passcode|(^|[^a-z])otp([^a-z]|$)|one.?time.?(code|pass)|(^|[^a-z])"
    "(cvc|cvv|csc)([^a-z]|$)/i.test((e.getAttribute('name') || '') + ' ' + (e.id || ''))"
)

CONTENT_START = fence_start("page")
CONTENT_END = fence_end("page")

INTERACTIVE = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox",
    "slider", "spinbutton", "switch", "tab", "menuitem", "menuitemcheckbox", "menuitemradio",
    "treeitem", "option",
})
LANDMARKS = {
    "banner": "banner", "navigation": "nav", "main": "main", "contentinfo": "footer",
    "complementary": "aside", "region": "region", "form": "form", "search": "search",
    "dialog": "dialog", "alertdialog": "alertdialog", "tabpanel": "tabpanel",
    "menu": "menu", "menubar": "menubar", "toolbar": "toolbar",
}
NOTICES = frozenset({"alert", "status", "log", "marquee", "timer"})
TABLES = frozenset({"table", "grid", "treegrid"})
CELLS = frozenset({"cell", "gridcell", "columnheader", "rowheader"})
# Containers whose own text reads as one block (their inline children's text included).
BLOCKS = frozenset({
    "paragraph", "listitem", "blockquote", "definition", "term", "note", "caption",
    "figure", "code", "cell", "gridcell", "article", "label", "legend",
})
INLINE = frozenset({
    "text", "link", "strong", "emphasis", "code", "mark", "time", "generic", "subscript",
    "superscript", "deletion", "insertion", "img", "abbr",
})
STATE_WORDS = (("checked", "checked"), ("disabled", "disabled"), ("expanded", "expanded"),
               ("pressed", "pressed"), ("selected", "selected"), ("active", "focused"),
               ("invalid", "invalid"))

NAME_CHARS = 100
VALUE_CHARS = 200
NOTICE_CHARS = 400
ROW_CHARS = 400
SUMMARY_CHARS = 120
TEXT_BLOCK_CHARS = 2000
MAX_OPTIONS = 12

#: (frame key, Playwright ref) -> our public ref. Frame key: "" for the main frame, else the
#: Playwright ref of the iframe element that holds the frame.
RefAllocator = Callable[[str, str], str]


@dataclass(frozen=True)
class Control:
    """One addressable element: what the state binds its public ref to."""

    ref: str  # public, e.g. "e12"
    pw_ref: str  # Playwright's, valid only against the latest snapshot of its frame
    frame: str  # frame key (see RefAllocator)
    role: str
    line: str  # the rendered line, with its ref
    signature: str  # the line without the ref: what a delta compares
    position: tuple[int, int] | None = None  # top-left in the page's viewport, rounded
    name: str = ""


@dataclass(frozen=True)
class Item:
    kind: Literal["control", "heading", "notice", "row", "text", "image"]
    line: str  # compact rendering, no indent
    context: tuple[str, ...]  # landmark lines, outermost first
    top: float  # absolute y in the page's viewport coordinates (inf: unknown)
    visible: bool  # intersects the viewport
    pinned: bool = False  # always on the first page (dialogs, notices)
    full: str | None = None  # text items: the whole block, for detail="text"
    refs: tuple[str, ...] = ()
    name: str = ""  # controls: the accessible name (a label's text repeating it is dropped)


@dataclass
class PageView:
    """Everything one observation found, before paging."""

    items: list[Item] = field(default_factory=list)
    controls: dict[str, Control] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # every text block, for deltas and find
    thin: bool = False  # too little semantic content in the viewport: pixels may help
    iframes: int = 0


@dataclass
class _Ctx:
    context: tuple[str, ...] = ()
    frame: str = ""
    dx: float = 0.0
    dy: float = 0.0
    box: Box | None = None
    in_control: bool = False
    pinned: bool = False


class _Builder:
    def __init__(self, allocate: RefAllocator, viewport: tuple[float, float],
                 secrets: frozenset[str]) -> None:
        self.allocate = allocate
        self.secrets = secrets
        self.width, self.height = viewport
        self.view = PageView()
        self.unnamed_image_area = 0.0

    # -- geometry ------------------------------------------------------------------------
    def _place(self, node: AriaNode, ctx: _Ctx) -> tuple[float, bool]:
        box = node.box or ctx.box
        if box is None:
            return float("inf"), False
        x, y, w, h = box[0] + ctx.dx, box[1] + ctx.dy, box[2], box[3]
        visible = w > 0 and h > 0 and x < self.width and y < self.height and x + w > 0 \
            and y + h > 0
        return y, visible

    def _child_ctx(self, node: AriaNode, ctx: _Ctx, **changes: Any) -> _Ctx:
        return dataclasses.replace(ctx, **{"box": node.box or ctx.box, **changes})

    def _add(self, kind: Literal["control", "heading", "notice", "row", "text", "image"],
             line: str, node: AriaNode, ctx: _Ctx, *, full: str | None = None,
             refs: tuple[str, ...] = ()) -> None:
        top, visible = self._place(node, ctx)
        self.view.items.append(Item(kind, line, ctx.context, top, visible,
                                    pinned=ctx.pinned or kind == "notice", full=full,
                                    refs=refs, name=node.name if kind == "control" else ""))

    # -- controls ------------------------------------------------------------------------
    def control_line(self, node: AriaNode, ctx: _Ctx) -> tuple[str, str | None]:
        """(line, public ref) for an interactive node; registers the control."""
        role = node.role
        name = node.name
        value: str | None = None
        extra = ""
        if role == "combobox":
            options = [c for c in node.children if c.role == "option"]
            chosen = [o.name for o in options if o.states.get("selected")]
            value = chosen[0] if chosen else node.text
            if options:
                shown = " | ".join(quote(o.name, 40) for o in options[:MAX_OPTIONS])
                more = f" +{len(options) - MAX_OPTIONS}" if len(options) > MAX_OPTIONS else ""
                extra = f" options: {shown}{more}"
        elif role in ("textbox", "searchbox", "spinbutton", "slider") or (
                node.text and role not in ("link", "button", "tab", "option")):
            value = node.text
        if not name and role in ("link", "button", "clickable", "tab", "menuitem"):
            name = node.all_text(NAME_CHARS * 2) or redact_url(node.url or "")
        parts = [role]
        if name:
            parts.append(quote(name, NAME_CHARS))
        if value and value in self.secrets:
            parts.append(f"= (hidden: {len(value)} characters)")
        elif value:
            parts.append("= " + quote(value, VALUE_CHARS))
        elif node.placeholder and role in ("textbox", "searchbox", "combobox"):
            parts.append("placeholder " + quote(node.placeholder, 60))
        for attr, word in STATE_WORDS:
            state = node.states.get(attr)
            if state is True:
                parts.append(word)
            elif isinstance(state, str) and attr == "checked":
                parts.append(f"checked={state}")
        if node.states.get("level") and role != "heading":
            parts.append(f"level={node.states['level']}")
        signature = " ".join(parts) + extra
        if node.ref is None:
            return " ".join(parts) + " [no ref: not visible]" + extra, None
        public = self.allocate(ctx.frame, node.ref)
        line = f"{' '.join(parts)} [ref={public}]{extra}"
        box = node.box or ctx.box
        position = (round(box[0] + ctx.dx), round(box[1] + ctx.dy)) if box else None
        self.view.controls[public] = Control(public, node.ref, ctx.frame, role, line, signature,
                                             position, name)
        return line, public

    # -- the walk ------------------------------------------------------------------------
    def walk(self, node: AriaNode, ctx: _Ctx) -> None:
        role = node.role
        if role == "text":
            if not ctx.in_control and node.text and node.text.strip():
                self._text(node.text, node, ctx)
            return
        if role == "iframe":
            self.view.iframes += 1
            title = f"frame {quote(node.name, 60)}" if node.name else "frame"
            frame = node.ref or ctx.frame
            dx = ctx.dx + (node.box[0] if node.box else 0)
            dy = ctx.dy + (node.box[1] if node.box else 0)
            inner = self._child_ctx(node, ctx, context=(*ctx.context, title), frame=frame,
                                    dx=dx, dy=dy, box=None)
            for child in node.children:
                self.walk(child, inner)
            return
        if role in INTERACTIVE and not (role == "option" and ctx.in_control):
            line, public = self.control_line(node, ctx)
            self._add("control", line, node, ctx, refs=(public,) if public else ())
            inner = self._child_ctx(node, ctx, in_control=True)
            for child in node.children:
                if role == "combobox" and child.role == "option":
                    continue
                self.walk(child, inner)
            return
        if node.pointer and node.ref and not ctx.in_control and role not in CELLS \
                and role != "row":
            clickable = AriaNode("clickable", name=node.name or node.all_text(NAME_CHARS * 2),
                                 ref=node.ref, box=node.box, states=node.states)
            line, public = self.control_line(clickable, ctx)
            self._add("control", line, node, ctx, refs=(public,) if public else ())
            inner = self._child_ctx(node, ctx, in_control=True)
            for child in node.children:
                self.walk(child, inner)
            return
        if ctx.in_control:
            for child in node.children:
                self.walk(child, self._child_ctx(node, ctx))
            return
        if role == "heading":
            level = node.states.get("level")
            text = node.name or node.all_text(NAME_CHARS * 2)
            self._add("heading", f"h{level if isinstance(level, str) else ''} "
                                 f"{quote(text, NAME_CHARS)}", node, ctx)
            self._controls_only(node, ctx)
            return
        if role in NOTICES:
            text = node.name or node.all_text(NOTICE_CHARS)
            if text.strip():
                line = f"{role} {quote(text, NOTICE_CHARS)}"
                self.view.notices.append(line)
                self._add("notice", line, node, ctx)
            self._controls_only(node, ctx)
            return
        if role in TABLES:
            self._table(node, ctx)
            return
        if role == "img":
            if node.name:
                self._add("image", f"img {quote(node.name, NAME_CHARS)}", node, ctx)
            elif node.box:
                self.unnamed_image_area += node.box[2] * node.box[3]
            return
        if _is_landmark(node):
            header = _landmark(node)
            only = node.children[0] if len(node.children) == 1 else None
            while only is not None and _is_landmark(only):  # "banner › nav" on one line
                header += " › " + _landmark(only)
                node = only
                only = node.children[0] if len(node.children) == 1 else None
            pinned = ctx.pinned or role in ("dialog", "alertdialog") or node.role in (
                "dialog", "alertdialog")
            inner = self._child_ctx(node, ctx, context=(*ctx.context, header), pinned=pinned)
            for child in node.children:
                self.walk(child, inner)
            return
        if role in BLOCKS:
            if _says_something(_inline_text(node, controls=False)):
                self._text(_inline_text(node), node, ctx)
            inner = self._child_ctx(node, ctx)
            for child in node.children:
                if child.role not in INLINE or child.role in INTERACTIVE or child.pointer:
                    self.walk(child, inner)
                else:
                    self._controls_only(child, inner)
            return
        if node.text and node.text.strip():
            self._text(node.text, node, ctx)
        inner = self._child_ctx(node, ctx)
        for child in node.children:
            self.walk(child, inner)

    def _controls_only(self, node: AriaNode, ctx: _Ctx) -> None:
        """Walk ``node``'s subtree for controls (its text is already taken)."""
        inner = self._child_ctx(node, ctx)
        for child in node.children:
            if child.role in INTERACTIVE or (child.pointer and child.ref):
                self.walk(child, inner)
            elif child.role != "text":
                self._controls_only(child, inner)

    def _text(self, text: str, node: AriaNode, ctx: _Ctx) -> None:
        flat = " ".join(text.split())
        self.view.texts.append(flat[:TEXT_BLOCK_CHARS])
        self._add("text", "", node, ctx, full=flat)

    def _table(self, node: AriaNode, ctx: _Ctx) -> None:
        rows = _rows(node)
        name = node.name
        header = f"{'table' if node.role == 'table' else node.role}" + (
            f" {quote(name, 60)}" if name else "") + f" ({len(rows)} rows)"
        inner = self._child_ctx(node, ctx, context=(*ctx.context, header))
        for row in rows:
            cells: list[str] = []
            refs: list[str] = []
            heads = True
            for cell in row.children:
                if cell.role not in CELLS:
                    continue
                heads = heads and cell.role == "columnheader"
                cells.append(self._cell(cell, inner, refs))
            if not cells:
                continue
            prefix = "columns " if heads else "row "
            if row.pointer and row.ref:
                line, public = self.control_line(
                    AriaNode("row", name="", ref=row.ref, box=row.box, states=row.states), inner)
                prefix = line + " "
                if public:
                    refs.insert(0, public)
            line = prefix + " | ".join(cells)
            if len(line) > ROW_CHARS and not refs:
                line = line[: ROW_CHARS - 1] + "…"
            self._add("row", line, row, inner, refs=tuple(refs))

    def _cell(self, cell: AriaNode, ctx: _Ctx, refs: list[str]) -> str:
        found: list[str] = []
        self._inline_controls(cell, self._child_ctx(cell, ctx, in_control=False), found, refs)
        text = cell.name or _inline_text(cell)
        if found:
            rest = text
            return (quote(rest, 60) + " " if rest and not _only_controls(cell) else "") + \
                " ".join(found)
        return quote(text, 80) if text else '""'

    def _inline_controls(self, node: AriaNode, ctx: _Ctx, found: list[str],
                         refs: list[str]) -> None:
        for child in node.children:
            if child.role in INTERACTIVE or (child.pointer and child.ref):
                target = child if child.role in INTERACTIVE else AriaNode(
                    "clickable", name=child.name or child.all_text(NAME_CHARS * 2),
                    ref=child.ref, box=child.box, states=child.states)
                line, public = self.control_line(target, ctx)
                found.append(line)
                if public:
                    refs.append(public)
            else:
                self._inline_controls(child, self._child_ctx(child, ctx), found, refs)


def _is_landmark(node: AriaNode) -> bool:
    return node.role in LANDMARKS and (node.role not in ("region", "form") or bool(node.name))


def _landmark(node: AriaNode) -> str:
    label = LANDMARKS[node.role]
    return f"{label} {quote(node.name, 60)}" if node.name else label


def _inline_text(node: AriaNode, *, controls: bool = True) -> str:
    """A block's own text: its text children and inline descendants (a link's name unless
    ``controls`` is false), not nested blocks (a nested list or paragraph is a block of its
    own)."""
    parts: list[str] = []
    if node.text:
        parts.append(node.text)
    for child in node.children:
        if child.role == "text":
            parts.append(child.text or "")
        elif child.role in INTERACTIVE or child.pointer:
            if controls and child.name:
                parts.append(child.name)
        elif child.role in INLINE:
            parts.append(child.name if child.role == "img" and child.name
                         else _inline_text(child, controls=controls))
    return " ".join(p for p in parts if p)


def _says_something(text: str) -> bool:
    return bool(text.strip(" \t\n,.;:·|/-–—()[]{}•*#¶"))


def _only_controls(cell: AriaNode) -> bool:
    return all(c.role in INTERACTIVE or c.pointer for c in cell.children if c.role != "text") \
        and not any(c.role == "text" and (c.text or "").strip() for c in cell.children)


def _rows(table: AriaNode) -> list[AriaNode]:
    out: list[AriaNode] = []
    stack = list(reversed(table.children))
    while stack:
        node = stack.pop()
        if node.role == "row":
            out.append(node)
        elif node.role not in TABLES:
            stack.extend(reversed(node.children))
    return out


def build_view(roots: Sequence[AriaNode], allocate: RefAllocator,
               viewport: tuple[float, float], *,
               secrets: frozenset[str] = frozenset()) -> PageView:
    """Walk the tree once: items in document order, controls registered by public ref.
    A control whose value is one of ``secrets`` (a secret field's) shows its length only,
    and a secret repeated anywhere else in the page's text is hidden there too."""
    if secrets:
        _mask_echoes(roots, secrets)
    builder = _Builder(allocate, viewport, secrets)
    ctx = _Ctx()
    for root in roots:
        builder.walk(root, ctx)
    view = builder.view
    view.items = _without_label_echoes(view.items)
    visible = [i for i in view.items if i.visible]
    named = sum(1 for i in visible if i.kind in ("control", "heading", "row", "image"))
    chars = sum(len(i.full or "") for i in visible if i.kind == "text")
    area = viewport[0] * viewport[1]
    view.thin = (named < 3 and chars < 200) or builder.unnamed_image_area > 0.4 * area
    return view


#: Secrets shorter than this are hidden only as a whole value: hiding "ab" inside every
#: word would make the page unreadable and protect nothing.
MIN_ECHO_CHARS = 4
MAX_MASKED_NODES = 500_000


def _mask_echoes(roots: Sequence[AriaNode], secrets: frozenset[str]) -> None:
    """Hide each secret where the page repeats it (a script echoing a typed code into a
    paragraph, a link carrying it), in place; a string that *is* a secret is left for
    the control line to show as its length."""
    long = sorted((s for s in secrets if len(s) >= MIN_ECHO_CHARS), key=len, reverse=True)
    if not long:
        return
    pattern = re.compile("|".join(re.escape(s) for s in long))

    def hide(text: str | None) -> str | None:
        if not text or text in secrets:
            return text
        return pattern.sub(lambda m: f"(hidden: {len(m.group())} characters)", text)

    stack = list(roots)
    seen = 0
    while stack and seen < MAX_MASKED_NODES:
        node = stack.pop()
        seen += 1
        node.name = hide(node.name) or ""
        node.text = hide(node.text)
        node.url = hide(node.url)
        node.placeholder = hide(node.placeholder)
        stack.extend(node.children)


def _without_label_echoes(items: list[Item]) -> list[Item]:
    """Drop a text item that only repeats the name of the control beside it (a label)."""
    out: list[Item] = []
    for index, item in enumerate(items):
        if item.kind == "text" and item.full:
            text = item.full.strip().casefold()
            near = items[max(0, index - 1):index + 2]
            if any(n.kind == "control" and n.name.strip().casefold() == text for n in near):
                continue
        out.append(item)
    return out
