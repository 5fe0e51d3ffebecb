"""DeepSeek's documented models, shipped as data: the priors of "which model sees".

``llm/data/deepseek-models.json`` lists each model DeepSeek documents (its input modalities,
whether it thinks by default, context and output limits, what an image costs and the image
limits), the aliases it serves under and the retired names with their successor, each with
the date the fact was checked. It is read once, on first use.

Decisions a newcomer would otherwise undo:

* **Priors, not truth.** A name says little: DeepSeek re-points aliases, self-hosters and
  other providers serve the same names text-only. The table only decides until the model
  itself has been asked (:mod:`deepseek_eyes.runtime.sight`: settings, then a pixel probe
  of the model, then these priors), and it never overrides the settings.
* **An alias resolves to its successor's facts** (``deepseek-v4-flash`` is served by
  ``deepseek-flash``), and a retired name too, so a user still on it gets the successor's
  priors and one warning naming it (:func:`renamed`).
* **Image tokens are an estimate** from the documented figures (about 277 tokens at 640 px,
  511 at 896, 655 at 1,024; a floor near 187 and a ceiling of 1,024): the upstream's own
  count replaces it when reported.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

__all__ = [
    "DEFAULT_SEEING_MODEL",
    "ImageCost",
    "ImageLimits",
    "KnownModel",
    "Renamed",
    "known_model",
    "known_models",
    "renamed",
    "renamed_note",
    "seeing_facts",
]

#: Whose documented image cost and limits stand for a model the table does not hold: the
#: seeing model DeepSeek documents them for.
DEFAULT_SEEING_MODEL = "deepseek-flash"


@dataclass(frozen=True)
class ImageCost:
    """Input tokens of one image: ``width × height / pixels_per_token`` within [min, max];
    ``detail: "low"`` first shrinks the image to ``low_detail_side`` square."""

    pixels_per_token: int
    min: int
    max: int
    low_detail_side: int

    def tokens(self, width: int, height: int, detail: str = "auto") -> int:
        if detail == "low":
            width = min(width, self.low_detail_side)
            height = min(height, self.low_detail_side)
        raw = math.ceil(max(1, width) * max(1, height) / self.pixels_per_token)
        return max(self.min, min(self.max, raw))


@dataclass(frozen=True)
class ImageLimits:
    """What one request may carry to the model: per image, per side, per request."""

    max_bytes: int
    max_side: int
    max_side_many: int  # the side limit once a request holds ``many`` images or more
    many: int
    max_images: int
    max_request_bytes: int

    def side_limit(self, images: int) -> int:
        return self.max_side_many if images >= self.many else self.max_side

    def per_image_bytes(self, images: int) -> int:
        """The bytes each of ``images`` images may take so that the request, base64 (4/3)
        and its text included, stays within ``max_request_bytes``: two thirds of it shared
        out, and never more than ``max_bytes``."""
        return min(self.max_bytes, self.max_request_bytes * 2 // 3 // max(1, images))


@dataclass(frozen=True)
class KnownModel:
    id: str
    served_by: str
    input: tuple[str, ...]
    image_in_tool_results: bool
    thinks_by_default: bool
    context_tokens: int | None
    max_output_tokens: int | None
    image_cost: ImageCost | None
    image_limits: ImageLimits | None
    checked: str

    @property
    def sees(self) -> bool:
        return "image" in self.input


@dataclass(frozen=True)
class Renamed:
    """A name that is an alias of, or retired in favour of, ``successor``."""

    id: str
    successor: str
    kind: Literal["alias", "retired"]
    since: str
    checked: str


@dataclass(frozen=True)
class _Table:
    models: dict[str, KnownModel]
    renamed: dict[str, Renamed]


def _model(entry: dict[str, Any]) -> KnownModel:
    cost = entry.get("image_tokens")
    limits = entry.get("image_limits")
    return KnownModel(
        id=entry["id"], served_by=entry["served_by"], input=tuple(entry["input"]),
        image_in_tool_results=bool(entry["image_in_tool_results"]),
        thinks_by_default=bool(entry["thinks_by_default"]),
        context_tokens=entry.get("context_tokens"),
        max_output_tokens=entry.get("max_output_tokens"),
        image_cost=ImageCost(**cost) if cost else None,
        image_limits=ImageLimits(**limits) if limits else None,
        checked=entry["checked"],
    )


@functools.cache
def _table() -> _Table:
    text = resources.files("deepseek_eyes.llm").joinpath("data/deepseek-models.json").read_text(
        encoding="utf-8")
    raw = json.loads(text)
    models = {m["id"]: _model(m) for m in raw["models"]}
    names: dict[str, Renamed] = {}
    for kind, key in (("alias", "aliases"), ("retired", "retired")):
        for entry in raw[key]:
            names[entry["id"]] = Renamed(entry["id"], entry["successor"], kind,  # type: ignore[arg-type]
                                         entry["since"], entry["checked"])
    return _Table(models, names)


def known_models() -> list[KnownModel]:
    """Every model of the table, in its order."""
    return list(_table().models.values())


def renamed(model_id: str) -> Renamed | None:
    """The alias or retired name ``model_id`` is, with its successor; None otherwise."""
    return _table().renamed.get(model_id)


def known_model(model_id: str) -> KnownModel | None:
    """The documented facts of ``model_id`` (an alias or retired name resolves to its
    successor's); None for a name the table does not hold."""
    table = _table()
    found = table.models.get(model_id)
    if found is not None:
        return found
    name = table.renamed.get(model_id)
    return table.models.get(name.successor) if name is not None else None


def renamed_note(model_id: str) -> str | None:
    """One sentence naming ``model_id``'s successor, or None when it is a current name."""
    name = renamed(model_id)
    if name is None:
        return None
    if name.kind == "alias":
        return (f"{model_id!r} is an alias of {name.successor!r} (since {name.since}); "
                f"name {name.successor!r} instead")
    return (f"{model_id!r} was retired on {name.since}; its successor is "
            f"{name.successor!r}")


def seeing_facts(model_id: str) -> KnownModel | None:
    """The facts to fit and price images for ``model_id`` by: its own, else those of
    :data:`DEFAULT_SEEING_MODEL` (a model sent pixels sees, whatever the table holds)."""
    return known_model(model_id) or known_model(DEFAULT_SEEING_MODEL)
