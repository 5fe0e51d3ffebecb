"""Escaping for text the code wrote (help strings, descriptions, messages) placed in
Markdown: a ``*`` in "a prefix ending in *" must stay a star, a ``|`` must not end a table
cell, and ``<data home>`` must not become an HTML tag."""

from __future__ import annotations

import html
import re

__all__ = ["anchor", "cell", "code"]

_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def cell(text: str) -> str:
    """``text`` as one line of a table cell, every Markdown special character escaped."""
    flat = " ".join(text.split())
    return _SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


def code(text: str) -> str:
    """``text`` as inline code inside a table cell (backticks and pipes made safe)."""
    flat = " ".join(text.split()).replace("|", "&#124;")
    fence = "``" if "`" in flat else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def anchor(text: str) -> str:
    """The id mkdocs' toc extension gives a heading of ``text`` (ASCII, as ours are)."""
    slug = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"[\s]+", "-", slug.strip())
