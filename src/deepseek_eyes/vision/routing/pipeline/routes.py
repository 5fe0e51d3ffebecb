"""The routes stage: the candidate routes walked in order, under the guard, until one
answer passes.

The guard (:mod:`deepseek_eyes.vision.routing.guard`) screens the candidates first
(routes whose probe failed are set aside; open circuits are skipped while an alternative
exists) and then, per route, admits it (health check and pixel probe, each cached) and
makes the call (an incomplete stream is retried once on the same route). Each answer goes
to ``accept`` (the gate); a refused answer, a failed call or a failed probe sends the walk
to the next route. At most ``1 + failover_attempts`` routes are tried.

One failed route keeps its own error code; more raise ``VISION_FAILOVER_EXHAUSTED`` with
a summary of each route's code; every failure carries the attempts.

Why operational failures open a circuit but gate failures do not: a timeout or a 500 says
the endpoint is sick and the next image will likely fail too; a schema miss says this one
answer was bad, and the route's next answer may well pass. So the guard hears of a route
call's failure (it opens the circuit) and of an answer that passed the gate (it closes
it), never of the gate's refusals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from deepseek_eyes.errors import (
    EvidenceError,
    FailoverExhaustedError,
    ProbeFailedError,
    RouteError,
    VisionError,
)
from deepseek_eyes.vision.routes.prompts import evidence_prompts, target_prompts
from deepseek_eyes.vision.routing.guard import RouteGuard
from deepseek_eyes.vision.routing.pipeline.job import Job
from deepseek_eyes.vision.types import RouteAnswer, Variant, VisionRequest

__all__ = ["RouteWalk", "route_request"]

T = TypeVar("T")


class RouteWalk:
    def __init__(self, guard: RouteGuard) -> None:
        self._guard = guard

    async def first_accepted(
        self, job: Job, accept: Callable[[Job, str, RouteAnswer], T]
    ) -> T:
        """What ``accept`` makes of the first answer it does not refuse.

        Raises:
            VisionError | EvidenceError: the one failed route's own error, or
                ``VISION_FAILOVER_EXHAUSTED`` (``details['failures']``), or a
                ``VisionError`` when no route is eligible; each with ``details['attempts']``
                and ``details['operation_id']``.
        """
        guard = self._guard
        screening = guard.screen(job.op, job.candidates)
        eligible = screening.eligible
        failures: list[VisionError | EvidenceError] = list(screening.probe_failed)
        budget = 1 + guard.policy.failover_attempts
        request: VisionRequest | None = None
        for name in eligible[:budget]:
            try:
                await guard.admit(job.op, name)
                request = request or route_request(job)
                accepted = accept(job, name, await guard.call(job.op, name, request))
            except (RouteError, ProbeFailedError, EvidenceError) as exc:
                failures.append(exc)
                continue
            guard.succeeded(name)
            return accepted
        if len(eligible) > budget:
            job.op.record(
                "failover", "budget_exhausted", tried=budget, untried=len(eligible) - budget
            )
        raise _failure(job, failures)


def route_request(job: Job) -> VisionRequest:
    """The call every route of the walk gets: the image as a route takes it, with the
    prompts for the job's variant (a targeted reread's carry its question)."""
    decoded = job.pixels
    payload, media_type = decoded.route_payload()
    if job.variant is Variant.TARGET and job.question is not None:
        system, user = target_prompts(decoded.width, decoded.height, job.question)
    else:
        system, user = evidence_prompts(decoded.width, decoded.height)
    return VisionRequest(
        purpose="target" if job.variant is Variant.TARGET else "evidence",
        image_bytes=payload,
        media_type=media_type,
        width=decoded.width,
        height=decoded.height,
        system_prompt=system,
        user_prompt=user,
        variant=job.variant,
        question=job.question,
        pixels=decoded.pixels,
    )


def _failure(
    job: Job, failures: Sequence[VisionError | EvidenceError]
) -> VisionError | EvidenceError:
    if len(failures) == 1:
        only = failures[0]
        job.carry(only)
        return only
    if not failures:
        error = VisionError("no vision route is configured or eligible")
    else:
        summary = [{"route": f.details.get("route"), "code": f.code} for f in failures]
        error = FailoverExhaustedError(
            f"all {len(failures)} vision routes failed", details={"failures": summary}
        )
    job.carry(error)
    return error
