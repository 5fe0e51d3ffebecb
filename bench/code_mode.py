"""Code Mode against native tool calls: one multi-step workflow, tokens in and out, wall time.

    .venv/bin/python bench/code_mode.py [--rounds 5]

The workflow (issue #39): read a 300-row ledger from an MCP server, keep the 3 overdue
invoices, send a reminder for each. The server is a real stdio MCP server of our own
(``list_invoices`` returns the 300 rows as JSON, about 14,000 characters; ``send_reminder``
takes one id); the model is the loopback DeepSeek (tests/runtime/upstream.py), scripted as
a model would act, and the turn runs in-process through :class:`Runtime` (the one loop,
the sandbox and the MCP host are all real).

* **native** (baseline): the model calls ``list_invoices``, reads the rows, then calls
  ``send_reminder`` once per kept row, one call per step (four tool rounds), then answers.
  Every later request carries the 300 rows again.
* **code** (ours): the model reads the ledger's signatures in ``run_code``'s description
  (listed there while the catalog is short) and sends one program that lists, filters and
  calls ``send_reminder`` per kept row and prints the three ids; then it answers. Only the
  program's output and one marker per nested call reach it.
* **code after a search** (the ``_search`` lines): the same program after a ``tools_search``
  round, as a model must when the catalog is too long to list.

Both end with the same scripted answer. Tokens are the upstream's own counts, summed over
the turn's model calls (``TurnResult.usage``): input = ``prompt_tokens`` (4 characters a
token over every message and the tool definitions sent), output = ``completion_tokens``
(what the model wrote: tool calls, the program, the answer, and its short reasoning per
call, which the V4 models send in thinking mode). The script rides in the user message in
both runs, so both inputs include it (the code run's program is the longer one). Wall time
is the turn's, median over ``--rounds``, after one warm-up turn per mode.

Lines: ``name: ours=… baseline=… ratio=…`` (ratio = code / native; goals: input <= 0.2,
output <= 1.2).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest, TurnResult
from deepseek_eyes.settings import Settings
from deepseek_eyes.terminal.execution.sandbox import bwrap_available
from runtime.upstream import LoopbackUpstream

LEDGER = """
import json
from mcp.server.mcpserver import MCPServer

app = MCPServer("ledger")


@app.tool()
def list_invoices() -> str:
    \"\"\"All invoices of the ledger as a JSON list of {id, customer, status}.\"\"\"
    return json.dumps([{"id": i, "customer": f"c-{i:03d}",
                        "status": "overdue" if i % 100 == 7 else "paid"} for i in range(300)])


@app.tool()
def send_reminder(invoice_id: int) -> str:
    \"\"\"Send the customer of an invoice a payment reminder.\"\"\"
    return f"reminder queued for invoice {invoice_id}"


app.run("stdio")
"""

KEPT = (7, 107, 207)
ANSWER = "Reminders sent for the 3 overdue invoices: 7, 107 and 207."
TASK = "Send a payment reminder for every overdue invoice in the ledger."

NATIVE_SCRIPT = "\n".join([
    TASK,
    "CALL[mcp__ledger__list_invoices]: {}",
    *(f'THEN[mcp__ledger__send_reminder]: {{"invoice_id": {i}}}' for i in KEPT),
    f"FINALLY: {ANSWER}",
])

PROGRAM = """import json
rows = json.loads(tools.ledger__list_invoices())
overdue = [r["id"] for r in rows if r["status"] == "overdue"]
for i in overdue:
    tools.ledger__send_reminder(invoice_id=i)
