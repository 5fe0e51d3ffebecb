"""The lookup stage: a known image's cached evidence, from the first candidate route that
has it.

Evidence is keyed by the decoded pixels' hash, so the lookup needs the image's identity:
the image index answers for bytes seen before (:meth:`EvidenceLookup.identify`: one index
read, no decode), and intake answers for new bytes. The router therefore looks a known
image up before intake, and a new one right after it (the same pixels may be known under
another encoding); either way the lookup runs once per acquisition.

A hit is one attempts row (phase ``cache``, outcome ``hit``: image, route, record) and
counts the provider tokens its reuse avoided; for a job whose caller records the acquisition
itself (:attr:`Job.recorded`: a gateway turn, whose chained turn record names the image,
route, record and operation of every image it showed) the hit stays in the operation's
entries and writes no row, so a conversation that resends a cached image every turn does
not grow the attempts log by a row a turn; a record that fails its hash is refused
(outcome ``tampered``, quarantined by the cache) and the next candidate is asked. A miss
is written by :meth:`EvidenceLookup.missed` by the acquisition that goes on to the routes,
so a caller that only joins one in flight has its one ``flight`` row and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

from deepseek_eyes.errors import EvidenceIntegrityError
from deepseek_eyes.usage import UsageCategory, UsageTracker
from deepseek_eyes.vision.evidence.cache import EvidenceCache, EvidenceRecord
from deepseek_eyes.vision.routing.pipeline.job import Acquisition, Job

__all__ = ["EvidenceLookup", "record_avoided"]


class EvidenceLookup:
    """The image index and the evidence cache, asked for one job's candidate routes.

    ``fingerprint`` gives what a route's evidence is cached under (the router's
    :meth:`~deepseek_eyes.vision.routing.router.VisionRouter.cache_fingerprint`)."""

    def __init__(
        self, cache: EvidenceCache, usage: UsageTracker, fingerprint: Callable[[str], str]
    ) -> None:
        self._cache = cache
        self._usage = usage
        self._fingerprint = fingerprint

    def identify(self, job: Job) -> None:
        """Fill in the image's identity when its bytes were seen before (else intake will
        learn it)."""
        job.image = self._cache.image_meta(job.sha256)

    def find(self, job: Job) -> Acquisition | None:
        """The cached evidence of the first candidate route that has it, or None."""
        image = job.known_image
        for name in job.candidates:
            try:
                record = self._cache.get(job.evidence_key(name, self._fingerprint(name)))
            except EvidenceIntegrityError as exc:
                job.op.record("cache", "tampered", route=name, code=exc.code)
                continue
            if record is not None:
                job.op.record(
                    "cache", "hit", route=name, image_sha256=image.sha256,
                    record_sha256=record.record_sha256, write=not job.recorded,
                )
                record_avoided(self._usage, record, source=f"vision-cache:{name}")
                return job.outcome(record, cached=True)
        return None

    def missed(self, job: Job) -> None:
        """The row that says no candidate route had evidence for this image."""
        job.op.record(
            "cache", "miss", image_sha256=job.known_image.sha256, routes=len(job.candidates)
        )


def record_avoided(usage: UsageTracker, record: EvidenceRecord, *, source: str) -> None:
    """Avoided replay counts the provider tokens the call that made ``record`` cost, which
    a repeat would have sent again. Local OCR sends none, so its reuse counts nothing here:
    what it saved was local time, not tokens."""
    tokens = record.usage.get("prompt_tokens", 0) + record.usage.get("completion_tokens", 0)
    if tokens > 0:
        usage.record_estimate(UsageCategory.AVOIDED_REPLAY, tokens, source=source, calls=1)
