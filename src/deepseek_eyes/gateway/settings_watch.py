"""Following the settings file's ``[mcp]`` section in a running process, without a restart.

The gateway (``serve``) and ``chat`` both follow the file with this one watch. A change
arrives two ways: ``deepseek-eyes mcp allow|deny|enable|…`` writes the file (one writer at
a time, atomically: :mod:`deepseek_eyes.settings.writer`) and asks the gateway's control API
to look at once; a hand edit is found by looking at the file every :data:`POLL_S` seconds (a
small file read and hashed costs nothing, and no watcher library is needed for one file).

Only a **complete, valid, settled** version is applied:

* **settled**: a version must be seen unchanged by two looks at least one poll apart before
  it is judged. An editor that truncates the file and writes it in place, or a half-written
  ``[[mcp.servers]]`` entry (valid TOML: a bare ``command = "python3"``), is seen once and
  then replaced, never applied. The one exception is a version our own writer wrote (the
  edit commands: the lock file says its SHA-256), which is whole by construction and
  applied at the first look;
* **complete**: an emptied (or deleted) file is refused (``CONFIG_EMPTY``), not read as
  "no servers", which would stop every one of them;
* **valid**: the bytes that were hashed are validated whole, exactly as at start, and then
  ``admit`` (the gateway refuses tools that act on this machine without its key). A refused
  version is said once (``settings change refused, the running MCP servers are kept: CODE:
  …``) and shown in :attr:`SettingsWatch.last`; the running set is kept.

A valid version is applied with :meth:`McpManager.replace` (exposure suspended during the
cleanup, the replacement built) and then waits for its servers to settle
(:meth:`McpManager.wait_applied`) **outside** the watch's lock: a slow or hanging server of
one version never holds the next version back, which replaces it at its first look. The
report says both the version being applied (``applying``) and the one in force
(``applied_sha256``).

Only ``[mcp]`` is applied live; the other sections (the gateway's own port or key, the
model) are read at start and need a restart, which the status report says.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from deepseek_eyes.errors import ConfigError, DeepSeekEyesError
from deepseek_eyes.mcp_host.manager import McpManager
from deepseek_eyes.settings import Settings, validate_settings_text
from deepseek_eyes.settings.writer import last_written

__all__ = ["POLL_S", "Reload", "SettingsWatch"]

#: Seconds between two looks at the settings file.
POLL_S = 0.5

#: Where the version last looked at stands.
State = Literal["applied", "applying", "pending", "refused"]


@dataclass(frozen=True)
class Reload:
    """What the watch knows: the version last looked at and where it stands, the version
    being applied and the one in force (each a SHA-256 of the file's bytes)."""

    sha256: str | None
    state: State
    applied_sha256: str | None
    applying: str | None = None
    error: dict[str, Any] | None = None
    at: float = 0.0

    @property
    def applied(self) -> bool:
        """Whether the version last looked at is the one in force."""
        return self.state == "applied"

    def view(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "state": self.state, "applied": self.applied,
                "applied_sha256": self.applied_sha256, "applying": self.applying,
                "error": self.error, "at": self.at}


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


class SettingsWatch:
    """Keeps the manager in step with the settings file at ``path``.

    ``admit`` judges a valid version before it is applied (it raises a coded error to
    refuse it); ``interval`` is the time between two polls, and the least time between the
    two looks that find a version settled.
    """

    def __init__(self, path: Path, manager: McpManager, *, say: Callable[[str], None],
                 interval: float = POLL_S, wait: float = 30.0,
                 admit: Callable[[Settings], None] | None = None) -> None:
        self.path = path
        self.manager = manager
        self.interval = interval
        self.wait = wait
        self._say = say
        self._admit = admit
        self._lock = asyncio.Lock()
        sha = _sha256(_read(path))
        #: A version seen once and when (monotonic): it applies if the next look finds it.
        self._seen: tuple[str | None, float] | None = None
        self._said: str | None = None  # the refused version already said
        self._settling: asyncio.Task[None] | None = None
        self._build: int | None = None  # the manager's build being applied
        #: The last version of the file looked at, and what became of it.
        self.last = Reload(sha, "applied", applied_sha256=sha, at=time.time())

    # -- looking -------------------------------------------------------------------------
    async def check(self, *, wait: bool = True) -> Reload:
        """Look at the file now: a new version that has settled (or that our writer
        wrote) is applied when valid, refused when not. With ``wait``, return once the
        version being applied has settled (or was replaced by a later one)."""
        async with self._lock:
            await self._look()
            settling = self._settling
        if wait and settling is not None:
            await asyncio.shield(settling)
        return self.last

    async def _look(self) -> None:
        data = await asyncio.to_thread(_read, self.path)
        sha = _sha256(data)
        last = self.last
        if sha == last.sha256 and last.state == "refused":
            return  # said once; the running set is kept
        if sha is not None and sha == last.applying:
            self._seen = None
            if last.state != "applying":  # back to the version being applied
                self.last = replace(last, sha256=sha, state="applying", error=None,
                                    at=time.time())
            return
        if sha is not None and sha == last.applied_sha256 and last.applying is None:
            self._seen = None
            if last.state != "applied":  # back to the version in force
                self.last = replace(last, sha256=sha, state="applied", error=None,
                                    at=time.time())
            return
        ours = sha is not None and sha == await asyncio.to_thread(last_written, self.path)
        now = time.monotonic()
        settled = self._seen is not None and self._seen[0] == sha \
            and now - self._seen[1] >= self.interval * 0.9
        if not (ours or settled):
            if self._seen is None or self._seen[0] != sha:
                self._seen = (sha, now)
                self.last = replace(last, sha256=sha, state="pending", error=None,
                                    at=time.time())
            return
        self._seen = None
        try:
            settings = self._judge(data)
        except DeepSeekEyesError as exc:
            self._refuse(sha, exc)
            return
        if settings.mcp == self.manager.settings:
            # A change outside [mcp], or of comments only, leaves the servers be.
            if last.applying is None:
                self.last = replace(last, sha256=sha, state="applied", applied_sha256=sha,
                                    error=None, at=time.time())
            else:  # the same set as the one being applied: it goes on, under this name
                self.last = replace(last, sha256=sha, state="applying", applying=sha,
                                    error=None, at=time.time())
            return
        await self._apply(sha, settings)

    def _judge(self, data: bytes | None) -> Settings:
        """The settings of a settled version, or the coded reason it is refused."""
        if data is None or not data.strip():
            raise ConfigError(
                f"settings file {self.path} is {'gone' if data is None else 'empty'} (an "
                "editor mid-save, or a mistake); to stop every MCP server, set [mcp] "
                "enabled = false or remove the servers", code="CONFIG_EMPTY",
                details={"path": str(self.path)})
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"settings file {self.path} is not UTF-8: {exc}",
                              code="CONFIG_UNREADABLE",
                              details={"path": str(self.path)}) from exc
        settings = validate_settings_text(text, self.path)
        if self._admit is not None:
            self._admit(settings)
        return settings

    def _refuse(self, sha: str | None, exc: DeepSeekEyesError) -> None:
        self.last = replace(self.last, sha256=sha, state="refused", error=exc.to_dict(),
                            at=time.time())
        if self._said == sha:
            return
        self._said = sha
        errors = "; ".join(f"{e['path']}: {e['message']}"
                           for e in exc.details.get("errors", []))
        self._say(f"settings change refused, the running MCP servers are kept: "
                  f"{exc.code}: {exc.message}" + (f" ({errors})" if errors else ""))

    # -- applying ------------------------------------------------------------------------
    async def _apply(self, sha: str | None, settings: Settings) -> None:
        """Swap the new set in (under the watch's lock: closes are bounded) and leave its
        servers to settle in a task of their own (never under the lock)."""
        build = await self.manager.replace(settings.mcp)
        self._build = build
        self.last = replace(self.last, sha256=sha, state="applying", applying=sha,
                            error=None, at=time.time())
        self._settling = asyncio.create_task(
            self._settle(build, len(settings.mcp.servers)), name="settings-apply")

    async def _settle(self, build: int, count: int) -> None:
        """Once ``build`` settled: the version being applied is the one in force (unless a
        later build replaced it first; its closed servers end this wait early)."""
        live = await self.manager.wait_applied(build, self.wait)
        if not live or self._build != build or self.last.applying is None:
            return
        sha = self.last.applying
        self.last = replace(self.last, applying=None, applied_sha256=sha,
                            state="applied" if self.last.sha256 == sha else self.last.state,
                            at=time.time())
        self._said = None
        self._say(f"settings change applied ({count} MCP server(s))")

    # -- following -----------------------------------------------------------------------
    async def run(self) -> None:
        """Look every :attr:`interval` seconds until cancelled."""
        try:
            while True:
                await asyncio.sleep(self.interval)
                try:
                    await self.check(wait=False)
                except Exception as exc:  # one failed look must not end the following
                    self._say(f"settings watch: the look at {self.path} failed "
                              f"({type(exc).__name__}); the running MCP servers are kept")
        finally:
            if self._settling is not None:
                self._settling.cancel()

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[SettingsWatch]:
        """Run the watch in a task for the block's duration."""
        task = asyncio.create_task(self.run(), name="settings-watch")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
