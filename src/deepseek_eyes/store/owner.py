"""Which process holds a piece of work, and whether that process still runs.

A turn in flight, or a request under an ``Idempotency-Key``, is leased to the process
running it, named by :data:`OWNER`: the host, the kernel's boot id, the process id and the
process's start time. Several processes may share one data directory (two ``serve`` on one
settings file, ``ask`` beside a gateway), so a process that opens the store must tell a
lease whose holder died (kill -9, a power cut) from one another process is working on:

* the same host and boot, and ``/proc/PID`` shows a process with the recorded start time:
  alive. A different start time is a reused process id: dead.
* the same host, another boot: dead (the machine restarted since).
* another host (a data directory on a network share, a container with its own process
  ids): alive. Nothing here can see that host's processes, and closing its work would
  break turns that are running there.

Without ``/proc`` (macOS), the process id alone is checked with ``kill(pid, 0)``.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

__all__ = ["alive", "on_this_host", "owner"]

_PROC = Path("/proc")


def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip() or "-"
    except OSError:
        return "-"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22),
    or ``-`` where there is no ``/proc``."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return "-"
    # The command name (field 2) is in parentheses and may hold spaces; fields follow it.
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else "-"


@functools.cache
def owner() -> str:
    """This process, as a lease names it: ``host|boot|pid|start``."""
    pid = os.getpid()
    host = socket.gethostname().replace("|", "_")
    return f"{host}|{_boot_id()}|{pid}|{_start_time(pid)}"


# A forked child is another process: it names itself anew.
os.register_at_fork(after_in_child=owner.cache_clear)


def on_this_host(name: str) -> bool:
    """Whether the process ``name`` names runs on this host (:func:`alive` can judge it);
    one of another host is judged by what it keeps writing (a heartbeat) instead."""
    parts = name.split("|")
    return len(parts) == 4 and parts[0] == owner().split("|")[0]


def alive(name: str) -> bool:
    """Whether the process a lease names may still run (see the module docstring)."""
    if not name:
        return False  # no process holds it (a turn found half-written at an upgrade)
    parts = name.split("|")
    if len(parts) != 4:
        return True  # not ours to judge
    host, boot, pid_text, start = parts
    me = owner()
    mine = me.split("|")
    if host != mine[0]:
        return True
    if boot != "-" and mine[1] != "-" and boot != mine[1]:
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    if pid == os.getpid():
        return name == me
    if start != "-" and (_PROC / "self").exists():
        return _start_time(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
