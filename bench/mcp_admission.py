"""Result admission + canonical JSON + SHA-256 of a 16 MiB tool result, and refusals.

    .venv/bin/python bench/mcp_admission.py

Line 1, admitted: a result of 4,000 text blocks of 4,000 characters (about 16 MiB, inside
every limit). Ours: :func:`admit` (the iterative walk over every limit) then
:func:`canonical_json` (sorted keys, UTF-8) and its SHA-256. Baseline: ``json.dumps`` +
SHA-256 of the same value. Ratio = ours / baseline (target: at most 1.5).

Lines 2-5, refused: over-limit results at two input sizes each. Ours: :func:`admit`
raising its ``MCP_RESULT_*_LIMIT`` code. Baseline: what a host without admission would do
with it first, ``json.dumps`` + SHA-256. Ours stays flat as the input grows (it stops at the
limit); the baseline grows with the input.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from deepseek_eyes.errors import McpResultError
from deepseek_eyes.mcp_host.admission import admit
from deepseek_eyes.mcp_host.results import canonical_json

ROUNDS = 7


def timed(fn: Callable[[], Any], rounds: int = ROUNDS) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def baseline(value: Any) -> None:
    hashlib.sha256(json.dumps(value).encode()).hexdigest()


def ours_admitted(value: Any) -> None:
    admit(value)
    canonical_json(value)


def ours_refused(value: Any) -> None:
    try:
        admit(value)
    except McpResultError:
        return
    raise AssertionError("the result was admitted")


def text_result(blocks: int, chars: int) -> dict[str, Any]:
    line = ("Résumé of the quarter: revenue 12,345.67 € — up 4 %. " * (chars // 50 + 1))[:chars]
    return {"content": [{"type": "text", "text": line} for _ in range(blocks)],
            "isError": False}


def line(name: str, ours: float, base: float) -> None:
    print(f"{name}: ours={ours * 1000:.4f}ms baseline={base * 1000:.2f}ms "
          f"ratio={ours / base:.4f}")


def main() -> None:
    value = text_result(4000, 4000)
    chars = sum(len(b["text"]) for b in value["content"])
    size = len(canonical_json(value)[0])
    line(f"mcp_admission_16MiB ({chars / 2**20:.1f} Mi characters, "
         f"{size / 2**20:.1f} MiB canonical)",
         timed(lambda: ours_admitted(value)), timed(lambda: baseline(value)))
    for mib in (32, 128):  # one string over the 16 Mi character limit
        big = {"content": [{"type": "text", "text": "x" * (mib * 2**20)}]}
        line(f"mcp_refuse_string_{mib}MiB (MCP_RESULT_STRING_LIMIT)",
             timed(lambda big=big: ours_refused(big)), timed(lambda big=big: baseline(big), 3))
    for count in (200_000, 2_000_000):  # a list over the 50,000 values limit
        many = {"content": [], "structuredContent": {"rows": list(range(count))}}
        line(f"mcp_refuse_values_{count} (MCP_RESULT_VALUES_LIMIT)",
             timed(lambda many=many: ours_refused(many)),
             timed(lambda many=many: baseline(many), 3))


if __name__ == "__main__":
    main()
