"""Finding the evidence object in a route's raw answer and choosing the one the contract asks for.

Models wrap JSON in reasoning, prose and code fences and emit drafts before the final object.
:func:`find_candidates` strips ``<think>`` blocks and scans what is left for JSON objects,
noting the code fence each sat in; :func:`select_candidate` picks the one for a variant.
Nothing here changes an object: repairing known structure, and turning what was found into
audit :class:`~deepseek_eyes.vision.evidence.canonical.Repair` rows, is
:mod:`deepseek_eyes.vision.evidence.canonical`'s job, so this module knows nothing of the schema
beyond the property names it is handed.

Decisions a newcomer would otherwise undo:

* Selection is by contract, and the *last* acceptable object wins: a model's final answer
  follows its drafts. An object declaring the other variant is never taken.
* Scanning untrusted text is bounded: a size cap, a cap on decode attempts, only the last
  :data:`MAX_CANDIDATES` objects kept, decoding through growing windows (a failed
  ``raw_decode`` on the whole text costs time proportional to its position), a budget on
  failed decoding work and over-deep nesting skipped in one step, so no input (a megabyte
  of ``{``, ten thousand nested arrays) makes the scan quadratic.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.types import Variant

__all__ = [
    "MAX_CANDIDATES",
    "MAX_DECODE_ATTEMPTS",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_TEXT_BYTES",
    "Candidate",
    "Candidates",
    "find_candidates",
    "scan",
    "select_candidate",
    "strip_reasoning",
]

#: A route answer larger than this is refused before any parsing.
MAX_TEXT_BYTES = 4 * 1024 * 1024
#: At most this many JSON objects (the last ones) are kept from one answer.
MAX_CANDIDATES = 64
#: After this many decode attempts the scan stops looking for more objects.
MAX_DECODE_ATTEMPTS = 100_000
#: A structured (dict) answer deeper or larger than this is refused.
MAX_DEPTH = 64
MAX_NODES = 1_000_000

UNTAGGED_PREFIX = "untagged prefix"
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
# Only a brace followed by a quote or a closing brace can start a JSON object; skipping
# every other brace in C keeps a text made of ``{`` from costing one decode per character.
_OBJECT_START = re.compile(r'\{\s*["}]')
_FENCE = re.compile(r"```([^\n`]*)")
_FENCE_TAG = re.compile(r"[A-Za-z0-9_+-]{1,16}")
_BRACKET = re.compile(r"[\[\]{}]")
_MAX_FENCES = 1000
_FIRST_WINDOW = 256
_TOKEN_SLACK = 16  # a window cut inside a literal or escape fails this close to its end


@dataclass(frozen=True)
class Candidate:
    """One JSON object found in an answer.

    Attributes:
        value: the decoded object (a copy when the answer was already structured).
        fence: the language tag of the code fence it sat in (``""`` for a bare fence or a
            tag that is not a short word, so no answer text reaches the audit log); None
            outside fences.
        ordinal: 1-based position among every object the answer held.
    """

    value: JsonObject
    fence: str | None
    ordinal: int = 1


@dataclass(frozen=True)
class Candidates:
    """The objects kept from one answer and what finding them took.

    Attributes:
        kept: the last :data:`MAX_CANDIDATES` objects, in the order the answer held them.
        total: every object the answer held, including any no longer kept.
        reasoning: what :func:`strip_reasoning` removed (``""`` when nothing).
    """

    kept: tuple[Candidate, ...]
    total: int
    reasoning: str = ""


def find_candidates(raw: str | JsonObject, variant: Variant) -> Candidates:
    """The candidate objects in ``raw``: a route's text answer or a structured value.

    Text is size-checked, stripped of reasoning and scanned; a dict is the one candidate,
    deep-copied within :data:`MAX_DEPTH` and :data:`MAX_NODES` (``raw`` is never mutated).
    ``variant`` only labels errors.

    Raises:
        EvidenceError: ``EVIDENCE_NOT_FOUND`` when the answer is neither text nor a dict,
            or is too large or too deeply nested.
    """
    if isinstance(raw, str):
        return _candidates_from_text(raw, variant)
    if isinstance(raw, dict):
        return Candidates((Candidate(_bounded_copy(raw, variant), None),), 1)
    raise EvidenceError(
        f"the route's answer is a {type(raw).__name__}, not text or a JSON object",
        code="EVIDENCE_NOT_FOUND",
        details={"variant": variant.value, "reason": "not_an_object"},
    )


def _candidates_from_text(text: str, variant: Variant) -> Candidates:
    # More characters than the byte limit is over it in any encoding; only shorter text
    # needs encoding to be measured.
    size = len(text) if len(text) > MAX_TEXT_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        unit = "characters" if len(text) > MAX_TEXT_BYTES else "bytes"
        raise EvidenceError(
            f"the route's answer has {size} {unit}; at most {MAX_TEXT_BYTES} bytes are read",
            code="EVIDENCE_NOT_FOUND",
            details={
                "variant": variant.value,
                "reason": "too_large",
                "bytes": size,
                "limit": MAX_TEXT_BYTES,
            },
        )
    stripped, detail = strip_reasoning(text)
    found = scan(stripped)
    if not found.total and detail == UNTAGGED_PREFIX:
        # The "</think>" was no reasoning end but text inside the answer (OCR of a page
        # that shows the tag): cutting there left nothing, so read the whole answer.
        found = scan(text)
        detail = ""
    return Candidates(found.kept, found.total, detail)


def strip_reasoning(text: str) -> tuple[str, str]:
    """Remove ``<think>…</think>`` blocks; return the rest and a detail ("" if none).

    A ``</think>`` before any ``<think>`` ends an untagged prefix (chat templates that open
    the block inside the prompt). An unterminated ``<think>`` loses only its tag: the model
    may have run out of budget with its answer inside, and selection by contract, last
    object first, still prefers the final object over drafts.
    """
    notes: list[str] = []
    first_close = text.find(_THINK_CLOSE)
    first_open = text.find(_THINK_OPEN)
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        text = text[first_close + len(_THINK_CLOSE) :]
        notes.append(UNTAGGED_PREFIX)
    pieces: list[str] = []
    closed = 0
    pos = 0
    while True:
        start = text.find(_THINK_OPEN, pos)
        if start == -1:
            pieces.append(text[pos:])
            break
        pieces.append(text[pos:start])
        end = text.find(_THINK_CLOSE, start + len(_THINK_OPEN))
        if end == -1:
            pieces.append(text[start + len(_THINK_OPEN) :])
            notes.append("unterminated block")
            break
        closed += 1
        pos = end + len(_THINK_CLOSE)
    if closed:
        notes.insert(0, f"{closed} block{'s' if closed > 1 else ''}")
    return ("".join(pieces), ", ".join(notes)) if notes else (text, "")


def scan(text: str) -> Candidates:
    """The JSON objects in ``text`` (the last :data:`MAX_CANDIDATES`), within fixed work.

    A decoded object is skipped past whole (its nested objects are not candidates). A
    failed attempt normally retries at the next brace, so an object nested in a broken one
    is still found; once failed work passes a budget proportional to the text, the scan
    jumps to where each failure happened instead, which keeps it linear. The last objects
    are the ones kept because the last acceptable one wins.
    """
    decoder = json.JSONDecoder()
    fences = _fence_spans(text)
    candidates: deque[Candidate] = deque(maxlen=MAX_CANDIDATES)
    budget = 4 * len(text) + (1 << 20)
    total = 0
    work = 0
    pos = 0
    for _ in range(MAX_DECODE_ATTEMPTS):
        match = _OBJECT_START.search(text, pos)
        if match is None:
            break
        start = match.start()
        try:
            value, end = _decode_at(decoder, text, start)
        except RecursionError:
            # Nesting deeper than the interpreter allows is never evidence: skip it whole,
            # and stop if it never closes.
            pos = _naive_end(text, start)
            if pos < 0:
                break
            continue
        except _DecodeFailed as failure:
            work += max(failure.reached - start, 1)
            pos = start + 1 if work <= budget else max(start + 1, failure.reached)
            continue
        total += 1
        candidates.append(Candidate(value, _fence_at(fences, start), total))
        pos = end
    return Candidates(tuple(candidates), total)


class _DecodeFailed(Exception):
    def __init__(self, reached: int) -> None:
        super().__init__(reached)
        self.reached = reached


def _decode_at(decoder: json.JSONDecoder, text: str, start: int) -> tuple[JsonObject, int]:
    """``raw_decode`` at ``start`` through growing windows of the text.

    Decoding the whole text at every brace would be quadratic: a ``JSONDecodeError``
    counts the newlines before its position. A window that ends mid-token or mid-string is
    grown and retried; an error well inside a window is final, because the decoder reads
    left to right and what follows cannot change it.

    Raises:
        _DecodeFailed: not JSON here; ``reached`` is where decoding stopped.
        RecursionError: nesting deeper than the decoder can follow.
    """
    size = _FIRST_WINDOW
    while True:
        window = text[start : start + size]
        complete = start + size >= len(text)
        try:
            value, end = decoder.raw_decode(window)
        except json.JSONDecodeError as exc:
            cut = exc.pos >= len(window) - _TOKEN_SLACK or exc.msg.startswith("Unterminated")
            if cut and not complete:
                size *= 4
                continue
            raise _DecodeFailed(start + exc.pos) from None
        except ValueError:  # an integer literal too long to convert
            raise _DecodeFailed(start + 1) from None
        return value, start + end


def _naive_end(text: str, start: int) -> int:
    """End of the bracket-balanced span at ``start`` (strings ignored), or -1."""
    depth = 0
    for match in _BRACKET.finditer(text, start):
        depth += 1 if match.group() in "[{" else -1
        if depth <= 0:
            return match.end()
    return -1


def _fence_spans(text: str) -> list[tuple[int, int, str]]:
    """``(content start, content end, tag)`` of each Markdown code fence, paired in order."""
    spans: list[tuple[int, int, str]] = []
    opener: re.Match[str] | None = None
    for match in _FENCE.finditer(text):
        if opener is None:
            opener = match
            continue
        spans.append((opener.end(), match.start(), opener.group(1).strip()))
        opener = None
        if len(spans) >= _MAX_FENCES:
            break
    if opener is not None:
        spans.append((opener.end(), len(text), opener.group(1).strip()))
    return spans


def _fence_at(spans: list[tuple[int, int, str]], position: int) -> str | None:
    index = bisect.bisect_right(spans, position, key=lambda span: span[0]) - 1
    if index >= 0 and spans[index][0] <= position < spans[index][1]:
        tag = spans[index][2]
        return tag if _FENCE_TAG.fullmatch(tag) else ""
    return None


def select_candidate(found: Candidates, variant: Variant, keys: frozenset[str]) -> Candidate:
    """The last object declaring ``variant``; else the last undeclared one that looks like it.

    ``keys`` are the variant's top-level property names other than ``schema``; an object
    without a ``schema`` field looks like the variant when it has at least two of them.

    Raises:
        EvidenceError: ``EVIDENCE_NOT_FOUND`` (details: ``candidates``, every object the
            answer held) when no object qualifies.
    """
    declared = [c for c in found.kept if c.value.get("schema") == variant.value]
    undeclared = [
        c for c in found.kept if "schema" not in c.value and len(keys.intersection(c.value)) >= 2
    ]
    chosen = declared or undeclared
    if not chosen:
        raise EvidenceError(
            f"the route's answer holds no {variant.value} object",
            code="EVIDENCE_NOT_FOUND",
            details={
                "variant": variant.value,
                "reason": "no_candidate",
                "candidates": found.total,
            },
        )
    return chosen[-1]


def _bounded_copy(value: Any, variant: Variant) -> Any:
    """A deep copy of a JSON-like value, refusing absurd depth or size."""
    nodes = 0

    def copy(node: Any, depth: int) -> Any:
        nonlocal nodes
        nodes += 1
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            reason = "too_large" if nodes > MAX_NODES else "too_deep"
            raise EvidenceError(
                "the route's structured answer is too large or too deeply nested",
                code="EVIDENCE_NOT_FOUND",
                details={
                    "variant": variant.value,
                    "reason": reason,
                    "max_nodes": MAX_NODES,
                    "max_depth": MAX_DEPTH,
                },
            )
        if isinstance(node, dict):
            return {key: copy(child, depth + 1) for key, child in node.items()}
        if isinstance(node, list):
            return [copy(child, depth + 1) for child in node]
        if isinstance(node, tuple):  # kept a tuple, so the gate still refuses it
            return tuple(copy(child, depth + 1) for child in node)
        return node

    return copy(value, 0)
