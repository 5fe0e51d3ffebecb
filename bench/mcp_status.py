"""What ``mcp status`` costs with several real stdio servers: connect, list, close.

    PYTHONPATH=src .venv/bin/python bench/mcp_status.py [N]

N (default 3) SDK servers written here that outlive their stdin (a worker thread keeps them
alive, as many servers do, so the SDK's close waits out its 2 s grace before it signals
them), plus ``mcp-server-time`` when build/ has it. Ours: :class:`McpManager` as the CLI
runs it, the handshakes at once (up to ``CONNECT_CONCURRENCY``) and the closes at once.
Baseline: the same handshakes, then each close awaited before the next starts, which is
what the manager's stop did before (each lingering server cost its 2 s grace in turn).
Ratio = ours / baseline.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import McpSettings

ROOT = Path(__file__).resolve().parents[1]
TIME_SERVER = ROOT / "build/mcp-time-venv/bin/mcp-server-time"
LINGERING = '''
import threading, time
from mcp.server.mcpserver import MCPServer
threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
app = MCPServer("lingering")
@app.tool(description="echo")
def echo(text: str) -> str:
    return text
app.run()
'''


def settings(script: Path, n: int) -> McpSettings:
    servers: list[dict[str, object]] = [
        {"id": f"linger{i}", "transport": "stdio", "command": sys.executable,
         "args": [str(script)]} for i in range(n)]
    if TIME_SERVER.exists():
        servers.append({"id": "time", "transport": "stdio", "command": str(TIME_SERVER)})
    return McpSettings.model_validate({"servers": servers})


async def ours(cfg: McpSettings) -> float:
    t0 = time.perf_counter()
    manager = McpManager(cfg)
    await manager.start(wait=30)
    assert all(s.status == "ready" for s in manager.servers.values()), manager.status()
    await manager.stop()
    return time.perf_counter() - t0


async def baseline(cfg: McpSettings) -> float:
    t0 = time.perf_counter()
    manager = McpManager(cfg)
    await manager.start(wait=30)
    assert all(s.status == "ready" for s in manager.servers.values()), manager.status()
    manager.suspended = True
    for state in list(manager.servers.values()):
        await manager._close(state)  # one close at a time, as before
    return time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "lingering_server.py"
        script.write_text(LINGERING, encoding="utf-8")
        cfg = settings(script, n)
        a = asyncio.run(ours(cfg))
        b = asyncio.run(baseline(cfg))
    print(f"mcp_status_{len(cfg.servers)}_servers: ours={a:.2f}s baseline={b:.2f}s "
          f"ratio={a / b:.2f}")


if __name__ == "__main__":
    main()
