"""Applications ``desktop_launch`` may start: only those named in ``desktop.apps``.

An app is an argv (never a shell line), started in its own process group with the
desktop's environment (display, D-Bus, accessibility on). At most ``desktop.max_processes``
run at once; every one is killed, group and all, at ``desktop_close``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping

from deepseek_eyes.errors import DesktopError, DesktopGuardError

__all__ = ["AppLauncher"]


class AppLauncher:
    def __init__(self, apps: Mapping[str, tuple[str, ...]], *, max_processes: int) -> None:
        self.apps = dict(apps)
        self.max_processes = max_processes
        self.running: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}

    def alive(self) -> int:
        for pid in [p for p, (_, proc) in self.running.items() if proc.poll() is not None]:
            del self.running[pid]
        return len(self.running)

    def launch(self, name: str, env: Mapping[str, str]) -> int:
        """Start the app; its pid. Raises DesktopGuardError DESKTOP_LAUNCH_REFUSED."""
        argv = self.apps.get(name)
        if argv is None:
            known = ", ".join(sorted(self.apps)) or "none"
            raise DesktopGuardError(f"app {name[:60]!r} is not in desktop.apps (known: {known})",
                                    code="DESKTOP_LAUNCH_REFUSED")
        if self.alive() >= self.max_processes:
            raise DesktopGuardError(f"{self.max_processes} launched apps are running "
                                    "(desktop.max_processes)", code="DESKTOP_LAUNCH_REFUSED")
        try:
            proc = subprocess.Popen(  # noqa: S603 - a configured argv, never a shell
                list(argv), env=dict(env), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            raise DesktopError(f"app {name!r} could not start: {exc}",
                               code="DESKTOP_ACTION_FAILED") from exc
        self.running[proc.pid] = (name, proc)
        return proc.pid

    def close(self) -> None:
        for pid, (_, proc) in list(self.running.items()):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
                    proc.wait(timeout=3)
        self.running.clear()
