"""The gate stage: one route's answer, canonicalized and held to the strict schema.

The walk over the routes (:mod:`.routes`) asks the gate about each answer it gets; an
answer the gate refuses sends the walk on to the next route. That is why the gate is the
walk's acceptance test rather than a step after it: a schema miss says this one answer was
bad, not that the route is sick, so it opens no circuit, and the next route may well pass.

The repairs (:func:`~deepseek_eyes.vision.evidence.canonical.canonicalize`) and the schema
(:func:`~deepseek_eyes.vision.evidence.gate.require_valid`) are the evidence package's;
this stage applies them to a route's answer and writes the ``gate`` row: ``ok`` with the
repairs made, or ``fail`` with the code and the first twenty failing pointers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.routing.pipeline.job import Job
from deepseek_eyes.vision.types import RouteAnswer

__all__ = ["EvidenceGate", "GatedEvidence"]


@dataclass(frozen=True)
class GatedEvidence:
    """Evidence that passed the gate, with what the store records beside it: the route
    and model that answered, the repairs made and the call's provider tokens."""

    route: str
    model: str | None
    evidence: JsonObject
    repairs: tuple[dict[str, str], ...]
    usage: dict[str, int]


class EvidenceGate:
    def __init__(self, routes: Mapping[str, RouteEntry]) -> None:
        self._routes = routes

    def check(self, job: Job, name: str, answer: RouteAnswer) -> GatedEvidence:
        """Route ``name``'s ``answer`` for ``job``'s image as valid evidence.

        Raises:
            EvidenceError: ``EVIDENCE_NOT_FOUND`` (no content), or the canonicalization's
                or the schema's code; ``details['route']`` names the route.
        """
        route = self._routes[name].route
        decoded = job.pixels
        raw: str | dict[str, Any] | None = (
            answer.value if answer.value is not None else answer.text
        )
        # Imported here: a cache hit never reaches the gate, and a command line answering
        # from the cache should not pay for the repairs' and the schema's modules.
        from deepseek_eyes.vision.evidence.canonical import canonicalize
        from deepseek_eyes.vision.evidence.gate import require_valid

        started = time.perf_counter()
        try:
            if raw is None:
                raise EvidenceError(
                    "the route returned no content", code="EVIDENCE_NOT_FOUND",
                    details={"route": name},
                )
            canonical = canonicalize(
                raw, job.variant, image_size=(decoded.width, decoded.height),
                box_convention=route.box_convention,
            )
            evidence = require_valid(canonical.value, job.variant)
        except EvidenceError as exc:
            exc.details.setdefault("route", name)
            errors = exc.details.get("errors") or []
            job.op.record(
                "gate", "fail", route=name, code=exc.code,
                pointers=[{"pointer": e["pointer"], "keyword": e["keyword"]} for e in errors[:20]],
                latency_ms=(time.perf_counter() - started) * 1000,
            )
            raise
        repairs = tuple({"kind": r.kind, "pointer": r.pointer} for r in canonical.repairs)
        job.op.record(
            "gate", "ok", route=name, repairs=list(repairs),
            latency_ms=(time.perf_counter() - started) * 1000,
        )
        return GatedEvidence(
            route=name,
            model=answer.model or route.model,
            evidence=evidence,
            repairs=repairs,
            usage={
                "prompt_tokens": answer.usage.prompt_tokens,
                "completion_tokens": answer.usage.completion_tokens,
            },
        )
