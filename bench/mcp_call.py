"""A tool call through the MCP host against the same call on a bare SDK ``Client``.

    .venv/bin/python bench/mcp_call.py [--rounds N] [--before REV]

Both talk to one real ``server-everything`` over stdio (scripts/ci-deps.sh installs it) and
call ``echo``. Ours: :meth:`McpHost.call_tool` (exposure and risk checks, generation check,
quota, the SDK call, admission, canonical JSON + SHA-256 of arguments and result, preview,
the audit ring and its SQLite row in a temporary data home). Baseline: ``Client.call_tool``
on a bare SDK client with the same server and the same arguments. Calls alternate between
the two, in one process, after a warm-up; the figure is the median per call.
Ratio = ours / baseline (target: at most 1.15), for wall time and for this process's CPU time
per call (the second line), which a busy machine does not distort.

``--before REV`` measures REV's sources too: each revision runs in a process of its own
(``PYTHONPATH`` at its ``src``), ours and REV's taking turns in chunks of rounds, each
against its own bare client as above; the figures are over all chunks, and a last line
gives ours against REV's (CPU per call, and the ratios to the bare client side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from mcp import Client, StdioServerParameters

from _serve import export
from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from mcp_peers import everything_stdio, settings_of

ROUNDS = 400
WARMUP = 40
ARGS = {"message": "the quick brown fox jumps over the lazy dog " * 4}


Samples = dict[str, list[float]]


async def measure(rounds: int) -> Samples:
    """Per-call wall and CPU seconds of ours and of the bare client, alternating."""
    server = everything_stdio(allow={"tools": ["echo"]})
    assert server.command is not None
    with tempfile.TemporaryDirectory() as tmp:
        home = DataHome(Path(tmp))
        host = McpHost(McpManager(settings_of(server)), blobs=home.blobs,
                       artifacts=home.artifacts, audit=McpAudit(home.audit),
                       usage=home.usage)
        await host.manager.start()
        env = {k: ref.resolve() for k, ref in server.env.items()}
        bare = Client(StdioServerParameters(command=server.command, args=list(server.args),
                                            env=env), cache=None, mode="legacy")
        ours: list[float] = []
        base: list[float] = []
        ours_cpu: list[float] = []
        base_cpu: list[float] = []
        clock = time.process_time
        try:
            async with bare:
                for i in range(WARMUP + rounds):
                    c0, t0 = clock(), time.perf_counter()
                    await host.call_tool("mcp__everything__echo", ARGS)
                    c1, t1 = clock(), time.perf_counter()
                    await bare.call_tool("echo", ARGS)
                    c2, t2 = clock(), time.perf_counter()
                    if i >= WARMUP:
                        ours.append(t1 - t0)
                        base.append(t2 - t1)
                        ours_cpu.append(c1 - c0)
                        base_cpu.append(c2 - c1)
        finally:
            await host.manager.stop()
            home.close()
    return {"ours": ours, "base": base, "ours_cpu": ours_cpu, "base_cpu": base_cpu}


def report(samples: Samples, label: str = "") -> None:
    """The two lines: wall (median) and this process's CPU (mean), ours against bare."""
    ours, base = samples["ours"], samples["base"]
    o, b = statistics.median(ours) * 1000, statistics.median(base) * 1000
    # This process's CPU time per call (the server's is not in it): wall time on a busy
    # machine lies, CPU time says what each path costs. Mean, not median: a flush of the
    # queued log rows lands on one call in 32, and its cost is part of every call's.
    oc = statistics.fmean(samples["ours_cpu"]) * 1e6
    bc = statistics.fmean(samples["base_cpu"]) * 1e6
    print(f"mcp_call{label} (echo over stdio, median of {len(ours)}): ours={o:.3f}ms "
          f"baseline={b:.3f}ms ratio={o / b:.2f}")
    print(f"mcp_call{label} cpu (this process, mean per call): ours={oc:.0f}us "
          f"baseline={bc:.0f}us ratio={oc / bc:.2f} extra={oc - bc:.0f}us")


def in_process(src: Path, rounds: int) -> Samples:
    """:func:`measure` in a process of its own, importing ``deepseek_eyes`` from ``src``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get(
        "PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, __file__, "--rounds", str(rounds), "--samples"],
                         env=env, check=True, capture_output=True, text=True).stdout
    samples: Samples = json.loads(out.splitlines()[-1])
    return samples


def against(before: str, rounds: int, chunks: int = 4) -> None:
    """Ours and ``before``'s sources in turns (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        sources = {"ours": ROOT / "src", before: export(before, Path(tmp) / "before")}
        runs: dict[str, Samples] = {rev: {} for rev in sources}
        for _ in range(chunks):
            for rev, src in sources.items():
                for key, values in in_process(src, max(rounds // chunks, 1)).items():
                    runs[rev].setdefault(key, []).extend(values)
    for rev, samples in runs.items():
        report(samples, f" [{rev}]")
    cpu = {rev: statistics.fmean(s["ours_cpu"]) * 1e6 for rev, s in runs.items()}
    ratio = {rev: statistics.fmean(s["ours_cpu"]) / statistics.fmean(s["base_cpu"])
             for rev, s in runs.items()}
    print(f"mcp_call cpu ours vs {before}: ours={cpu['ours']:.0f}us baseline="
          f"{cpu[before]:.0f}us ratio={cpu['ours'] / cpu[before]:.2f} "
          f"(to the bare client: {ratio['ours']:.2f} vs {ratio[before]:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--before", metavar="REV")
    parser.add_argument("--samples", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.before:
        against(args.before, args.rounds)
    elif args.samples:  # a turn of --before: the raw samples, as JSON on the last line
        print(json.dumps(asyncio.run(measure(args.rounds))))
    else:
        report(asyncio.run(measure(args.rounds)))
