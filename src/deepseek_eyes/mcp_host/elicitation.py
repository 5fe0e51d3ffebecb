"""Elicitation: a server asks the person at the keyboard for input, mid-request.

The host declares the elicitation capability only in a process where someone can answer:
``chat`` at a terminal installs an :class:`Elicitor` (``cli/elicit.py``) before it connects;
the gateway, ``ask`` and every other command install none, so their connections declare no
capability at all. That follows the spec (2025-11-25, client features / elicitation):
a client that supports elicitation MUST declare it, and a server MUST NOT send a mode the
client did not declare; declaring it and declining every request would tell a server it may
rely on a person who is never there, where an undeclared capability lets it take its own
fallback. A server that asks anyway gets the SDK's refusal (``Elicitation not supported``),
and the reason none was declared is logged once per server.

The installed elicitor is a process setting, like the token root: the manager builds
clients from settings alone. Form requests are parsed against the spec's schema subset
(flat ``properties`` of string, number, integer, boolean, single- and multi-select enums;
``required``) before anyone is asked: a schema outside it is refused with an
``INVALID_PARAMS`` error, not shown half-understood. What the person accepts is checked
against the requested schema again (``jsonschema``) before it goes back. One form at a time
(one terminal), each bounded by :data:`ANSWER_TIMEOUT_S`, after which it is cancelled. The
answers themselves are never logged or audited, only the action and the field names.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import jsonschema
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp_types import (
    INVALID_PARAMS,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
)

__all__ = ["ANSWER_TIMEOUT_S", "Answer", "Elicitor", "FormField", "elicitation_callback",
           "install_elicitor", "parse_form"]

_log = logging.getLogger("deepseek_eyes.mcp_host.elicitation")

#: How long a person has to answer one form before it is cancelled.
ANSWER_TIMEOUT_S = 600.0
#: Caps on what a server may ask at once (the loop over its fields is over untrusted input).
MAX_FIELDS = 64
MAX_CHOICES = 256

Kind = Literal["string", "number", "integer", "boolean", "enum", "multi"]
Value = str | int | float | bool | list[str]
_FORMATS = {"email", "uri", "date", "date-time"}


@dataclass(frozen=True)
class FormField:
    """One question of a form, as the spec's primitive schema defines it."""

    name: str
    kind: Kind
    title: str
    description: str = ""
    required: bool = False
    default: Value | None = None
    #: enum / multi: (value, label) pairs.
    choices: tuple[tuple[str, str], ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None

    def convert(self, text: str) -> Value:
        """The value a typed answer stands for.

        Raises:
            ValueError: with a message to show the person, who is asked again.
        """
        text = text.strip()
        if self.kind == "boolean":
            if text.lower() in ("y", "yes", "true", "1"):
                return True
            if text.lower() in ("n", "no", "false", "0"):
                return False
            raise ValueError("answer yes or no")
        if self.kind in ("number", "integer"):
            return self._number(text)
        if self.kind == "enum":
            return self._choice(text)
        if self.kind == "multi":
            picked = [self._choice(part) for part in text.split(",") if part.strip()]
            return self._count(list(dict.fromkeys(picked)))
        return self._string(text)

    def _number(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"answer {'a whole number' if self.kind == 'integer' else 'a number'}"
                             ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("answer a finite number")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"at least {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"at most {self.maximum:g}")
        return value

    def _choice(self, text: str) -> str:
        text = text.strip()
        if text.isdigit() and 1 <= int(text) <= len(self.choices):
            return self.choices[int(text) - 1][0]
        for value, label in self.choices:
            if text in (value, label):
                return value
        raise ValueError("answer one of the numbers or values listed")

    def _count(self, picked: list[str]) -> list[str]:
        if self.min_length is not None and len(picked) < self.min_length:
            raise ValueError(f"pick at least {self.min_length}")
        if self.max_length is not None and len(picked) > self.max_length:
            raise ValueError(f"pick at most {self.max_length}")
        return picked

    def _string(self, text: str) -> str:
        if self.min_length is not None and len(text) < self.min_length:
            raise ValueError(f"at least {self.min_length} characters")
        if self.max_length is not None and len(text) > self.max_length:
            raise ValueError(f"at most {self.max_length} characters")
        checker = jsonschema.FormatChecker()
        if self.format and not checker.conforms(text, self.format):
            raise ValueError(f"not a valid {self.format}")
        return text


def _refuse(why: str) -> ValueError:
    return ValueError(f"the form's schema is outside what elicitation allows: {why}")


def _choices(spec: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    if "oneOf" in spec or "anyOf" in spec:
        options = spec.get("oneOf", spec.get("anyOf"))
        if not isinstance(options, list):
            raise _refuse("oneOf/anyOf must be a list")
        pairs = [(o.get("const"), o.get("title", o.get("const"))) for o in options
                 if isinstance(o, dict)]
    else:
        values = spec.get("enum")
        names = spec.get("enumNames") or values
        if not isinstance(values, list) or not isinstance(names, list):
            raise _refuse("enum must be a list")
        pairs = list(zip(values, names, strict=False))
    if not pairs or len(pairs) > MAX_CHOICES:
        raise _refuse(f"an enum holds 1 to {MAX_CHOICES} choices")
    checked = [(v, t) for v, t in pairs if isinstance(v, str) and isinstance(t, str)]
    if len(checked) != len(pairs):
        raise _refuse("enum values are strings")
    return tuple(checked)


def _field(name: str, spec: Any, required: bool) -> FormField:
    if not isinstance(spec, dict):
        raise _refuse(f"property {name!r} is not a schema")
    kind_of = spec.get("type")
    common: dict[str, Any] = {
        "name": name, "required": required,
        "title": str(spec.get("title") or name)[:200],
        "description": str(spec.get("description") or "")[:1000],
        "default": spec.get("default"),
    }
    if kind_of == "string" and ("enum" in spec or "oneOf" in spec):
        return FormField(kind="enum", choices=_choices(spec), **common)
    if kind_of == "string":
        fmt = spec.get("format")
        if fmt is not None and fmt not in _FORMATS:
            raise _refuse(f"string format {fmt!r}")
        return FormField(kind="string", format=fmt, min_length=spec.get("minLength"),
                         max_length=spec.get("maxLength"), **common)
    if kind_of in ("number", "integer"):
        return FormField(kind=kind_of, minimum=spec.get("minimum"),
                         maximum=spec.get("maximum"), **common)
    if kind_of == "boolean":
        return FormField(kind="boolean", **common)
    if kind_of == "array":
        items = spec.get("items")
        if not isinstance(items, dict):
            raise _refuse(f"array {name!r} needs items with enum or anyOf")
        return FormField(kind="multi", choices=_choices(items), min_length=spec.get("minItems"),
                         max_length=spec.get("maxItems"), **common)
    raise _refuse(f"property {name!r} has type {kind_of!r}")


def parse_form(schema: Mapping[str, Any]) -> list[FormField]:
    """The questions of a form request, in the server's order.

    Raises:
        ValueError: the schema is not the spec's flat subset (nested objects, other types,
            unknown formats, too many fields or choices).
    """
    if schema.get("type") != "object":
        raise _refuse("the top level must be an object")
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise _refuse("properties must be an object and required a list")
    if len(properties) > MAX_FIELDS:
        raise _refuse(f"more than {MAX_FIELDS} fields")
    if any(name not in properties for name in required):
        raise _refuse("required names a property that is not there")
    return [_field(str(name), spec, name in required) for name, spec in properties.items()]


@dataclass
class Answer:
    """What the person did: accept (with the content), decline or cancel."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Value] = field(default_factory=dict)


class Elicitor(Protocol):
    """Someone who can answer: shows a server's message and asks its questions."""

    async def form(self, server: str, message: str, fields: Sequence[FormField]) -> Answer: ...

    async def url(self, server: str, message: str, url: str) -> Answer: ...


_ELICITOR: list[Elicitor] = []
_LOCK: list[asyncio.Lock] = []
_TOLD: set[str] = set()


def install_elicitor(elicitor: Elicitor | None) -> None:
    """Offer elicitation on the connections made from now on (``None``: offer none)."""
    _ELICITOR[:] = [elicitor] if elicitor is not None else []


def _lock() -> asyncio.Lock:
    if not _LOCK:
        _LOCK.append(asyncio.Lock())
    return _LOCK[0]


def elicitation_callback(server: str) -> ElicitationFnT | None:
    """The SDK callback for one server's connection, or ``None`` (no capability declared)
    when nobody can answer in this process."""
    if not _ELICITOR:
        if server not in _TOLD:  # once per server and process, not at every reconnect
            _TOLD.add(server)
            _log.info("%s: elicitation not offered (no capability declared): no person can "
                      "answer in this process (the gateway, ask, or a command without a "
                      "terminal); a request for it is refused", server)
        return None
    elicitor = _ELICITOR[0]

    async def answer(context: ClientRequestContext, params: ElicitRequestParams
                     ) -> ElicitResult | ErrorData:
        del context
        if not isinstance(params, ElicitRequestFormParams):
            async with _lock():
                asked = await _bounded(elicitor.url(server, params.message, params.url))
            _log.info("%s: URL elicitation answered: %s", server, asked.action)
            return ElicitResult(action=asked.action)
        schema = dict(params.requested_schema)
        try:
            fields = parse_form(schema)
        except ValueError as exc:
            _log.warning("%s: elicitation refused: %s", server, exc)
            return ErrorData(code=INVALID_PARAMS, message=str(exc))
        async with _lock():
            asked = await _bounded(elicitor.form(server, params.message, fields))
        if asked.action != "accept":
            _log.info("%s: elicitation %sd by the person", server, asked.action)
            return ElicitResult(action=asked.action)
        try:
            jsonschema.validate(asked.content, schema,
                                format_checker=jsonschema.FormatChecker())
        except jsonschema.ValidationError as exc:
            # The prompt converts every answer; this is the last check before it leaves.
            _log.warning("%s: elicitation answer does not fit the schema (%s); cancelled",
                         server, exc.message[:200])
            return ElicitResult(action="cancel")
        _log.info("%s: elicitation accepted (fields: %s)", server, ", ".join(asked.content))
        return ElicitResult(action="accept", content=dict(asked.content))

    return answer


async def _bounded(pending: Any) -> Answer:
    try:
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            result: Answer = await pending
            return result
    except TimeoutError:
        return Answer("cancel")
