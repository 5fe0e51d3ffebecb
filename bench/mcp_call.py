"""A tool call through the MCP host against the same call on a bare SDK ``Client``.

    .venv/bin/python bench/mcp_call.py

Both talk to one real ``server-everything`` over stdio (scripts/ci-deps.sh installs it) and
call ``echo``. Ours: :meth:`McpHost.call_tool` (exposure and risk checks, generation check,
quota, the SDK call, admission, canonical JSON + SHA-256 of arguments and result, preview,
the audit ring and its SQLite row in a temporary data home). Baseline: ``Client.call_tool``
on a bare SDK client with the same server and the same arguments. Calls alternate between
the two, in one process, after a warm-up; the figure is the median per call.
Ratio = ours / baseline (target: at most 1.15), for wall time and for this process's CPU time
per call (the second line), which a busy machine does not distort.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mcp import Client, StdioServerParameters

from deepseek_eyes.home import DataHome
from deepseek_eyes.mcp_host.audit import McpAudit
from deepseek_eyes.mcp_host.host import McpHost
from deepseek_eyes.mcp_host.manager import McpManager
from mcp_peers import everything_stdio, settings_of

ROUNDS = 400
WARMUP = 40
ARGS = {"message": "the quick brown fox jumps over the lazy dog " * 4}


async def main() -> None:
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
                for i in range(WARMUP + ROUNDS):
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
    o, b = statistics.median(ours) * 1000, statistics.median(base) * 1000
    # This process's CPU time per call (the server's is not in it): wall time on a busy
    # machine lies, CPU time says what each path costs. Mean, not median: a flush of the
    # queued log rows lands on one call in 32, and its cost is part of every call's.
    oc, bc = statistics.fmean(ours_cpu) * 1e6, statistics.fmean(base_cpu) * 1e6
    print(f"mcp_call (echo over stdio, median of {ROUNDS}): ours={o:.3f}ms "
          f"baseline={b:.3f}ms ratio={o / b:.2f}")
    print(f"mcp_call cpu (this process, mean per call): ours={oc:.0f}us baseline={bc:.0f}us "
          f"ratio={oc / bc:.2f} extra={oc - bc:.0f}us")


if __name__ == "__main__":
    asyncio.run(main())
