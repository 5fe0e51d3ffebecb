"""Checks for the values clients send, before any of them reaches state we keep.

Why a module of its own: the MCP tools, the console API and the CLI all reach the service,
and each transport coerces differently (pydantic turns ``"5"`` and ``true`` into numbers,
``json.loads`` accepts ``NaN``). A ``NaN`` timeout once made a plan that could not be
encoded as JSON (every later session listing failed) and a process that ran with no
timeout. So every value is checked here, in one way, and refused with
``TERMINAL_ARGUMENT_INVALID``: numbers must be real numbers (not bools, not strings),
finite, and inside their range; strings must be strings; an argv must be a list of strings.
A refusal names the argument and what was wrong, never the value itself.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from deepseek_eyes.errors import TerminalError

__all__ = ["invalid", "known_keys", "number", "optional_string", "string_list"]


def invalid(name: str, reason: str) -> TerminalError:
    return TerminalError(f"{name}: {reason}", code="TERMINAL_ARGUMENT_INVALID",
                         details={"argument": name, "reason": reason})


def number(
    value: object, name: str, *, minimum: float, maximum: float, exclusive_minimum: bool = False
) -> float:
    """``value`` as a finite float in ``[minimum, maximum]`` (``(minimum, maximum]`` with
    ``exclusive_minimum``).

    Raises:
        TerminalError: ``TERMINAL_ARGUMENT_INVALID``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(name, f"must be a number, not {type(value).__name__}")
    try:
        out = float(value)
    except OverflowError:  # an int too large for a float
        raise invalid(name, "must be a finite number") from None
    if not math.isfinite(out):
        raise invalid(name, "must be a finite number")
    low = "more than" if exclusive_minimum else "at least"
    if out < minimum or (exclusive_minimum and out == minimum) or out > maximum:
        raise invalid(name, f"must be {low} {minimum:g} and at most {maximum:g}")
    return out


def optional_string(value: object, name: str) -> str | None:
    """Raises:
        TerminalError: ``TERMINAL_ARGUMENT_INVALID`` unless ``value`` is a string or None.
    """
    if value is not None and not isinstance(value, str):
        raise invalid(name, f"must be a string, not {type(value).__name__}")
    return value


def string_list(value: object, name: str) -> list[str] | None:
    """A list of strings (a string is refused: it is not split into characters).

    Raises:
        TerminalError: ``TERMINAL_ARGUMENT_INVALID``.
    """
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise invalid(name, f"must be a list of strings, not {type(value).__name__}")
    if not all(isinstance(item, str) for item in value):
        raise invalid(name, "must be a list of strings")
    return list(value)


def known_keys(body: Mapping[str, Any], allowed: Collection[str], where: str) -> None:
    """Raises:
        TerminalError: ``TERMINAL_ARGUMENT_INVALID`` when ``body`` has a key not in ``allowed``.
    """
    unknown = sorted(str(key) for key in body if key not in allowed)
    if unknown:
        raise TerminalError(
            f"{where}: unknown field(s) {', '.join(repr(k[:64]) for k in unknown[:8])}",
            code="TERMINAL_ARGUMENT_INVALID",
            details={"unknown": [k[:64] for k in unknown[:8]], "allowed": sorted(allowed)},
        )
