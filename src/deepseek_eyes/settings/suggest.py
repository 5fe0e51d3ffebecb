"""The closest known key for an unknown one, so a typo's error names the fix.

Every settings model forbids unknown keys; the error alone (``vision.route_priorty: Extra
inputs are not permitted``) leaves the reader to find the right spelling. The models know
every key at every level, so the loader can say ``did you mean `route_priority`?``.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence

from pydantic import BaseModel

__all__ = ["closest_key", "known_keys"]


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The models a field's annotation can hold: itself, or inside Optional, list, dict,
    Union or Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(m for m in _models_in(arg) if m not in found)
    return found


def known_keys(model: type[BaseModel], parent: Sequence[int | str]) -> list[str]:
    """Every key allowed in the table at ``parent`` (a validation error location without
    its last part); list indexes are skipped."""
    models = [model]
    for part in parent:
        if isinstance(part, int):
            continue
        nested: list[type[BaseModel]] = []
        for current in models:
            field = current.model_fields.get(part)
            if field is not None:
                nested.extend(m for m in _models_in(field.annotation) if m not in nested)
        models = nested
    keys: list[str] = []
    for current in models:
        for name, field in current.model_fields.items():
            keys.extend(k for k in (name, field.alias) if k and k not in keys)
    return keys


def closest_key(model: type[BaseModel], loc: Sequence[int | str]) -> str | None:
    """The known key nearest to the unknown key at ``loc`` (its last part), or None when
    none is close."""
    import difflib  # only for a settings file with an unknown key, not every start-up

    if not loc or not isinstance(loc[-1], str):
        return None
    matches = difflib.get_close_matches(loc[-1], known_keys(model, loc[:-1]), n=1, cutoff=0.6)
    return matches[0] if matches else None
