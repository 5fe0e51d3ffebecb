"""``deepseek-eyes serve`` as a real process for the gateway benchmarks."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def export(rev: str, into: Path) -> Path:
    """``rev``'s ``src`` tree under ``into``, for a ``serve`` of that revision (a benchmark's
    ``--before REV``: both measured side by side in one run, under the same load)."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def start_gateway(settings: str, home: Path, *, gateway: str = "",
                  src: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """Serve with the TOML ``settings`` and ``[gateway]`` lines (its rate limit lifted: a
    benchmark's hundreds of requests a minute are no abuse), data under ``home``; returns
    the process and its ``/v1`` URL once it listens. ``src``: the ``deepseek_eyes`` sources
    to serve from (another revision's, for a before/after run), instead of this one's."""
    config = home / "eyes.toml"
    config.write_text(
        f"{settings}\n[gateway]\nrate_limit_per_minute = 1000000\n{gateway}\n",
        encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home / "data")}
    env.pop("DEEPSEEK_EYES_GATEWAY_KEY", None)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    process = subprocess.Popen(
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "serve", "--port", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        match = re.search(r"listening on (http://\S+/v1)", line)
        if match:
            return process, match.group(1)
    raise SystemExit("the gateway did not start")
