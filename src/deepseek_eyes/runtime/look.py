"""``look``: the final model's one way back to the pixels.

When the evidence lacks a fact, the model asks one question about one image; the bridge
performs a targeted reread (``deepseekeyes.target.v1``) of the original bytes from the blob
store, trying first the route that produced the image's base evidence. Rereads per turn are
bounded (``runtime.max_rereads_per_turn``); past the bound, or on a vision failure, the
model gets an error result and answers with what it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.runtime.render import render_target
from deepseek_eyes.runtime.tools import ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.usage import estimate_tokens
from deepseek_eyes.vision.bridge import VisionBridge

__all__ = ["LookSource"]

MAX_QUESTION = 500

SPEC = ToolSpec(
    name="look",
    description=(
        "Look again at one image of this conversation to read a fact the evidence does not "
        "give (small text, a colour, a position, a count). Ask one precise question. Returns "
        "validated evidence of a targeted reread of the original pixels."
    ),
    parameters={
        "type": "object",
        "properties": {
            "image": {
                "type": "string",
                "description": 'The image id from the evidence, e.g. "img-1".',
            },
            "question": {"type": "string", "description": "One precise question."},
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
        if context.rereads >= context.max_rereads:
            return ToolOutcome(
                f"the reread limit of {context.max_rereads} for this turn is reached; answer "
                "with the evidence you have", True, {"code": "RUNTIME_REREAD_LIMIT"},
            )
        context.rereads += 1
        try:
            result = await self._bridge.reread(
                image["sha256"], question.strip(), base_route=image.get("route"),
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
        })
        text = render_target(
            image_id, image, result.record.evidence, route=result.route,
            record_sha256=result.record.record_sha256,
        )
        return ToolOutcome(text, False, {"record_sha256": result.record.record_sha256},
                           evidence_tokens=estimate_tokens(len(text)))
