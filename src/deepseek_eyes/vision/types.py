"""The small types every part of the vision bridge shares.

They live apart from the modules that produce them so that routes, the router, the cache
and the CLI agree on one shape without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from deepseek_eyes.canonical_json import JsonObject
from deepseek_eyes.usage import ProviderUsage

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "Purpose",
    "RouteAnswer",
    "Variant",
    "VisionRequest",
    "VisionRoute",
]


class Variant(StrEnum):
    """The two strict variants of the canonical evidence schema."""

    EVIDENCE = "deepseekeyes.evidence.v1"
    TARGET = "deepseekeyes.target.v1"

    @property
    def short(self) -> str:
        return "evidence" if self is Variant.EVIDENCE else "target"

    @classmethod
    def parse(cls, text: str) -> Variant:
        """Accept the short name (``evidence``/``target``) or the full schema id."""
        for variant in cls:
            if text in (variant.value, variant.short):
                return variant
        raise ValueError(f"unknown evidence variant {text!r}")


Purpose = Literal["evidence", "target", "probe"]


@dataclass(frozen=True)
class VisionRequest:
    """One call to a route: an image plus the prompts that say what to return.

    ``image_bytes`` is what travels to a remote route (``media_type`` names it); ``pixels``
    is the decoded, oriented RGB image for routes that read pixels in-process.
    """

    purpose: Purpose
    image_bytes: bytes
    media_type: str
    width: int
    height: int
    system_prompt: str
    user_prompt: str
    variant: Variant | None = None
    question: str | None = None
    pixels: Image.Image | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class RouteAnswer:
    """What a route returned: raw model text, or an already-structured value (local)."""

    text: str | None = None
    value: JsonObject | None = None
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    model: str | None = None
    streamed: bool = False


@runtime_checkable
class VisionRoute(Protocol):
    """A multimodal route the router can call.

    Implementations raise :class:`deepseek_eyes.errors.RouteError` (with a
    ``VISION_ROUTE_*`` code) for every failure; nothing else escapes.
    """

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    @property
    def probe_exempt(self) -> bool:
        """True for routes that read pixels by construction (the local engine)."""
        ...

    @property
    def fingerprint(self) -> str:
        """Stable hash of what identifies the endpoint (kind, URL, model): route state
        such as a passed probe is only reused while the fingerprint is unchanged."""
        ...

    @property
    def answer_fingerprint(self) -> str:
        """Stable hash of everything about the route that changes its answers (kind,
        endpoint, model, sampling and format options; the local engine's identity and
        version), never a secret: cached evidence is only reused while it is unchanged."""
        ...

    @property
    def box_convention(self) -> str: ...

    async def check_health(self) -> None:
        """Cheap metadata check (e.g. the model is listed). Raises RouteError."""
        ...

    async def call(self, request: VisionRequest) -> RouteAnswer:
        """Send one request. Raises RouteError."""
        ...

    async def aclose(self) -> None: ...
