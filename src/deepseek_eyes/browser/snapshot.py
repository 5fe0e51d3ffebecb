"""Playwright's AI-mode aria snapshot (YAML text) parsed into a tree of :class:`AriaNode`.

``page.aria_snapshot(mode="ai", boxes=True)`` is the accessibility tree as Chromium computes
it — roles, accessible names, states, iframes and shadow DOM flattened in — with a ref on
every element that can take pointer input and its box in viewport pixels. We read it rather
than walk the DOM ourselves: accessible-name computation is a large, subtle algorithm, and
``page.get_by_ref`` acts on exactly the element the snapshot named.

The YAML is a fixed dialect (Playwright's ``renderAriaSnapshotAsYaml``): one node per line,
two spaces of indent per level, ``- KEY``, ``- KEY: VALUE`` or ``- KEY:`` followed by
children, where KEY is ``role "json name" [attr] [attr=value]…`` (single-quoted as a whole
when YAML needs it) and VALUE is plain or double-quoted with backslash escapes. Special
children: ``- text: …``, ``- /url: …`` and ``- /placeholder: …``. A full YAML library would
accept much more than this and tell us less, so the dialect is parsed here, with bounds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = ["AriaNode", "Box", "ParsedSnapshot", "parse_snapshot"]

#: Lines read from one snapshot; a larger page is marked truncated (real documentation pages
#: reach ~20k lines).
MAX_LINES = 400_000
MAX_DEPTH = 256

Box = tuple[float, float, float, float]  # x, y, width, height in the frame's viewport

_ATTR = re.compile(r"\[([a-z-]+)(?:=([^\]]*))?\]")
# The common line shape, matched whole: role, optional JSON name, attributes, optional value.
_FAST = re.compile(r'([a-z]+)(?: ("(?:[^"\\]|\\.)*"))?((?: \[[^\]]*\])*)(?:(:)(?: (.*))?)?')
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)")
_ESCAPES = {"\\": "\\", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


@dataclass
class AriaNode:
    role: str
    name: str = ""
    ref: str | None = None
    box: Box | None = None
    states: dict[str, str | bool] = field(default_factory=dict)
    text: str | None = None  # inline value: a textbox's value, a paragraph's text
    url: str | None = None
    placeholder: str | None = None
    children: list[AriaNode] = field(default_factory=list)

    @property
    def pointer(self) -> bool:
        return self.states.get("cursor") == "pointer"

    def all_text(self, limit: int = 2000) -> str:
        """The node's own text and its descendants' text, space-joined, up to ``limit``."""
        parts: list[str] = []
        size = 0
        stack = [self]
        while stack and size < limit:
            node = stack.pop()
            piece = node.text if node.role == "text" else (node.name or node.text)
            if piece and (node.role == "text" or not node.children):
                parts.append(piece)
                size += len(piece) + 1
            stack.extend(reversed(node.children))
        return " ".join(parts)[:limit]


@dataclass
class ParsedSnapshot:
    roots: list[AriaNode]
    lines: int
    truncated: bool


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code.startswith("x"):
        return chr(int(code[1:], 16))
    return _ESCAPES.get(code, code)


def _unquote_value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        body = raw[1:-1]
        return _ESCAPE.sub(_unescape, body) if "\\" in body else body
    return raw


def _split_key(rest: str) -> tuple[str, str | None, bool]:
    """``rest`` (after ``- ``) → (key, value or None, has children)."""
    if rest.startswith("'"):
        i = 1
        while i < len(rest):
            if rest[i] == "'":
                if rest[i + 1:i + 2] == "'":
                    i += 2
                    continue
                break
            i += 1
        key = rest[1:i].replace("''", "'")
        tail = rest[i + 1:]
    else:
        key, tail = _unquoted_key(rest)
    if tail == ":":
        return key, None, True
    if tail.startswith(": "):
        return key, _unquote_value(tail[2:]), False
    return key, None, False


def _unquoted_key(rest: str) -> tuple[str, str]:
    """An unquoted key ends at the first ``:`` followed by a space or the end of the line
    that is not inside the JSON-quoted name (YAML would have quoted a key with such a name)."""
    i = 0
    in_name = False
    while i < len(rest):
        char = rest[i]
        if in_name:
            if char == "\\":
                i += 2
                continue
            if char == '"':
                in_name = False
        elif char == '"':
            in_name = True
        elif char == ":" and (i + 1 == len(rest) or rest[i + 1] == " "):
            return rest[:i], rest[i:]
        i += 1
    return rest, ""


def _parse_key(key: str) -> AriaNode:
    role, _, rest = key.partition(" ")
    node = AriaNode(role=role)
    rest = rest.lstrip()
    if rest.startswith('"'):
        try:
            name, end = json.JSONDecoder().raw_decode(rest)
        except ValueError:
            name, end = "", 0
        if isinstance(name, str):
            node.name = name
        rest = rest[end:]
    elif rest.startswith("/"):  # a regex name (codegen mode only); keep it as text
        node.name = rest.split(" [", 1)[0]
    for match in _ATTR.finditer(rest):
        attr, value = match.group(1), match.group(2)
        if attr == "ref":
            node.ref = value
        elif attr == "box" and value:
            try:
                x, y, w, h = (float(v) for v in value.split(","))
                node.box = (x, y, w, h)
            except ValueError:
                node.box = None
        else:
            node.states[attr] = True if value is None else value
    return node


def _fast_node(match: re.Match[str]) -> AriaNode:
    role, name, attrs, _, value = match.groups()
    node = AriaNode(role=role)
    if name:
        if "\\" in name:
            try:
                decoded = json.loads(name)
            except ValueError:
                decoded = name[1:-1]
            node.name = decoded if isinstance(decoded, str) else name[1:-1]
        else:
            node.name = name[1:-1]
    if attrs:
        for found in _ATTR.finditer(attrs):
            attr, raw = found.group(1), found.group(2)
            if attr == "ref":
                node.ref = raw
            elif attr == "box" and raw:
                try:
                    x, y, w, h = (float(v) for v in raw.split(","))
                    node.box = (x, y, w, h)
                except ValueError:
                    node.box = None
            else:
                node.states[attr] = True if raw is None else raw
    if value is not None:
        node.text = _unquote_value(value)
    return node


def parse_snapshot(text: str, *, max_lines: int = MAX_LINES) -> ParsedSnapshot:
    """Parse one AI-mode snapshot. Unknown line shapes are skipped, never guessed at."""
    roots: list[AriaNode] = []
    stack: list[tuple[int, AriaNode]] = []  # (indent, node)
    count = 0
    truncated = False
    for line in text.splitlines():
        count += 1
        if count > max_lines:
            truncated = True
            break
        stripped = line.lstrip(" ")
        if not stripped.startswith("- ") and stripped != "-":
            continue
        indent = len(line) - len(stripped)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else None
        rest = stripped[2:]
        if rest.startswith("text: ") or rest == "text:":
            if parent is not None:
                parent.children.append(AriaNode("text", text=_unquote_value(rest[6:])))
            else:
                roots.append(AriaNode("text", text=_unquote_value(rest[6:])))
            continue
        if rest.startswith("/url: ") and parent is not None:
            parent.url = _unquote_value(rest[6:])
            continue
        if rest.startswith("/placeholder: ") and parent is not None:
            parent.placeholder = _unquote_value(rest[14:])
            continue
        if rest.startswith("/"):
            continue  # another property this reader does not use
        fast = _FAST.fullmatch(rest)
        if fast is not None:
            node = _fast_node(fast)
        else:
            key, value, _ = _split_key(rest)
            node = _parse_key(key)
            if value is not None:
                node.text = value
        if parent is None:
            roots.append(node)
        else:
            parent.children.append(node)
        if len(stack) < MAX_DEPTH:
            stack.append((indent, node))
    return ParsedSnapshot(roots, count, truncated)
