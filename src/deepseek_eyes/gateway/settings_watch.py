"""Applying the settings file's ``[mcp]`` section to a running gateway, without a restart.

A change arrives two ways: ``deepseek-eyes mcp allow|deny|enable|…`` writes the file (the
validated, comment-keeping edits of :mod:`deepseek_eyes.mcp_host.settings_file`) and asks the
gateway's control API to reload it at once; a hand edit is found by polling the file's
modification time and, when that moved, its SHA-256 (every :data:`POLL_S` seconds: a
``stat`` costs nothing, and no watcher library is needed for one file). Either way the file
is validated whole, exactly as at start; an invalid file is refused, its error said on
stderr once per version of the file, and the running set kept. A valid one is applied with
:meth:`McpManager.reconfigure`: exposure suspended during cleanup, only the validated
replacement published.

Only ``[mcp]`` is applied live; the other sections (the gateway's own port or key, the
model) are read at start and need a restart, which the status report says.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import validate_settings_file

__all__ = ["POLL_S", "Reload", "SettingsWatch"]

#: Seconds between two looks at the settings file.
POLL_S = 0.5


@dataclass(frozen=True)
class Reload:
    """What the last look at the file found."""

    sha256: str | None
    applied: bool
    error: dict[str, Any] | None = None
    at: float = 0.0

    def view(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "applied": self.applied, "error": self.error,
                "at": self.at}


def _read(path: Path) -> tuple[int | None, str | None]:
    try:
        return path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None, None


class SettingsWatch:
    """Keeps the manager in step with the settings file at ``path``."""

    def __init__(self, path: Path, manager: McpManager, *, say: Callable[[str], None],
                 interval: float = POLL_S, wait: float = 30.0) -> None:
        self.path = path
        self.manager = manager
        self.interval = interval
        self.wait = wait
        self._say = say
        self._lock = asyncio.Lock()
        self._mtime, sha = _read(path)
        #: The last version of the file looked at, applied or refused.
        self.last = Reload(sha, applied=True, at=time.time())

    async def check(self) -> Reload:
        """Look at the file now; apply it when it is a new, valid version."""
        async with self._lock:
            mtime, sha = await asyncio.to_thread(_read, self.path)
            if sha is None or sha == self.last.sha256:
                self._mtime = mtime
                return self.last
            self._mtime = mtime
            try:
                settings = await asyncio.to_thread(validate_settings_file, self.path)
            except ConfigError as exc:
                self.last = Reload(sha, applied=False, error=exc.to_dict(), at=time.time())
                errors = "; ".join(f"{e['path']}: {e['message']}"
                                   for e in exc.details.get("errors", []))
                self._say(f"settings change refused, the running MCP servers are kept: "
                          f"{exc.code}: {exc.message}" + (f" ({errors})" if errors else ""))
                return self.last
            # A change outside [mcp], or of comments only, leaves the servers be.
            if settings.mcp != self.manager.settings:
                await self.manager.reconfigure(settings.mcp, wait=self.wait)
                self._say(f"settings change applied ({len(settings.mcp.servers)} MCP "
                          "server(s))")
            self.last = Reload(sha, applied=True, at=time.time())
            return self.last

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            mtime = await asyncio.to_thread(_read_mtime, self.path)
            if mtime != self._mtime:
                await self.check()


def _read_mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
