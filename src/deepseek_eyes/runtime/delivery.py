"""How an image a tool brought reaches the model: the one function every source calls.

An MCP image, a browser or desktop screenshot and a ``look`` crop are admitted (stored by
SHA-256), given an id in the turn (``tool-img-N``), and then delivered as the turn decided
(:meth:`~deepseek_eyes.runtime.tools.TurnContext.image_delivery`):

* ``pixels`` — a seeing model gets the image itself: the result's text names it and the
  turn loop puts its pixels inside the tool message; no vision route is asked;
* ``evidence`` — a blind model gets validated evidence text in the result;
* ``both`` — the pixels and the evidence.

An image delivered as pixels is marked ``pixels`` in the logged result (and ``evidence``
when its evidence is in the text as well), so later turns render it for whichever model
they run on (:mod:`deepseek_eyes.runtime.view`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.llm.known import seeing_facts
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.render import render_evidence, render_target
from deepseek_eyes.runtime.tools import TurnContext
from deepseek_eyes.usage import estimate_tokens
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.evidence.cache import ImageMeta
from deepseek_eyes.vision.intake.fit import fit_for_model

__all__ = ["Delivered", "deliver_image", "pixels_for", "pixels_note"]


@dataclass(frozen=True)
class Delivered:
    """What a result says where the image is, and the image as the turn holds it."""

    image_id: str
    part: dict[str, Any]
    text: str
    evidence_tokens: int = 0  # estimated tokens of the evidence in ``text``


def pixels_note(image_id: str, meta: ImageMeta | dict[str, Any], what: str = "image") -> str:
    width = meta.width if isinstance(meta, ImageMeta) else meta["width"]
    height = meta.height if isinstance(meta, ImageMeta) else meta["height"]
    kind = meta.media_type if isinstance(meta, ImageMeta) else meta["media_type"]
    return f"[{image_id}: the {what}, {width}x{height} {kind}, attached as pixels]"


async def deliver_image(bridge: VisionBridge, context: TurnContext, meta: ImageMeta, *,
                        question: str | None = None, what: str = "image") -> Delivered:
    """Deliver one admitted image into the turn.

    Raises:
        DeepSeekEyesError: getting its evidence failed (``evidence`` and ``both``).
    """
    mode = await context.image_delivery()
    if mode == "pixels":
        part: dict[str, Any] = {**image_part(meta), "pixels": True}
        image_id = context.add_image(part)
        return Delivered(image_id, part, pixels_note(image_id, meta, what))
    # The turn's scope: what its client may learn of the cache (docs/security.md, Scopes).
    if question:
        seen = await bridge.reread(meta.sha256, question, scope=context.scope)
    else:
        seen = await bridge.see_stored(meta.sha256, scope=context.scope)
    part = {**image_part(meta), "route": seen.route}
    if mode == "both":
        part.update(pixels=True, evidence=True)
    image_id = context.add_image(part)
    render = render_target if question else render_evidence
    text = render(image_id, part, seen.record.evidence, route=seen.route,
                  record_sha256=seen.record.record_sha256)
    return Delivered(image_id, part, text, estimate_tokens(len(text)))


async def pixels_for(bridge: VisionBridge, images: Sequence[Mapping[str, Any]], *,
                     model: str, carried: int) -> dict[str, bytes]:
    """The bytes to send of each image (by SHA-256), read from the blob store and fitted
    to ``model``'s documented limits (:func:`~deepseek_eyes.llm.known.seeing_facts`):
    ``carried`` images in one request share its side limit and its bytes.

    Raises:
        StoreError: an image's blob cannot be read.
    """
    facts = seeing_facts(model)
    limits = facts.image_limits if facts is not None else None
    side = limits.side_limit(carried) if limits is not None else None
    budget = limits.per_image_bytes(carried) if limits is not None else None
    out: dict[str, bytes] = {}
    for image in images:
        sha = str(image["sha256"])
        data = await bridge.read_image(sha)
        out[sha] = await fit_for_model(data, image, max_side=side, max_bytes=budget)
    return out
