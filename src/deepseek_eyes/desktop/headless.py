"""A private headless desktop: Xvfb, a D-Bus session bus and the AT-SPI bus.

For servers with no display (``[desktop] headless = true`` or ``desktop serve --xvfb``) and
for the tests. Xvfb picks a free display itself (``-displayfd``), so two sessions never race
for ``:99``; the D-Bus daemon prints its address; the AT-SPI bus launcher is started with
``--launch-immediately`` and waited for on the bus (``org.a11y.Bus.GetAddress``), because an
application started before it runs without accessibility and never gains it.

No window manager is started: with none, "focus" is X input focus, which is exactly what
the guards check and the backend sets.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field

from deepseek_eyes.errors import FIX_DESKTOP, DesktopError

__all__ = ["HeadlessDesktop", "missing_programs"]

AT_SPI_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
_PROGRAMS = ("Xvfb", "dbus-daemon", "dbus-send")


def missing_programs() -> list[str]:
    """What a headless desktop needs and this machine lacks."""
    missing = [name for name in _PROGRAMS if shutil.which(name) is None]
    if not os.access(AT_SPI_LAUNCHER, os.X_OK):
        missing.append(AT_SPI_LAUNCHER)
    return missing


def _unavailable(message: str) -> DesktopError:
    return DesktopError(message, code="DESKTOP_UNAVAILABLE")


@dataclass
class HeadlessDesktop:
    width: int = 1280
    height: int = 800
    startup_timeout: float = 15.0
    display: str | None = None
    bus_address: str | None = None
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def environment(self) -> dict[str, str]:
        """What a program needs to run on this desktop with accessibility on."""
        if self.display is None or self.bus_address is None:
            raise _unavailable("the headless desktop is not started")
        return {"DISPLAY": self.display, "DBUS_SESSION_BUS_ADDRESS": self.bus_address,
                "GTK_A11Y": "atspi", "NO_AT_BRIDGE": "0"}

    def start(self) -> HeadlessDesktop:
        """Start Xvfb, D-Bus and AT-SPI. Raises DesktopError DESKTOP_UNAVAILABLE."""
        missing = missing_programs()
        if missing:
            raise DesktopError(
                f"the headless desktop needs {', '.join(missing)}; install them: {FIX_DESKTOP}",
                code="DESKTOP_UNAVAILABLE", details={"missing": missing, "fix": FIX_DESKTOP})
        try:
            self._start_xvfb()
            self._start_dbus()
            self._start_atspi()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None,
               **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = subprocess.Popen(  # noqa: S603 - our argv, no shell
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True, **kwargs)  # type: ignore[call-overload]
        self._procs.append(proc)
        return proc

    def _read_line(self, fd: int, what: str) -> str:
        deadline = time.monotonic() + self.startup_timeout
        data = b""
        while b"\n" not in data:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                raise _unavailable(f"{what} did not start in {self.startup_timeout:g} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise _unavailable(f"{what} exited at start")
            data += chunk
        return data.split(b"\n", 1)[0].decode().strip()

    def _start_xvfb(self) -> None:
        read, write = os.pipe()
        try:
            self._spawn(["Xvfb", "-displayfd", str(write), "-screen", "0",
                         f"{self.width}x{self.height}x24", "-nolisten", "tcp", "-noreset"],
                        pass_fds=(write,), stdout=subprocess.DEVNULL)
            os.close(write)
            write = -1
            self.display = ":" + self._read_line(read, "Xvfb")
        finally:
            os.close(read)
            if write >= 0:
                os.close(write)

    def _start_dbus(self) -> None:
        proc = self._spawn(["dbus-daemon", "--session", "--nofork", "--print-address"],
                           stdout=subprocess.PIPE)
        assert proc.stdout is not None
        self.bus_address = self._read_line(proc.stdout.fileno(), "dbus-daemon")

    def _start_atspi(self) -> None:
        env = {**os.environ, **self.environment}
        self._spawn([AT_SPI_LAUNCHER, "--launch-immediately"], env=env,
                    stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            probe = subprocess.run(
                ["dbus-send", "--session", "--dest=org.a11y.Bus",  # noqa: S607 - PATH, like Xvfb
                 "--print-reply", "/org/a11y/bus", "org.a11y.Bus.GetAddress"],
                env=env, capture_output=True, timeout=5, check=False)
            if probe.returncode == 0 and b"unix:" in probe.stdout:
                return
            time.sleep(0.05)  # polling the bus: there is no event to wait on from here
        raise _unavailable("the AT-SPI bus did not come up")

    def stop(self) -> None:
        """Stop everything started, newest first."""
        while self._procs:
            proc = self._procs.pop()
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=3)
            if proc.stdout is not None:
                proc.stdout.close()
        self.display = None
        self.bus_address = None

    def __enter__(self) -> HeadlessDesktop:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
