"""What one doctor check says: its name, ``ok``/``warn``/``fail``, what it found and the fix.

The shape is the ``--json`` contract of ``deepseek-eyes doctor`` (a list of these objects,
nothing else), so a script can read it across versions: add checks, never rename a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

__all__ = ["Check", "CheckView", "Status", "failed"]

Status = Literal["ok", "warn", "fail"]


class CheckView(TypedDict):
    check: str
    status: Status
    detail: str
    fix: str


@dataclass(frozen=True)
class Check:
    """One check's verdict. ``fix`` is empty when there is nothing to do."""

    check: str
    status: Status
    detail: str
    fix: str = ""

    def json(self) -> CheckView:
        return {"check": self.check, "status": self.status, "detail": self.detail,
                "fix": self.fix}


def failed(checks: list[Check]) -> bool:
    """Whether one check failed (the command's exit status is then 1)."""
    return any(c.status == "fail" for c in checks)
