"""Every ``{ env = "NAME" }`` a settings file names, with the key path it stands at.

A file can be valid and still useless here: each secret is a reference resolved when it is
first used, so an unset variable shows only later, as ``CONFIG_ENV_MISSING`` from whatever
needed it (a server that does not connect, a model call that fails). ``config check`` asks
this module to say so at once, once per reference.

By default only what the file *names* is walked (pydantic's ``model_fields_set``): a
default reference the file never wrote (``llm.api_key`` when ``[llm]`` does not set it) is
the program's choice, not the file's. ``doctor`` asks for every reference, defaults
included (``named_only=False``), because an unset default key fails a turn all the same.
Paths read like the ones ``CONFIG_INVALID`` prints
(``mcp.servers[0].env.GITHUB_TOKEN``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from deepseek_eyes.settings.base import SecretRef

__all__ = ["EnvReference", "env_references", "unset_references"]

#: The deepest a settings model nests (a guard, far above the real depth).
_MAX_DEPTH = 16


@dataclass(frozen=True)
class EnvReference:
    """Where a reference stands (its key path) and the variable it names."""

    path: str
    env: str


def env_references(model: BaseModel, *, named_only: bool = True) -> list[EnvReference]:
    """The references ``model`` names (with ``named_only=False``, also those its defaults
    hold), in file order, each key path once."""
    return list(dict.fromkeys(_walk_model(model, "", 0, named_only)))


def unset_references(model: BaseModel,
                     environ: Mapping[str, str] | None = None) -> list[EnvReference]:
    """The named references whose variable is unset or empty in ``environ`` (ours)."""
    env = os.environ if environ is None else environ
    return [ref for ref in env_references(model) if not env.get(ref.env)]


def _walk_model(model: BaseModel, prefix: str, depth: int,
                named_only: bool) -> Iterator[EnvReference]:
    if depth > _MAX_DEPTH:
        return
    for name in type(model).model_fields:
        if named_only and name not in model.model_fields_set:
            continue
        yield from _walk(getattr(model, name), f"{prefix}.{name}" if prefix else name, depth,
                         named_only)


def _walk(value: object, path: str, depth: int, named_only: bool) -> Iterator[EnvReference]:
    if isinstance(value, SecretRef):
        yield EnvReference(path, value.env)
    elif isinstance(value, BaseModel):
        yield from _walk_model(value, path, depth + 1, named_only)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}", depth + 1, named_only)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]", depth + 1, named_only)