print("reminded:", overdue)
"""

CODE_SCRIPT = "\n".join([
    TASK,
    "CALL[run_code]: " + json.dumps({"code": PROGRAM}),
    f"FINALLY: {ANSWER}",
])
SEARCH_SCRIPT = "\n".join([
    TASK,
    'CALL[tools_search]: {"query": "ledger", "signatures": true}',
    "THEN[run_code]: " + json.dumps({"code": PROGRAM}),
    f"FINALLY: {ANSWER}",
])


def settings(upstream: LoopbackUpstream, server: Path, mode: str) -> Settings:
    ledger = {"id": "ledger", "transport": "stdio", "command": sys.executable,
              "args": [str(server)], "allow": {"tools": ["list_invoices", "send_reminder"]}}
    return Settings.model_validate({
        "llm": {"base_url": upstream.base_url, "api_key": False, "model": "deepseek-v4-pro",
                "timeout": 30.0, "models": [{"id": "deepseek-v4-pro", "input": ["text"]}]},
        "vision": {"deepseek": {"enabled": False}},
        "mcp": {"servers": [ledger]},
        "runtime": {"tool_mode": mode},
    })


async def one_turn(runtime: Runtime, script: str) -> tuple[TurnResult, float]:
    started = time.perf_counter()
    result = await runtime.run(TurnRequest(messages=[
        {"role": "user", "content": [{"type": "text", "text": script}]}]))
    seconds = time.perf_counter() - started
    if result.content != ANSWER:
        raise SystemExit(f"the turn did not finish the workflow: {result.content[:500]!r}")
    return result, seconds


async def measure(upstream: LoopbackUpstream, server: Path, home: Path, mode: str,
                  script: str, rounds: int) -> dict[str, Any]:
    os.environ["DEEPSEEK_EYES_HOME"] = str(home)  # a fresh data directory per mode
    config = settings(upstream, server, mode)
    runtime = Runtime(config, DataHome.open(config))
    await runtime.start()
    try:
        await one_turn(runtime, script)  # warm-up: imports, the first sandbox
        turns = [await one_turn(runtime, script) for _ in range(rounds)]
    finally:
        await runtime.aclose()
        runtime.home.close()
    first = turns[0][0]
    nested = [c for c in first.tools if c.get("parent") and c.get("source") == "mcp"]
    return {"input": first.usage.prompt_tokens, "output": first.usage.completion_tokens,
            "reasoning": first.usage.reasoning_tokens, "model_calls": first.model_calls,
            "tool_calls": len([c for c in first.tools if c.get("source") == "mcp"]),
            "nested": len(nested),
            "wall": statistics.median(s for _, s in turns)}


def line(name: str, ours: float, base: float, unit: str = "") -> None:
    print(f"{name}: ours={ours:g}{unit} baseline={base:g}{unit} ratio={ours / base:.3f}")


async def main(rounds: int) -> None:
    if bwrap_available() is None:
        raise SystemExit("Code Mode needs bubblewrap; this machine has none that works")
    with LoopbackUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        server = Path(tmp) / "ledger.py"
        server.write_text(LEDGER, encoding="utf-8")
        results = {}
        for name, mode, script in (("native", "native", NATIVE_SCRIPT),
                                   ("code", "code", CODE_SCRIPT),
                                   ("search", "code", SEARCH_SCRIPT)):
            results[name] = await measure(upstream, server, Path(tmp) / name, mode, script,
                                          rounds)
    native, code, search = results["native"], results["code"], results["search"]
    print(f"code_mode: read 300 rows, keep {len(KEPT)}, one tool call per kept row; "
          f"median of {rounds} turns")
    for mode, r in (("native", native), ("code", code), ("search", search)):
        print(f"  {mode:>6}: {r['model_calls']} model calls, {r['tool_calls']} MCP calls "
              f"({r['nested']} nested), reasoning {r['reasoning']} of the output tokens")
    line("code_mode_input_tokens", code["input"], native["input"])
    line("code_mode_output_tokens", code["output"], native["output"])
    line("code_mode_wall_ms", round(code["wall"] * 1000, 1), round(native["wall"] * 1000, 1),
         "ms")
    # The same program after a tools_search round (a catalog too long to list in run_code).
    line("code_mode_search_input_tokens", search["input"], native["input"])
    line("code_mode_search_output_tokens", search["output"], native["output"])
    line("code_mode_search_wall_ms", round(search["wall"] * 1000, 1),
         round(native["wall"] * 1000, 1), "ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
