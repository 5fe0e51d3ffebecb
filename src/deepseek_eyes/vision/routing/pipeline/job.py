"""The one object an acquisition's stages hand on: what is known about this acquisition.

The router takes the image's SHA-256 once (or is given it for a stored image), ranks the
candidate routes once and opens the operation whose rows form the attempts log; the stages
read those from here instead of being passed them again, and add what they learn: the
lookup the image's identity (a known image) or intake the identity and the decoded pixels
(a new one). Those two fields are filled in place and nothing else changes: a job belongs
to the one caller that opened it (a caller that joins a single flight keeps its own job and
only waits on the other's), and a cache hit, the path repeated most, must not pay for
copies of it.

:class:`Acquisition` is the outcome, built only from a job (:meth:`Job.outcome`), so its
image, operation and attempts are always the job's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.vision.evidence.cache import EvidenceKey, EvidenceRecord, ImageMeta
from deepseek_eyes.vision.intake.decode import DecodedImage
from deepseek_eyes.vision.routing.attempts import Attempt, OperationLog
from deepseek_eyes.vision.types import Variant

__all__ = ["Acquisition", "FlightKey", "Job", "question_digest"]

#: What decides an acquisition's outcome: image bytes, variant, question digest, routes.
FlightKey = tuple[str, Variant, str | None, tuple[str, ...]]


@dataclass(frozen=True)
class Acquisition:
    """One acquisition's evidence. ``cached``: this acquisition called no route (a cache
    hit, or it joined one in flight); ``joined``: it waited on a concurrent acquisition of
    the same work, whose operation its one attempts row names."""

    record: EvidenceRecord
    image: ImageMeta
    cached: bool
    operation_id: str
    attempts: tuple[Attempt, ...]
    joined: bool = False

    @property
    def route(self) -> str:
        return self.record.route


def question_digest(question: str | None) -> str | None:
    """What a targeted reread's question is keyed by: the SHA-256 of its stripped text."""
    if question is None:
        return None
    return hashlib.sha256(question.strip().encode("utf-8")).hexdigest()


@dataclass(slots=True)
class Job:
    """One acquisition on its way through the stages.

    ``sha256`` is the encoded bytes' hash, taken once; ``data`` the bytes when the caller
    gave them (a stored image's are read by intake, only on a miss); ``candidates`` the
    route names, best first; ``op`` the acquisition's attempts. ``image`` is filled in
    from the image index (lookup) or at intake; ``decoded`` by intake.
    """

    sha256: str
    variant: Variant
    question: str | None
    question_sha256: str | None
    candidates: tuple[str, ...]
    op: OperationLog
    data: bytes | None = field(default=None, repr=False)
    image: ImageMeta | None = None
    decoded: DecodedImage | None = field(default=None, repr=False)
    #: The caller's own chained record names the acquisition (a turn's evidence list): a
    #: cache hit then writes no attempts row of its own (:mod:`.lookup`).
    recorded: bool = False
    #: The single-flight lease this process holds for the job (its key and fencing
    #: token), checked by the write that stores the evidence; None without shared state.
    fence: tuple[str, int] | None = None

    @property
    def flight_key(self) -> FlightKey:
        """Concurrent jobs with this key share one execution (single flight)."""
        return (self.sha256, self.variant, self.question_sha256, self.candidates)

    @property
    def known_image(self) -> ImageMeta:
        """The image's identity; a stage that needs it runs after the lookup or intake."""
        if self.image is None:
            raise AssertionError("the image's identity is not known yet")  # a stage order bug
        return self.image

    @property
    def pixels(self) -> DecodedImage:
        """The decoded image; a stage that needs it runs after intake."""
        if self.decoded is None:
            raise AssertionError("the image was not decoded yet")  # a stage order bug
        return self.decoded

    def evidence_key(self, route: str, fingerprint: str) -> EvidenceKey:
        """What ``route``'s evidence for this image, variant and question is cached under."""
        return EvidenceKey(
            self.known_image.pixel_sha256, route, self.variant, self.question_sha256,
            fingerprint,
        )

    def outcome(self, record: EvidenceRecord, *, cached: bool) -> Acquisition:
        """The acquisition's result: ``record`` with this job's image and attempts."""
        return Acquisition(
            record, self.known_image, cached, self.op.operation_id, tuple(self.op.entries)
        )

    def carry(self, exc: DeepSeekEyesError) -> None:
        """Put the attempts rows written so far and the operation's id into ``exc``'s
        details, as every failure of an acquisition reports them."""
        exc.details["attempts"] = list(self.op.entries)
        exc.details["operation_id"] = self.op.operation_id
