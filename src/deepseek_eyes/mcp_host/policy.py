"""Exposure policy: selectors, risk classes and the global budgets.

Annotations come from an untrusted server, so they only ever *withdraw*: ``read-only``
keeps a tool only when it says ``readOnlyHint: true`` and not ``destructiveHint: true``;
nothing is exposed unless an allow selector names it, and deny always wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from deepseek_eyes.settings import McpServerSettings

__all__ = ["RiskClass", "estimate_tokens", "matches", "permitted", "risk_allowed", "risk_class"]

RiskClass = Literal["read", "write", "destructive", "unknown-write"]


def matches(selectors: Iterable[str], name: str) -> bool:
    """``name`` equals a selector, or starts with a selector's prefix before its ``*``."""
    for sel in selectors:
        if sel.endswith("*"):
            if name.startswith(sel[:-1]):
                return True
        elif sel == name:
            return True
    return False


def permitted(server: McpServerSettings, kind: Literal["tools", "resources", "prompts"],
              name: str) -> bool:
    """Allowed by a selector and not denied (deny wins; empty allow lists allow nothing)."""
    if matches(getattr(server.deny, kind), name):
        return False
    return matches(getattr(server.allow, kind), name)


def risk_class(annotations: Any) -> RiskClass:
    """Classify from the four boolean hints; anything missing is ``unknown-write``."""
    if annotations is None:
        return "unknown-write"
    read_only = getattr(annotations, "read_only_hint", None)
    destructive = getattr(annotations, "destructive_hint", None)
    if read_only is True and destructive is not True:
        return "read"
    if destructive is True:
        return "destructive"
    if read_only is False:
        return "write"
    return "unknown-write"


def risk_allowed(server: McpServerSettings, risk: RiskClass) -> bool:
    return server.risk_policy == "allow" or risk == "read"


def estimate_tokens(schema: Any) -> int:
    """Schema tokens as the usage module estimates text: ~4 characters a token."""
    text = schema if isinstance(schema, str) else json.dumps(schema, separators=(",", ":"))
    return (len(text) + 3) // 4
