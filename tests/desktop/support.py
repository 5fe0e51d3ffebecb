"""Helpers of the desktop tests: what they need installed, and our GTK test window.

The desktop stack is Debian's (Xvfb, D-Bus, AT-SPI, GTK 3, zenity, and pyatspi +
python-xlib for /usr/bin/python3): a missing piece skips locally and fails under CI=true.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.desktop.headless import missing_programs

__all__ = ["GTK_APP", "PYTHON", "GtkApp", "require_desktop", "wait_for"]

PYTHON = "/usr/bin/python3"
GTK_APP = Path(__file__).with_name("gtk_app.py")
_CHECK = "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk; " \
         "import pyatspi, Xlib.ext.xtest"


def _missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {what} is missing (scripts/ci-deps.sh installs it)")
    pytest.skip(f"{what} is not installed")


def require_desktop(*, zenity: bool = False) -> None:
    """Xvfb, D-Bus, AT-SPI and Debian's Python with GTK, pyatspi and Xlib."""
    missing = missing_programs()
    if missing:
        _missing(", ".join(missing))
    if not os.access(PYTHON, os.X_OK) or subprocess.run(  # noqa: S603 - fixed argv
            [PYTHON, "-c", _CHECK], capture_output=True, check=False, timeout=30).returncode:
        _missing(f"{PYTHON} with gi (GTK 3), pyatspi and python-xlib")
    if zenity and shutil.which("zenity") is None:
        _missing("zenity")


def wait_for(check: Callable[[], Any], *, timeout: float = 10.0, what: str = "") -> Any:
    """Poll ``check`` until it returns something truthy (the app reacts asynchronously to
    X events; there is no event we could wait on from here)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.02)


class GtkApp:
    """tests/desktop/gtk_app.py on the test desktop, driven over its stdin."""

    def __init__(self, env: Mapping[str, str], title: str) -> None:
        self.title = title
        self.proc = subprocess.Popen(  # noqa: S603 - our test app, fixed argv
            [PYTHON, "-W", "ignore", str(GTK_APP), title], env={**os.environ, **env},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("ready")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def expect(self, key: str, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.title}: no {key!r} from the app")
            try:
                item = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if key in item:
                return item

    def send(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.expect("state" if command == "dump" else "done")

    def state(self) -> dict[str, Any]:
        return self.send("dump")["state"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):
                    pipe.close()


