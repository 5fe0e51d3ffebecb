"""A tool call's arguments, checked before anything acts on them.

Arguments come from a model (through MCP or the runtime). Each getter returns the value with
the right type and within bounds, or raises the capability's ``*_ARGUMENT_INVALID`` code
naming the argument. Booleans are never numbers, numbers are finite, strings and lists are
bounded. The browser's and the desktop's tools subclass :class:`ToolArguments` with their
error class and code.

The checks are ours, not the SDK's: an MCP server registers its tools untyped
(:func:`deepseek_eyes.toolkit.registration.untyped_function`), because the SDK's pydantic
validation would coerce ``"5"`` into 5 and ``true`` into 1 before we could refuse them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, overload

from deepseek_eyes.errors import DeepSeekEyesError

__all__ = ["MAX_ITEMS", "MAX_STRING", "ToolArguments"]

MAX_STRING = 2_000
MAX_ITEMS = 32


@dataclass(frozen=True)
class ToolArguments:
    values: Mapping[str, Any]

    error: ClassVar[type[DeepSeekEyesError]] = DeepSeekEyesError
    code: ClassVar[str] = "ARGUMENT_INVALID"

    def invalid(self, name: str, what: str) -> DeepSeekEyesError:
        return self.error(f"argument {name!r} {what}", code=self.code,
                          details={"argument": name})

    def raw(self, name: str) -> Any:
        return self.values.get(name)

    def has(self, name: str) -> bool:
        return self.values.get(name) is not None

    def string(self, name: str, *, required: bool = False, limit: int = MAX_STRING,
               choices: Sequence[str] | None = None, default: str | None = None) -> str | None:
        value = self.values.get(name)
        if value is None:
            if required:
                raise self.invalid(name, "is required")
            return default
        if not isinstance(value, str):
            raise self.invalid(name, "must be a string")
        if len(value) > limit:
            raise self.invalid(name, f"is longer than {limit} characters")
        if choices is not None and value not in choices:
            raise self.invalid(name, f"must be one of {', '.join(choices)}")
        return value

    def require(self, name: str, **kwargs: Any) -> str:
        value = self.string(name, required=True, **kwargs)
        if value is None:  # string(required=True) never returns None
            raise self.invalid(name, "is required")
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.values.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.invalid(name, "must be true or false")
        return value

    @overload
    def number(self, name: str, *, default: float, minimum: float, maximum: float) -> float: ...

    @overload
    def number(self, name: str, *, default: None = None, minimum: float,
               maximum: float) -> float | None: ...

    def number(self, name: str, *, default: float | None = None, minimum: float,
               maximum: float) -> float | None:
        value = self.values.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or not minimum <= value <= maximum:
            raise self.invalid(name, f"must be a number from {minimum:g} to {maximum:g}")
        return float(value)

    def integer(self, name: str, *, default: int, minimum: int, maximum: int) -> int:
        value = self.values.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) \
                or not minimum <= value <= maximum:
            raise self.invalid(name, f"must be an integer from {minimum} to {maximum}")
        return value

    def strings(self, name: str, *, required: bool = False) -> list[str]:
        """A list of 1 to :data:`MAX_ITEMS` bounded strings (one string is a list of one)."""
        value = self.values.get(name)
        if value is None:
            if required:
                raise self.invalid(name, "is required")
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or len(value) > MAX_ITEMS \
                or not all(isinstance(v, str) and len(v) <= MAX_STRING for v in value):
            raise self.invalid(name, f"must be a list of 1 to {MAX_ITEMS} strings")
        return list(value)
