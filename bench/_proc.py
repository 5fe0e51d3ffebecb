"""CPU time of a benchmark's child processes (Linux ``/proc``), beside its wall times.

On a machine shared with other work, wall time lies (a call waits for a core); the CPU
time a server process spent per call does not, so the stdio benchmarks print both.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def child_pids() -> set[int]:
    """The pids of this process's children (of all its threads)."""
    pids: set[int] = set()
    for listing in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        pids.update(int(pid) for pid in Path(listing).read_text().split())
    return pids


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` itself (not of its children), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS
