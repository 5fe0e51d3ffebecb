"""What a browser and a desktop report v2 build from: kept secrets, verdicts, the fenced text.

The two reports differ in what a step records (a page's URL, a window's delta) and are
kept apart; what they share — how a secret is kept, how an assertion's outcome reads, and
that everything after the head line is fenced as data — is written once here, so the two
cannot drift apart on the part that protects a user.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from deepseek_eyes.untrusted import fence, secret_digest

__all__ = ["HiddenText", "hidden_text", "report_text", "verdict"]


class HiddenText(TypedDict):
    """How a report keeps a secret: ``{"redacted": true, "chars": 7, "hash": "h:…"}``."""

    redacted: bool
    chars: int
    hash: str


def hidden_text(value: str) -> HiddenText:
    """A secret's length and keyed hash (a plain SHA-256 of a short password is undone by
    trying candidates; :func:`~deepseek_eyes.untrusted.secret_digest` is keyed)."""
    return {"redacted": True, "chars": len(value), "hash": secret_digest(value)}


_VERDICTS = {True: "PASS", False: "FAIL", None: "EVIDENCE"}


def verdict(passed: bool | None) -> str:
    """An assertion's outcome as a report line says it (None: visual evidence, for the
    model to judge)."""
    return _VERDICTS[passed]


def report_text(head: Sequence[str], lines: Sequence[str]) -> str:
    """The text form: our own head lines, then every line a page or an application could
    have put words into, inside one fence."""
    return "\n".join([*head, fence(list(lines), "report")])
