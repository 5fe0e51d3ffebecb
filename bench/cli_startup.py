"""Command-line start-up time against a bare interpreter.

    .venv/bin/python bench/cli_startup.py

A command line is started once per use, so its fixed cost is paid every time. Ours, each
as a fresh process: ``deepseek-eyes --help`` and ``deepseek-eyes see IMAGE --json`` on an
image whose evidence is already cached (no route call, no OCR). Baseline: ``python -c
pass`` with the same interpreter. Runs are interleaved and the median is reported, of the
wall time and of the child's CPU time (user + system; wall time lies on a loaded machine).
Ratio = ours / baseline (targets: at most 15 for --help, at most 20 for a cached see).

Every child runs with bytecode writing allowed and one untimed warm-up run first, as an
installed package has its ``.pyc`` files (and, beside them, the command's table of
compiled source texts: :mod:`deepseek_eyes.cli.compiled_code`); a ``PYTHONDONTWRITEBYTECODE``
environment would otherwise measure compiling the sources on every start. The data directory is a
temporary one, filled by the warm-up run.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGE = ROOT / "examples" / "receipt.png"
RUNS = 15


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and the child's CPU time (user + system) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime
           + after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    cli = [sys.executable, "-m", "deepseek_eyes"]
    commands = {
        "baseline": [sys.executable, "-c", "pass"],
        "cli_help": [*cli, "--help"],
        "cli_see_cached_json": [*cli, "see", str(IMAGE), "--json"],
    }
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["DEEPSEEK_EYES_HOME"] = home
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p
        )
        for argv in commands.values():  # warm-up: .pyc files, and the evidence cache
            timed(argv, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(RUNS):
            for name, argv in commands.items():
                wall, used = timed(argv, env)
                samples[name].append(wall)
                cpu[name].append(used)
    baseline = statistics.median(samples["baseline"])
    baseline_cpu = statistics.median(cpu["baseline"])
    for name in ("cli_help", "cli_see_cached_json"):
        ours = statistics.median(samples[name])
        ours_cpu = statistics.median(cpu[name])
        print(f"{name}: ours={ours * 1e3:.0f}ms baseline=python -c pass {baseline * 1e3:.0f}ms "
              f"ratio={ours / baseline:.1f} (CPU ours={ours_cpu * 1e3:.0f}ms "
              f"baseline={baseline_cpu * 1e3:.0f}ms ratio={ours_cpu / max(baseline_cpu, 1e-3):.1f})"
              f" load={os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
