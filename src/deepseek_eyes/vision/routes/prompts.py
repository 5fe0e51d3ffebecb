"""The prompts a vision route receives, derived from the canonical schema file.

The schema text in the system prompt comes from
:func:`deepseek_eyes.vision.evidence.gate.prompt_schema`,
the same file the gate compiles, so what we ask for and what we accept cannot drift apart.
"""

from __future__ import annotations

import functools
import hashlib

from deepseek_eyes.vision.evidence.gate import prompt_schema
from deepseek_eyes.vision.types import Variant

__all__ = ["evidence_prompts", "prompt_fingerprint", "target_prompts"]

_RULES = (
    "You are the eyes of a text-only reasoning model that cannot see the image. Report only "
    "what is visible; never guess hidden or cut-off content, and list doubts as "
    "uncertainties. Bounding boxes are [x, y, w, h] normalized to the image width and "
    "height (0..1, origin at the top-left; w and h > 0; the box stays inside the image). "
    "Confidence is a number from 0 to 1. Use an empty array when nothing applies and never "
    "add fields the schema does not define. Answer with exactly one JSON object that "
    "validates against this JSON Schema, with no prose and no code fence:\n"
)


def evidence_prompts(width: int, height: int) -> tuple[str, str]:
    system = _RULES + prompt_schema(Variant.EVIDENCE)
    user = (
        f"Produce {Variant.EVIDENCE.value} evidence for the attached image "
        f"({width}x{height} pixels): a factual summary; every legible line of text in ocr, "
        "in reading order, transcribed exactly; text blocks, tables, figures and UI elements "
        "as regions; notable objects; relations between region and object ids; each quantity "
        "a label names (amounts, totals, counts, measured values) with its label and unit as "
        "quantitative_facts, never street numbers or card, account or phone digits; and "
        "uncertainties."
    )
    return system, user


@functools.cache
def prompt_fingerprint() -> str:
    """Hash of every prompt template and the schema text in it: part of each evidence cache
    key, so rewording a prompt or changing the schema does not serve old answers."""
    parts = [
        *evidence_prompts(0, 0), *target_prompts(0, 0, ""),
        prompt_schema(Variant.EVIDENCE), prompt_schema(Variant.TARGET),
    ]
    return hashlib.sha256("\n\x00".join(parts).encode()).hexdigest()


def target_prompts(width: int, height: int, question: str) -> tuple[str, str]:
    system = _RULES + prompt_schema(Variant.TARGET)
    user = (
        f"Look again at the attached image ({width}x{height} pixels) and answer one "
        f"question with a {Variant.TARGET.value} object. Quote the literal text and "
        "describe the literal visual details you rely on as observations, with boxes.\n"
        f"Question: {question}"
    )
    return system, user
