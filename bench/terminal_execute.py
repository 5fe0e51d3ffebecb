"""Plan + execute + signed receipt of ``true``, against a bare ``subprocess.run``.

    .venv/bin/python bench/terminal_execute.py

Ours: ``TerminalService.plan`` (policy engine: parse, resolve and hash the executable,
paths, mode) then ``execute`` (re-resolution, reduced environment and fresh HOME,
``Popen`` in its own process group, output read on the event loop, redaction, canonical
JSON, HMAC-SHA256, chaining, the receipt written to disk), in process. Baseline:
``subprocess.run(["true"])`` with captured output. Both run interleaved in one process.
Ratio = ours / baseline (target: at most 2 without the sandbox). Where bubblewrap works
here, ours runs inside it twice more: against the same bare ``subprocess.run``, and against
``subprocess.run`` of the very ``bwrap`` command line ours spawns (the sandbox's start-up
on its own: namespaces, mounts, ``/proc``; target: at most 3).
Then the real stdio MCP server (``deepseek-eyes terminal serve --stdio``, read-only, no
sandbox) with the official SDK client, against the same baseline (target: at most 2.5): one
``terminal_run`` call per round, then ``terminal_plan`` + ``terminal_execute`` (two round
trips of the SDK, about 1.7 ms each here). Beside the wall times, the CPU time per round of
the server process (``/proc``) and of this client process.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from _proc import child_pids, cpu_seconds
from deepseek_eyes.terminal.execution.sandbox import (
    SandboxPlan,
    bwrap_available,
    make_home,
    remove_home,
    wrap_argv,
)
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService

ROUNDS = 200


async def measure(sandbox: str | None, rounds: int, *,
                  sandboxed_baseline: bool = False) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        service = TerminalService(
            ServiceConfig(Workspace.of([root]), mode="read-only", sandbox=sandbox,
                          max_sessions=1),
            Keyring([b"b" * 32]), Path(tmp) / "receipts",
        )
        session = service.open_session()["session_id"]
        ours: list[float] = []
        base: list[float] = []
        baseline = ["true"]
        home = make_home()
        if sandboxed_baseline and sandbox is not None:  # ours spawns this, less our work
            baseline, _ = wrap_argv(["true"], "/usr/bin/true", str(root), home, (str(root),),
                                    SandboxPlan("bwrap", network=False,
                                                workspace_writable=False), sandbox)
        for _ in range(rounds):
            t0 = time.perf_counter()
            plan = service.plan(session_id=session, argv=["true"])
            receipt = await service.execute(session, plan["plan_id"])
            ours.append(time.perf_counter() - t0)
            if receipt["status"] != "completed":
                raise SystemExit(f"unexpected status {receipt['status']}")
            t0 = time.perf_counter()
            subprocess.run(baseline, capture_output=True, check=True)
            base.append(time.perf_counter() - t0)
        remove_home(home)
        await service.aclose()
    return statistics.median(ours), statistics.median(base)


async def measure_stdio(rounds: int, *, one_call: bool) -> tuple[float, float, float, float]:
    """Median wall times (ours, baseline), then CPU time per round of the server process
    and of this client process (which runs the baseline's parent side too)."""
    exe = str(Path(sys.executable).with_name("deepseek-eyes"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        settings = Path(tmp) / "settings.toml"
        settings.write_text('[terminal]\nsandbox = "none"\n')
        params = StdioServerParameters(
            command=exe,
            args=["--config", str(settings), "terminal", "serve", "--stdio", "--workspace",
                  str(root), "--mode", "read-only"],
            env={**os.environ, "DEEPSEEK_EYES_HOME": str(Path(tmp) / "home")},
        )
        ours: list[float] = []
        base: list[float] = []
        before = child_pids()
        async with Client(params, mode="legacy") as client:
            (server,) = child_pids() - before
            opened = await client.call_tool("terminal_session_open", {})
            session = (opened.structured_content or {})["session_id"]
            server_cpu, client_cpu = cpu_seconds(server), time.process_time()
            for _ in range(rounds):
                t0 = time.perf_counter()
                if one_call:
                    ran = await client.call_tool("terminal_run",
                                                 {"argv": ["true"], "session_id": session})
                    receipt = (ran.structured_content or {}).get("receipt", {})
                else:
                    plan = await client.call_tool("terminal_plan",
                                                  {"argv": ["true"], "session_id": session})
                    content = plan.structured_content or {}
                    done = await client.call_tool("terminal_execute", {
                        "session_id": content["session_id"], "plan_id": content["plan_id"]})
                    receipt = done.structured_content or {}
                ours.append(time.perf_counter() - t0)
                if receipt.get("status") != "completed":
                    raise SystemExit(f"unexpected receipt {receipt}")
                t0 = time.perf_counter()
                subprocess.run(["true"], capture_output=True, check=True)
                base.append(time.perf_counter() - t0)
            server_cpu = cpu_seconds(server) - server_cpu
            client_cpu = time.process_time() - client_cpu
    return (statistics.median(ours[5:]), statistics.median(base[5:]), server_cpu / rounds,
            client_cpu / rounds)


def main() -> None:
    asyncio.run(measure(None, 20))  # warm caches and imports
    ours, base = asyncio.run(measure(None, ROUNDS))
    print(f"terminal plan+execute+receipt (true): ours={ours * 1000:.2f}ms "
          f"baseline={base * 1000:.2f}ms ratio={ours / base:.2f}")
    bwrap = bwrap_available()
    if bwrap:
        ours, base = asyncio.run(measure(bwrap, ROUNDS // 2))
        print(f"terminal plan+execute+receipt in bwrap (true): ours={ours * 1000:.2f}ms "
              f"baseline={base * 1000:.2f}ms ratio={ours / base:.2f}")
        ours, base = asyncio.run(measure(bwrap, ROUNDS // 2, sandboxed_baseline=True))
        print(f"terminal plan+execute+receipt in bwrap vs the same bwrap of true: "
              f"ours={ours * 1000:.2f}ms baseline={base * 1000:.2f}ms ratio={ours / base:.2f}")
    ours, base, server, client = asyncio.run(measure_stdio(ROUNDS // 2, one_call=True))
    print(f"terminal_run (plan+execute+receipt) over stdio MCP (true): ours={ours * 1000:.2f}ms "
          f"baseline={base * 1000:.2f}ms ratio={ours / base:.2f} (CPU per call: server "
          f"{server * 1000:.2f}ms, client+baseline parent {client * 1000:.2f}ms; "
          f"load {os.getloadavg()[0]:.2f})")
    ours, base, server, client = asyncio.run(measure_stdio(ROUNDS // 2, one_call=False))
    print(f"terminal_plan + terminal_execute over stdio MCP (true): ours={ours * 1000:.2f}ms "
          f"baseline={base * 1000:.2f}ms ratio={ours / base:.2f} (CPU per call: server "
          f"{server * 1000:.2f}ms, client+baseline parent {client * 1000:.2f}ms)")


if __name__ == "__main__":
    main()
