"""A browser per MCP connection: what ``browser serve`` hands each client.

Every tool call names its owner (:func:`~deepseek_eyes.serving.connections.connection_owner`:
the stdio client, an HTTP session, or the one stateless owner), and each owner gets a
:class:`BrowserService` of its own, so two clients never share tabs, state ids or refs: a
state id of one is unknown, hence stale, to the other.

Bounds: at most ``browser.max_sessions`` services at once (a new owner closes the least
recently used one, as the runtime's browser source does: its next call starts from a fresh
browser, and its old state ids are refused as stale, never mistaken for new ones), and a
service unused for ``browser.session_idle_timeout`` seconds is closed by :meth:`reap`,
which the HTTP server runs; an HTTP client that goes away without saying so is freed that
way.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.settings import BrowserSettings
from deepseek_eyes.store.blobs import BlobStore

__all__ = ["BrowserPool"]


class BrowserPool:
    def __init__(self, settings: BrowserSettings, *, downloads_dir: Path,
                 blobs: BlobStore | None = None, audit: AuditLog | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.downloads_dir = downloads_dir
        self.blobs = blobs
        self.audit = audit
        self.clock = clock
        self._services: OrderedDict[str, tuple[BrowserService, float]] = OrderedDict()
        self._lock = asyncio.Lock()

    def owners(self) -> list[str]:
        """The owners with a browser service now, least recently used first."""
        return list(self._services)

    async def service(self, owner: str) -> BrowserService:
        """``owner``'s service, made on its first call; the least recently used one is
        closed first when ``browser.max_sessions`` are open."""
        async with self._lock:
            found = self._services.pop(owner, None)
            if found is not None:
                self._services[owner] = (found[0], self.clock())
                return found[0]
            evicted: list[BrowserService] = []
            while len(self._services) >= self.settings.max_sessions:
                _, (oldest, _) = self._services.popitem(last=False)
                evicted.append(oldest)
            service = BrowserService(self.settings, downloads_dir=self.downloads_dir,
                                     blobs=self.blobs, audit=self.audit, owner=owner)
            self._services[owner] = (service, self.clock())
        for old in evicted:
            await old.aclose()
        return service

    def touch(self, owner: str) -> None:
        """Mark ``owner``'s service used now (after a call that took long)."""
        found = self._services.get(owner)
        if found is not None:
            self._services[owner] = (found[0], self.clock())

    async def close_idle(self) -> list[str]:
        """Close the services unused for ``browser.session_idle_timeout``; their owners."""
        limit = self.clock() - self.settings.session_idle_timeout
        async with self._lock:
            idle = [owner for owner, (_, used) in self._services.items() if used <= limit]
            closing = [self._services.pop(owner)[0] for owner in idle]
        for service in closing:
            await service.aclose()
        return idle

    async def reap(self, every: float | None = None) -> None:
        """Run :meth:`close_idle` until cancelled (every tenth of the idle timeout, at most
        once a minute)."""
        period = every or min(60.0, self.settings.session_idle_timeout / 10)
        while True:
            await asyncio.sleep(period)
            await self.close_idle()

    async def aclose(self) -> None:
        async with self._lock:
            closing = [service for service, _ in self._services.values()]
            self._services.clear()
        for service in closing:
            await service.aclose()
