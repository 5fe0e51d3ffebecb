"""What ``serve`` loads when no MCP server is configured (issue 41: RSS <= 80 MB).

The MCP SDK alone is ~55 MiB of the gateway's resident set; Pillow, OpenTelemetry and
cryptography (the Responses front's sealed reasoning) add more. A gateway with no MCP
server, no traces and only text turns needs none of them, so they load with the feature that
uses them. One fresh interpreter does what ``serve`` does before it listens (the app factory
imported, the runtime started following its settings, so the MCP manager runs with no
server, the app and its web console built) and reports what it imported; a module-level
import of any of them anywhere on that path fails this test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import deepseek_eyes

SRC = Path(deepseek_eyes.__file__).resolve().parents[1]

_PROBE = """
import asyncio, json, sys
from pathlib import Path

from deepseek_eyes.gateway.drain import Drain
from deepseek_eyes.gateway.server import _web_console, create_app
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.settings import Settings


async def main() -> None:
    settings = Settings.model_validate({
        "llm": {"base_url": "http://127.0.0.1:9/v1", "api_key": False, "model": "m"}})
    with DataHome(Path(sys.argv[1])) as home:
        runtime = Runtime(settings, home)
        await runtime.start(follow=True)
        create_app(runtime, settings.gateway, key=None)
        # and the web console serve builds beside it on loopback
        assert _web_console(runtime, home, None, None, "127.0.0.1", Drain(30.0)) is not None
        loaded = sorted({name.split(".")[0] for name in sys.modules})
        print(json.dumps({"manager": runtime.mcp_manager is not None, "loaded": loaded}))
        await runtime.aclose()


asyncio.run(main())
"""


def test_serve_with_no_mcp_server_never_imports_the_sdk_or_other_heavy_modules(
        tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run(  # noqa: S603 (our own interpreter and probe)
        [sys.executable, "-c", _PROBE, str(tmp_path / "home")], env=env,
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The manager runs (a server registered live must work), yet nothing of the SDK loaded.
    assert report["manager"] is True
    loaded = set(report["loaded"])
    assert "deepseek_eyes" in loaded  # the probe saw the app
    assert "starlette" in loaded
    heavy = {"mcp", "mcp_types", "httpx2", "PIL", "opentelemetry", "cryptography", "numpy",
             "rapidocr", "onnxruntime", "cv2", "playwright",
             "redis"}  # the shared state's client: only with a redis:// state_url
    assert loaded.isdisjoint(heavy), sorted(loaded & heavy)
