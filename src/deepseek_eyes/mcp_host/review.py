"""What an operator should look at twice in what a server tells the model.

Tool descriptions and server instructions go into the model's context verbatim. Two kinds
of text in them deserve a person's eyes before a tool is allowed:

* **secret-looking** text (token shapes, ``KEY=value`` with a secret-looking name, a
  private key block): a server that leaks a credential into its description leaks it to
  every model provider the host talks to;
* **instruction-like** text that addresses the model rather than describing the tool
  ("ignore previous instructions", "you must …", "do not tell the user", a fake
  ``system:`` turn or chat-template tokens): the signature of tool poisoning.

These are flags for a person, not a filter: the phrases are common enough in honest
descriptions ("you must pass an absolute path") that withholding tools on them would do
more harm than good, and a determined attacker paraphrases. Each flag names its kind and
what matched; a secret's match is shown masked.
"""

from __future__ import annotations

import re
from typing import Any

from deepseek_eyes.mcp_host.redact import TOKEN_PATTERNS

__all__ = ["INSTRUCTION_PATTERNS", "review_text"]

#: Instruction-like phrasing (name, pattern); matched case-insensitively.
INSTRUCTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.I | re.M)) for name, pattern in (
        ("override", r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)?"
                     r"(?:previous|prior|above|earlier|other|system)\s+"
                     r"(?:instructions?|prompts?|rules?|messages?)"),
        ("imperative", r"\byou\s+(?:must|should\s+always|have\s+to|are\s+required\s+to|"
                       r"need\s+to\s+always)\b"),
        ("always/never", r"\b(?:always|never)\s+(?:call|use|run|invoke|send|include|mention|"
                         r"tell|reveal|ask)\b"),
        ("concealment", r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+"
                        r"to|reveal\s+(?:this|it)\s+to|show)\s+(?:the\s+)?user\b"),
        ("system prompt", r"\bsystem\s+prompt\b|<\s*/?\s*system\s*>|^\s*system\s*:|"
                          r"\[/?INST\]|<\|im_(?:start|end)\|>|<\|(?:system|user|assistant)\|>"),
        ("role play", r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you|act\s+as\s+(?:a|an|the)\s+"
                      r"(?:system|admin|developer))\b"),
        ("exfiltration", r"\b(?:send|post|upload|forward)\s+(?:the\s+)?(?:contents?|files?|"
                         r"keys?|tokens?|credentials?|secrets?|conversation|history)\s+"
                         r"(?:of|to)\b"),
        ("hidden marker", r"<\s*(?:important|secret|hidden|instructions?)\s*>"),
    )
)

_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b[A-Z0-9_.\-]*(?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key)"
    r"[A-Z0-9_.\-]*\s*[=:]\s*[\"']?[A-Za-z0-9_\-./+]{12,}"
)
MAX_FLAGS = 16


def _mask(text: str) -> str:
    return text[:4] + "…" if len(text) > 4 else "…"


def review_text(text: str) -> list[dict[str, Any]]:
    """Flags for ``text``: ``{"kind": "secret"|"instruction", "what", "match"}``, at most
    :data:`MAX_FLAGS`, in the order found."""
    flags: list[dict[str, Any]] = []
    if not text:
        return flags
    flags.extend({"kind": "secret", "what": name, "match": _mask(found.group(0)),
                  "at": found.start()}
                 for name, pattern in TOKEN_PATTERNS for found in pattern.finditer(text))
    for found in _SECRET_ASSIGNMENT.finditer(text):
        name = found.group(0).split("=")[0].split(":")[0].strip()
        flags.append({"kind": "secret", "what": "secret-looking assignment",
                      "match": f"{name}=…", "at": found.start()})
    flags.extend({"kind": "instruction", "what": name,
                  "match": " ".join(found.group(0).split())[:80], "at": found.start()}
                 for name, pattern in INSTRUCTION_PATTERNS for found in pattern.finditer(text))
    flags.sort(key=lambda f: f["at"])
    for flag in flags:
        del flag["at"]
    return flags[:MAX_FLAGS]
