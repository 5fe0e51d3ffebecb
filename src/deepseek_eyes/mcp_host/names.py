"""Stable public tool names: ``mcp__<server>__<tool>``.

Model APIs accept ``[A-Za-z0-9_-]{1,64}``. A name that needs no change is used as is; one
that normalization or the length cap changed gets a short SHA-256 suffix of the *raw*
identity, so ``read.file`` and ``read_file`` never collide and the same raw name maps to
the same public name in every generation.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["MAX_NAME", "PREFIX", "public_name"]

PREFIX = "mcp__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def public_name(server_id: str, tool: str) -> str:
    """The model-facing name of ``tool`` on ``server_id`` (deterministic, ≤ 64 chars)."""
    raw = f"{PREFIX}{server_id}__{tool}"
    clean = _UNSAFE.sub("_", tool)
    candidate = f"{PREFIX}{server_id}__{clean}"
    if clean == tool and len(candidate) <= MAX_NAME:
        return candidate
    suffix = "_" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return candidate[: MAX_NAME - len(suffix)] + suffix
