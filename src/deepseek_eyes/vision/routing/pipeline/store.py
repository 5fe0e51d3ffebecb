"""The store stage: evidence that passed the gate becomes an immutable cache record.

The record is keyed like every lookup of it (:meth:`Job.evidence_key
<deepseek_eyes.vision.routing.pipeline.job.Job.evidence_key>`: pixels, route, the route's
cache fingerprint, variant, question) and carries the image, model, repairs, usage and
the SHA-256 of its own body (:class:`~deepseek_eyes.vision.evidence.cache.EvidenceRecord`).
A record already stored under the key wins (records are immutable): concurrent
acquisitions that were not merged agree on one answer.

The attempts log needs no write here: each stage wrote its row as it happened (a failure
must find its rows already there), and the outcome carries them all
(:meth:`~deepseek_eyes.vision.routing.pipeline.job.Job.outcome`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from deepseek_eyes.vision.evidence.cache import EvidenceCache, EvidenceRecord
from deepseek_eyes.vision.routing.pipeline.gate import GatedEvidence
from deepseek_eyes.vision.routing.pipeline.job import Acquisition, Job

__all__ = ["EvidenceStore"]


class EvidenceStore:
    def __init__(
        self,
        cache: EvidenceCache,
        fingerprint: Callable[[str], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cache = cache
        self._fingerprint = fingerprint
        self._clock = clock

    def keep(self, job: Job, gated: GatedEvidence) -> Acquisition:
        """Store ``gated`` as ``job``'s evidence; the acquisition's outcome.

        Raises:
            StoreError: the record could not be written.
            VisionError: ``VISION_FLIGHT_LEASE_LOST``: ``job`` ran under a lease that
                passed to another replica (:attr:`Job.fence`); nothing was written.
        """
        record = EvidenceRecord.build(
            job.evidence_key(gated.route, self._fingerprint(gated.route)),
            image_sha256=job.known_image.sha256,
            model=gated.model,
            evidence=gated.evidence,
            repairs=gated.repairs,
            usage=gated.usage,
            created_at=self._clock(),
        )
        return job.outcome(self._cache.put(record, fence=job.fence), cached=False)
