"""The error reference: every code of :data:`deepseek_eyes.errors.ERROR_CODES`, with the
HTTP status the gateway answers it with, its meaning, and what to do.

The rows come from the registry; ``docs/errors.md`` gives the grouping, each group's
introduction and the longer notes a row carries after the registry's sentence (tests pin
that file to the registry, row by row). A code the file does not describe yet still gets a
row, under "Not yet described", so the page never lacks one.

The status column is what :func:`deepseek_eyes.gateway.app.error_status` answers, for the
families a gateway handler raises. The security layer answers its own refusals before any
handler runs (:data:`_REFUSAL_STATUS`, by the :class:`RefusalCodes` field the code fills),
and a few codes stop the gateway at start or are never answered over HTTP: those show none.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from deepseek_eyes.errors import ERROR_CODES, DeepSeekEyesError
from deepseek_eyes.gateway.app import GATEWAY_REFUSALS, error_status

__all__ = ["ERRORS_SOURCE", "errors_page", "gateway_status"]

#: The hand-written source of the page, relative to the docs directory; the generated page
#: takes its place in the site.
ERRORS_SOURCE = "errors.md"

#: What the security layer (serving/security.py) answers each kind of refusal with.
_REFUSAL_STATUS = {
    "unauthorized": "401", "forbidden": "421 (Host), 403 (Origin)", "rate_limited": "429",
    "body_too_large": "413", "unsupported_media_type": "415", "body_timeout": "408",
}
#: Families a gateway handler raises and :func:`error_status` maps.
_HANDLED = ("GATEWAY_", "STORE_", "IMAGE_", "RUNTIME_", "EVIDENCE_", "LLM_", "VISION_ROUTE_",
            "VISION_NO_ROUTE", "VISION_FAILOVER_", "VISION_PROBE_", "CONFIG_ENV_MISSING")
#: Gateway codes that stop it at start (or warn), never an HTTP answer.
_AT_START = frozenset({"GATEWAY_KEY_WEAK", "GATEWAY_KEY_REQUIRED", "GATEWAY_UNSAFE_BIND"})

_ROW = re.compile(r"^\| `([A-Z0-9_]+)` \| (.*) \|$")


def gateway_status(code: str) -> str:
    """The HTTP status a gateway client gets for ``code``, or "" when it gets none."""
    for field in fields(GATEWAY_REFUSALS):
        if getattr(GATEWAY_REFUSALS, field.name) == code and field.name in _REFUSAL_STATUS:
            return _REFUSAL_STATUS[field.name]
    if code in _AT_START or not code.startswith(_HANDLED):
        return ""
    status = error_status(DeepSeekEyesError("", code=code))
    if code == "LLM_HTTP_ERROR":
        return f"the upstream's 4xx, else {status}"
    return str(status)


def _notes(code: str, documented: str) -> str:
    """What the docs add after the registry's sentence (which they start with)."""
    meaning = ERROR_CODES[code].rstrip(".")
    text = documented.strip()
    if text.rstrip(".").startswith(meaning):
        return text[len(meaning):].lstrip(".").strip()
    return text


def _row(code: str, documented: str | None) -> str:
    meaning = ERROR_CODES[code].replace("|", "\\|")
    notes = _notes(code, documented) if documented else ""
    if notes.startswith("("):  # "(HTTP 409)" belongs inside the sentence
        meaning = meaning.rstrip(".")
        notes = notes if notes.endswith(".") else notes + "."
    text = f"{meaning} {notes}".strip()
    return f"| `{code}` | {gateway_status(code)} | {text} |"


_HEADER = ("| code | gateway HTTP status | what it means and what to do |",
           "| --- | --- | --- |")


def errors_page(source: Path) -> str:
    """The Markdown page of every error code, grouped as ``source`` groups them."""
    out: list[str] = []
    seen: set[str] = set()
    in_table = False
    for line in source.read_text(encoding="utf-8").splitlines():
        if line.startswith("| code | meaning |"):
            out.extend(_HEADER)
            in_table = True
            continue
        if in_table and line.startswith("| ---"):
            continue
        found = _ROW.match(line)
        if in_table and found:
            if found.group(1) in ERROR_CODES:  # a code the registry dropped is not listed
                seen.add(found.group(1))
                out.append(_row(found.group(1), found.group(2)))
            continue
        in_table = False
        out.append(line)
        if line.startswith("# ") and len(out) == 1:
            out += ["", f"Generated from the error registry when this site was built: "
                        f"{len(ERROR_CODES)} codes."]
    missing = [c for c in ERROR_CODES if c not in seen]
    if missing:
        out += ["", "## Not yet described", "",
                "Codes in the registry that docs/errors.md does not describe yet.", "",
                *_HEADER, *(_row(c, None) for c in missing)]
    return "\n".join(out) + "\n"

