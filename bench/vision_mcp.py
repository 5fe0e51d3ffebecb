"""``see`` over MCP on a cached image against a trivial tool over the same transport.

    .venv/bin/python bench/vision_mcp.py

Ours: ``tools/call see {"image": "01_receipt.png"}`` from the official SDK client to a real
``deepseek-eyes vision serve --stdio --root bench/corpus`` process (the file read and
checked against the root, hashed, the evidence cache hit, attempts and audit rows, the
text rendering, JSON-RPC both ways), and the same call to the server in memory (no
process, no pipe). Baselines: for stdio, the transport's own cost, the same SDK client
calling the one trivial tool of a bare SDK server over stdio (bench/_trivial_mcp.py:
``echo`` of a short string, with the output schema the SDK derives, so its client
validates there too; target: ours at most 1.5x it); and what ``deepseek-eyes see`` does
in process, reading the file and calling ``VisionBridge.see`` on a warm cache. All share
one temporary data home; the first call (the embedded offline OCR route) fills the cache,
and each client makes one untimed call first (the first call of a connection reports
``cached: false``: that scope had not been shown the record). Calls alternate after a
warm-up; figures are medians per call. Ratio = ours / baseline.

The SDK client validates every ``structuredContent`` against the tool's ``outputSchema``
(the evidence schema); on a receipt's evidence that validation is most of the MCP call's
time. So the calls are timed twice: as the SDK client makes them (``validated``), and with
the client's validation switched off (``unvalidated``: what the server and the transport
cost). Beside the wall times, the CPU time per call of each server process (``/proc``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from _proc import child_pids, command_line, cpu_seconds
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision_server import ServedRoots, VisionService, build_vision_server

CORPUS = Path(__file__).resolve().parent / "corpus"
IMAGE = "01_receipt.png"
TRIVIAL = Path(__file__).resolve().parent / "_trivial_mcp.py"
ROUNDS = 200
WARMUP = 20
EXE = str(Path(sys.executable).with_name("deepseek-eyes"))


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DEEPSEEK_EYES_HOME"] = tmp
        settings = Settings.model_validate({})
        with DataHome(Path(tmp)) as home:
            bridge = VisionBridge(settings, home)
            first = await bridge.see((CORPUS / IMAGE).read_bytes())  # fills the cache
            if first.cached:
                raise SystemExit("expected a cache miss on the first call")
            service = VisionService(bridge, ServedRoots.of([CORPUS]))
            params = StdioServerParameters(
                command=EXE, args=["vision", "serve", "--stdio", "--root", str(CORPUS)],
                env=dict(os.environ))
            with open(os.devnull, "w") as quiet:
                from mcp.client.stdio import stdio_client

                trivial_params = StdioServerParameters(
                    command=sys.executable, args=[str(TRIVIAL)], env=dict(os.environ))
                before = child_pids()
                async with (
                    Client(stdio_client(params, errlog=quiet), mode="legacy") as stdio,
                    Client(build_vision_server(service, close_on_exit=False),
                           mode="legacy") as memory,
                    Client(stdio_client(trivial_params, errlog=quiet),
                           mode="legacy") as trivial,
                ):
                    times: dict[str, list[float]] = {}
                    servers = {("trivial" if str(TRIVIAL) in command_line(pid) else "stdio"): pid
                               for pid in child_pids() - before}
                    cpu: dict[str, float] = {}
                    for client in (stdio, memory):  # each connection's first call
                        await client.call_tool("see", {"image": IMAGE})

                    async def over(client: Client) -> float:
                        started = time.perf_counter()
                        result = await client.call_tool("see", {"image": IMAGE})
                        took = time.perf_counter() - started
                        meta = result.meta or {}
                        if result.is_error or not meta["deepseekeyes"]["cached"]:
                            raise SystemExit(f"expected a cache hit: {result.content}")
                        return took

                    async def bare() -> float:
                        started = time.perf_counter()
                        result = await trivial.call_tool("echo", {"text": "ok"})
                        took = time.perf_counter() - started
                        if result.is_error or result.structured_content != {"result": "ok"}:
                            raise SystemExit(f"unexpected echo: {result}")
                        return took

                    async def inproc() -> float:
                        started = time.perf_counter()
                        hit = await bridge.see((CORPUS / IMAGE).read_bytes())
                        took = time.perf_counter() - started
                        if not hit.cached:
                            raise SystemExit("expected a cache hit")
                        return took

                    for phase in ("validated", "unvalidated"):
                        if phase == "unvalidated":
                            for client in (stdio, memory, trivial):
                                client.session.validate_tool_result = _skip  # type: ignore[method-assign]
                        start = {name: cpu_seconds(pid) for name, pid in servers.items()}
                        client_start = time.process_time()
                        for index in range(WARMUP + ROUNDS):
                            taken = {"stdio": await over(stdio), "memory": await over(memory),
                                     "trivial": await bare(), "inproc": await inproc()}
                            if index >= WARMUP:
                                for name, took in taken.items():
                                    times.setdefault(f"{phase} {name}", []).append(took)
                        calls = WARMUP + ROUNDS
                        for name, pid in servers.items():
                            cpu[f"{phase} {name}"] = (cpu_seconds(pid) - start[name]) / calls
                        cpu[f"{phase} client"] = (time.process_time() - client_start) / calls
            await bridge.aclose()
    for phase in ("validated", "unvalidated"):
        ours = statistics.median(times[f"{phase} stdio"])
        baseline = statistics.median(times[f"{phase} trivial"])
        print(f"vision_mcp_see[stdio, client {phase}, {IMAGE} cached]: "
              f"ours={ours * 1e3:.3f}ms baseline=trivial tool of a bare SDK server over stdio "
              f"{baseline * 1e3:.3f}ms ratio={ours / baseline:.2f} (server CPU per call: ours "
              f"{cpu[f'{phase} stdio'] * 1e3:.2f}ms, trivial {cpu[f'{phase} trivial'] * 1e3:.2f}ms;"
              f" this client's CPU per round of all four: {cpu[f'{phase} client'] * 1e3:.2f}ms;"
              f" load {os.getloadavg()[0]:.2f})")
        baseline = statistics.median(times[f"{phase} inproc"])
        for name in ("stdio", "memory"):
            ours = statistics.median(times[f"{phase} {name}"])
            print(f"vision_mcp_see[{name}, client {phase}, {IMAGE} cached]: "
                  f"ours={ours * 1e3:.3f}ms baseline=in-process see {baseline * 1e3:.3f}ms "
                  f"ratio={ours / baseline:.2f}")


async def _skip(_name: str, _result: object) -> None:
    return None


if __name__ == "__main__":
    asyncio.run(main())
