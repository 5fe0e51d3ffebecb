"""``look``: the final model's one way back to the pixels, with zoom.

Offered whenever the conversation holds an image, on every path. The model names one image
and asks one question, optionally about a ``region`` (``[x, y, w, h]`` normalized to the
image, as the evidence schema's boxes are):

* a **blind** model gets validated evidence: the bridge performs a targeted reread
  (``deepseekeyes.target.v1``) of the original bytes, or of the region cropped from them
  at full resolution, trying first the route that produced the image's base evidence;
* a **seeing** model gets pixels: the region cropped at full resolution (or the whole
  image, when a later turn shows it only as a reference) inside the tool result, so small
  print a compressed view loses can be read.

A crop is stored by its SHA-256 like any image and gets its own id (``tool-img-N``).
Rereads per turn are bounded (``runtime.max_rereads_per_turn``); past the bound, or on a
vision failure, the model gets an error result and answers with what it has.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import anyio

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.delivery import pixels_note
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.render import render_target
from deepseek_eyes.runtime.tools import ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.usage import estimate_tokens
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.intake.fit import check_region, crop_png

__all__ = ["LookSource"]

MAX_QUESTION = 500

SPEC = ToolSpec(
    name="look",
    description=(
        "Look again at one image of this conversation to read a fact you cannot make out "
        "(small text, a colour, a position, a count). Ask one precise question; give a "
        "region [x, y, w, h] (fractions of the image's width and height, from its top-left) "
        "to zoom into that part at full resolution. Returns the image or region itself when "
        "you can see images, else validated evidence of a targeted reread of the original "
        "pixels."
    ),
    parameters={
        "type": "object",
        "properties": {
            "image": {
                "type": "string",
                "description": 'The image id from the evidence, e.g. "img-1".',
            },
            "question": {"type": "string", "description": "One precise question."},
            "region": {
                "type": "array",
                "description": "Optional zoom: [x, y, w, h], each 0..1 of the image's width "
                               "and height, x and y from the top-left.",
                "items": {"type": "number", "minimum": 0, "maximum": 1},
                "minItems": 4,
                "maxItems": 4,
            },
        },
        "required": ["image", "question"],
        "additionalProperties": False,
    },
)


class LookSource:
    """The ``look`` source: one tool, offered only when the turn holds images."""

    name = "look"
    prefix = "look"

    def __init__(self, bridge: VisionBridge) -> None:
        self._bridge = bridge

    def tools(self, context: TurnContext) -> list[ToolSpec]:
        return [SPEC] if context.images else []

    async def call(
        self, spec: ToolSpec, arguments: Mapping[str, Any], context: TurnContext  # noqa: ARG002
    ) -> ToolOutcome:
        return await self.run(arguments, context)

    async def close(self) -> None:
        return None

    async def run(self, arguments: Mapping[str, Any], context: TurnContext) -> ToolOutcome:
        ref, question = arguments.get("image"), arguments.get("question")
        if not isinstance(ref, str) or not isinstance(question, str) or not question.strip():
            return ToolOutcome('look needs "image" and a non-empty "question"', True)
        if len(question) > MAX_QUESTION:
            return ToolOutcome(f"the question is longer than {MAX_QUESTION} characters", True)
        found = context.image(ref)
        if found is None:
            known = ", ".join(sorted(context.images))
            return ToolOutcome(f"no image {ref[:40]!r} in this conversation (known: {known})", True)
        image_id, image = found
        region = _region(arguments.get("region"))
        if isinstance(region, str):
            return ToolOutcome(region, True, {"code": "RUNTIME_BAD_REGION"})
        if context.rereads >= context.max_rereads:
            return ToolOutcome(
                f"the reread limit of {context.max_rereads} for this turn is reached; answer "
                "with the evidence you have", True, {"code": "RUNTIME_REREAD_LIMIT"},
            )
        context.rereads += 1
        try:
            target = image
            if region is not None:
                target = await self._crop(image, region)
            delivery = await context.image_delivery()
            if delivery == "pixels":
                return self._pixels(image_id, target, region, context)
            result = await self._bridge.reread(
                target["sha256"], question.strip(), base_route=image.get("route"),
                scope=context.scope,
            )
        except DeepSeekEyesError as exc:
            context.calls.append({"tool": "look", "image": image_id, "code": exc.code})
            return ToolOutcome(
                f"the reread failed ({exc.code}); answer with the evidence you have",
                True, {"code": exc.code},
            )
        context.calls.append({
            "tool": "look", "image": image_id, "route": result.route,
            "cached": result.cached, "record_sha256": result.record.record_sha256,
            "region": list(region) if region is not None else None,
        })
        images: tuple[tuple[str, Mapping[str, Any]], ...] = ()
        shown_id, shown = image_id, image
        if region is not None:
            crop = {**target, "route": result.route}
            shown_id = context.add_image(crop)
            shown = crop
            images = ((shown_id, crop),)
        text = render_target(
            shown_id, shown, result.record.evidence, route=result.route,
            record_sha256=result.record.record_sha256,
        )
        if region is not None:
            text = (f"{_region_note(image_id, region)} Boxes below are relative to the crop "
                    f"{shown_id}.\n{text}")
        if delivery == "both":  # the pixels too, beside the evidence already in the text
            part = {**{k: v for k, v in target.items() if k not in ("route", "id")},
                    "pixels": True, "evidence": True}
            images = ((shown_id, part),)
        return ToolOutcome(text, False, {"record_sha256": result.record.record_sha256},
                           images, evidence_tokens=estimate_tokens(len(text)))

    async def _crop(self, image: Mapping[str, Any],
                    region: tuple[float, float, float, float]) -> dict[str, Any]:
        """The region of an image cut at full resolution and admitted (stored by hash)."""
        data = await self._bridge.read_image(str(image["sha256"]))
        png = await anyio.to_thread.run_sync(functools.partial(crop_png, data, region))
        (meta,) = await self._bridge.admit_all([png])
        return dict(image_part(meta))

    @staticmethod
    def _pixels(image_id: str, target: Mapping[str, Any],
                region: tuple[float, float, float, float] | None,
                context: TurnContext) -> ToolOutcome:
        """A seeing model's look: the image (or the crop) itself, as pixels."""
        part = {**{k: v for k, v in target.items() if k not in ("route", "id")},
                "pixels": True}
        shown_id = context.add_image(part) if region is not None else image_id
        what = "image" if region is None else f"crop of {image_id}"
        context.calls.append({"tool": "look", "image": image_id, "pixels": True,
                              "region": list(region) if region is not None else None})
        note = pixels_note(shown_id, part, what)
        if region is not None:
            note = f"{_region_note(image_id, region)} {note}"
        return ToolOutcome(note, False, {"pixels": True}, ((shown_id, part),))


def _region(value: Any) -> tuple[float, float, float, float] | str | None:
    """A checked region, None when absent, or the error text the model reads."""
    if value is None:
        return None
    try:
        return check_region(value)
    except ValueError as exc:
        return str(exc)


def _region_note(image_id: str, region: tuple[float, float, float, float]) -> str:
    x, y, w, h = region
    return f"Region [{x:.3g}, {y:.3g}, {w:.3g}, {h:.3g}] of {image_id}, at full resolution."
