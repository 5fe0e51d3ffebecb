"""The MCP server manager: one supervised SDK connection per enabled server.

Each server's connection lives in its own task (the SDK's ``Client`` must be entered and
left in one task). That task connects under a timeout, drains discovery into an immutable
:class:`Catalog` generation, then waits for a ``list_changed`` notification (the
handshake revisions' notification path, or ``Client.listen`` on ``2026-07-28``) or a stop.
The tools plane and the content plane are listed (:mod:`deepseek_eyes.mcp_host.discovery`),
failed and published (:mod:`deepseek_eyes.mcp_host.planes`) apart: a failed refresh of a
plane keeps what it last published, a plane that fails outright leaves the other served,
and a plane whose non-empty listing turns empty is withdrawn — and stays so through further
empty listings — until a separate probe confirms it. A dropped connection reconnects with
backoff, and a connection that stayed ready for ``stable_s`` starts the backoff over: a server that
drops once a day is retried at once, one that dies on arrival ever more slowly. Liveness
(:mod:`deepseek_eyes.mcp_host.liveness`) asks each server only what its transport and revision
offer, never while a request is in flight, and calls a server gone only when it really is.

Stop and reconfigure suspend all exposure *before* awaiting any close, and republish only
after the new set has settled. A close is bounded, and one that did not finish blocks that
server's probes and replacements until the same handle finishes
(:mod:`deepseek_eyes.mcp_host.closing`). Every dispatch names the generation it was offered under
and is refused (``MCP_GENERATION_STALE``) when the live one differs, before and after the
call, so a stale definition never runs against — or returns for — a replacement.

``start(only=...)`` starts a subset (the CLI starts only what a command needs; see
:mod:`deepseek_eyes.mcp_host.running`); the others stay ``stopped``. Every error kept for
display is scrubbed by the server's :class:`~deepseek_eyes.mcp_host.redact.Redactor` first, and a
stdio server's stderr goes to its log file when the manager is given ``log_dir``. Status
changes are published to subscribers (:mod:`deepseek_eyes.mcp_host.events`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from deepseek_eyes.errors import ConfigError, McpCatalogError, McpError, McpTimeoutError
from deepseek_eyes.mcp_host.closing import CLOSE_TIMEOUT_S, CloseTracker
from deepseek_eyes.mcp_host.discovery import (
    ContentPlane,
    ToolsPlane,
    content_wanted,
    list_planes,
)
from deepseek_eyes.mcp_host.events import StatusEvents
from deepseek_eyes.mcp_host.faults import invalid_response
from deepseek_eyes.mcp_host.redact import Redactor, redactor_for
from deepseek_eyes.mcp_host.state import ServerState
from deepseek_eyes.mcp_host.stderr_log import StderrLog
from deepseek_eyes.settings import McpServerSettings, McpSettings

# The SDK (~55 MiB resident, issue 41) loads with the connection code, which loads with the
# first connection: a gateway that follows its settings with no MCP server never loads it,
# and the first server registered live loads it then.
if TYPE_CHECKING:
    from mcp import Client

    from deepseek_eyes.mcp_host.connection import Connector
    from deepseek_eyes.mcp_host.liveness import StreamWatch
    from deepseek_eyes.mcp_host.oauth import OAuthHandle

__all__ = ["McpManager", "ServerState"]

BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
#: Seconds between liveness checks of a connected server that is otherwise idle.
HEARTBEAT_S = 15.0
#: Seconds a connection must stay ready for its loss to restart the backoff from the start.
STABLE_S = 30.0
#: Handshakes in progress at once (each spawns a process or opens a session).
CONNECT_CONCURRENCY = 8

_content_wanted = content_wanted
#: The fields of a server whose change needs no new connection (see :meth:`reconfigure`).
_POLICY_FIELDS: set[str] = {"allow", "deny", "ask", "risk_policy"}


class McpManager:
    """Lifecycle and catalogs; exposure and dispatch live in :mod:`deepseek_eyes.mcp_host.host`."""

    def __init__(
        self,
        settings: McpSettings,
        *,
        connector: Connector | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        stable_s: float = STABLE_S,
        backoff_s: Sequence[float] = BACKOFF_S,
        log_dir: Path | None = None,
        close_timeout: float = CLOSE_TIMEOUT_S,
        connect_concurrency: int = CONNECT_CONCURRENCY,
    ) -> None:
        self.settings = settings
        self._connector = connector
        #: Where stdio servers' stderr logs go; ``None`` leaves a child our stderr.
        self.log_dir = log_dir
        self._heartbeat_s = heartbeat_s
        self._stable_s = stable_s
        self._backoff_s = tuple(backoff_s) or BACKOFF_S
        self.servers: dict[str, ServerState] = {}
        self.suspended = False
        self._lock = asyncio.Lock()
        #: How many times :meth:`replace` rebuilt the running set.
        self._builds = 0
        self._connect_slots = asyncio.Semaphore(max(1, connect_concurrency))
        #: Each server's connection whose close failed (:mod:`~deepseek_eyes.mcp_host.closing`).
        self.closes = CloseTracker(close_timeout)
        self.events = StatusEvents(self._event_view, lambda: list(self.servers))
        self._discover_timeout = settings.discover_timeout

    def _connecting(self) -> None:
        """Before a connection: the SDK's ``server/discover`` bound is this manager's (a
        process setting, applied here rather than at construction so that a manager with no
        server never loads the SDK)."""
        from deepseek_eyes.mcp_host.connection import set_discover_timeout

        set_discover_timeout(self._discover_timeout)

    def _event_view(self, server_id: str) -> dict[str, Any] | None:
        state = self.servers.get(server_id)
        return state.view() if state is not None else None

    def _state(self, settings: McpServerSettings, **fields: Any) -> ServerState:
        """A new state wired to the events, with its stderr log when there is a log dir."""
        state = ServerState(settings, **fields)
        if state.stderr is None and self.log_dir is not None and settings.transport == "stdio":
            state.stderr = StderrLog(self.log_dir / f"{settings.id}.stderr.log")
        state.on_change = self.events.changed
        return state

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, *, wait: float | None = 30.0,
                    only: Collection[str] | None = None) -> None:
        """Start the enabled servers (``only`` these, when given) and wait until each has
        settled, at most ``wait`` seconds; the rest are ``stopped`` (or ``disabled``)."""
        async with self._lock:
            await self._retry_closes(self.settings)
            self._build(self.settings, only)
        if wait:
            await self.wait_settled(wait)

    def _build(self, settings: McpSettings, only: Collection[str] | None = None) -> None:
        self.settings = settings
        self.servers = {s.id: self._state(s) for s in settings.servers}
        for state in self.servers.values():
            s = state.settings
            if not (settings.enabled and s.enabled and (s.tools_enabled or _content_wanted(s))):
                state.status = state.tools_status = "disabled"
                state.settled.set()
                self.events.changed(s.id)
                continue
            if only is not None and s.id not in only:
                state.settled.set()  # left stopped: not needed by this use
                continue
            if self.closes.pending(s.id):
                # Never a replacement beside a connection that has not finished closing.
                state.fail(self.closes.refusal(s.id))
                state.status = "failed"
                state.settled.set()
                continue
            if not s.tools_enabled:
                state.tools_status = "disabled"
            state.content_status = "pending" if _content_wanted(s) else "disabled"
            state.mode = "legacy" if s.protocol == "legacy" else s.protocol
            state.task = asyncio.create_task(self._run(state), name=f"mcp:{s.id}")

    async def wait_settled(self, timeout: float) -> None:
        """Wait until every started server has connected and listed, or failed."""
        with anyio.move_on_after(timeout):
            for state in list(self.servers.values()):
                await state.settled.wait()

    async def stop(self) -> None:
        """Suspend exposure first, then close every connection; ends with nothing exposed."""
        self.suspended = True
        async with self._lock:
            await self._close_all()
        self.servers = {}

    async def reconfigure(self, settings: McpSettings, *, wait: float = 30.0) -> None:
        """Replace the running set with ``settings`` (already validated) and wait, at most
        ``wait`` seconds, until the replacement settled: :meth:`replace`, then
        :meth:`wait_applied`."""
        build = await self.replace(settings)
        await self.wait_applied(build, wait)

    async def replace(self, settings: McpSettings) -> int:
        """Swap in ``settings`` (already validated) without waiting for any connection;
        returns the number of the build to hand :meth:`wait_applied`.

        Exposure is suspended before any close is awaited and republished only once the
        replacement has settled (:meth:`wait_applied`). A change of exposure policy alone
        (``allow``, ``deny``, ``ask``, ``risk_policy`` of the same servers) keeps every
        connection and swaps the policy in one step, with no await between (nothing sees a
        mix of old and new): the catalogs and their generations stay, so a turn in flight
        keeps the offer it was given and its calls are still judged by the policy in force
        when they run. The lock is held for the closes (each bounded) and the build, never across a
        connection's handshake: a later replacement need not wait for this one's servers.
        """
        async with self._lock:  # never beside a restart's replacement of a state
            if self._policy_only(settings):
                self.settings = settings
                for s in settings.servers:
                    self.servers[s.id].settings = s
                return self._builds
            self.suspended = True
            await self._close_all()
            self._discover_timeout = settings.discover_timeout
            await self._retry_closes(settings)
            self._build(settings)
            self._builds += 1
            return self._builds

    async def wait_applied(self, build: int, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until build ``build``'s servers settled, or
        a later build replaced it (its servers are closed then, which settles them);
        exposure resumes when ``build`` is still the live one. True when it is."""
        if build == self._builds:
            await self.wait_settled(timeout)
        if build != self._builds:
            return False
        self.suspended = False
        return True

    def _policy_only(self, settings: McpSettings) -> bool:
        """Whether ``settings`` differs from the running set in exposure policy alone (the
        same settings again is a request to rebuild: not policy alone)."""
        if not self.servers or [s.id for s in settings.servers] != list(self.servers):
            return False
        if settings == self.settings:
            return False
        if settings.model_dump(exclude={"servers"}) != self.settings.model_dump(
                exclude={"servers"}):
            return False
        return all(
            s.model_dump(exclude=_POLICY_FIELDS)
            == self.servers[s.id].settings.model_dump(exclude=_POLICY_FIELDS)
            for s in settings.servers)

    async def restart(self, server_id: str, *, wait: float = 30.0) -> None:
        """Close the server's connection and open a new one.

        Raises:
            McpError: ``MCP_SERVER_UNKNOWN``; ``MCP_CLOSE_PENDING`` when this close, or an
                earlier one still pending, has not finished (nothing new is opened).
        """
        state = self.require(server_id)
        async with self._lock:
            await self.closes.require_closed(server_id)
            if not await self._close(state):
                raise self.closes.refusal(server_id)
            # The OAuth provider (and its in-memory token) belongs to the server, not to one
            # connection: a restart keeps it.
            fresh = self._state(state.settings, mode=state.mode, generation=state.generation,
                                oauth=state.oauth, stderr=state.stderr)
            self.servers[server_id] = fresh
            if state.status == "disabled":
                fresh.status = fresh.tools_status = "disabled"
                fresh.settled.set()
            else:
                fresh.mode = fresh.mode if state.task is not None else (
                    "legacy" if fresh.settings.protocol == "legacy" else fresh.settings.protocol)
                fresh.content_status = (
                    "pending" if _content_wanted(fresh.settings) else "disabled"
                )
                fresh.task = asyncio.create_task(self._run(fresh), name=f"mcp:{server_id}")
        with anyio.move_on_after(wait):
            await fresh.settled.wait()

    async def _close_all(self) -> None:
        """Revoke every catalog, then close every connection at once: closes are waits (a
        stdio child given its grace period), so one at a time cost their sum."""
        for state in self.servers.values():
            state.catalog = None  # revoke before awaiting any close
        await asyncio.gather(*(self._close(state) for state in list(self.servers.values())))

    async def _close(self, state: ServerState) -> bool:
        """Revoke, then close under the close bound; False when the close failed (its
        handle is then pending in :attr:`closes`)."""
        state.catalog = None
        state.stopping.set()
        closed = await self.closes.close(state.settings.id, state.task)
        state.status = "stopped"
        if not closed:
            state.fail(self.closes.refusal(state.settings.id))
        state.settled.set()  # closed is final: whoever waits for it to settle may go on
        return closed

    async def _retry_closes(self, settings: McpSettings) -> None:
        """Retry each pending close of a server about to be started (see :meth:`_build`)."""
        for s in settings.servers:
            with contextlib.suppress(McpError):
                await self.closes.require_closed(s.id)

    def _configured(self, server_id: str) -> ServerState:
        """The live state, or a detached one for a configured server that was not started."""
        state = self.servers.get(server_id)
        if state is not None:
            return state
        for s in self.settings.servers:
            if s.id == server_id:
                return self._state(s, mode="legacy" if s.protocol == "legacy" else s.protocol)
        return self.require(server_id)

    def require(self, server_id: str) -> ServerState:
        state = self.servers.get(server_id)
        if state is None:
            raise McpError(f"no MCP server {server_id!r}", code="MCP_SERVER_UNKNOWN",
                           details={"server": server_id})
        return state

    # -- one server's supervised connection --------------------------------------------------
    def _oauth(self, state: ServerState) -> OAuthHandle | None:
        s = state.settings
        if s.oauth is not None and s.url is not None and state.oauth is None:
            from deepseek_eyes.mcp_host.oauth import oauth_handle

            state.oauth = oauth_handle(s.url, s.oauth)
        return state.oauth

    async def _run(self, state: ServerState) -> None:
        from deepseek_eyes.mcp_host.connection import check_credentials, map_error

        try:
            check_credentials(state.settings)
        except ConfigError as exc:
            # A missing variable will not appear by retrying: fail once, connect nothing.
            state.fail(exc)
            state.status = "failed"
            state.tools_status = "failed" if state.settings.tools_enabled else "disabled"
            if _content_wanted(state.settings):
                state.content_status = "failed"
            state.settled.set()
            return
        state.redactor = redactor_for(state.settings)
        if state.stderr is not None:
            state.stderr.redactor = state.redactor
        attempt = 0
        while not state.stopping.is_set():
            try:
                await self._session(state)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                state.fail(map_error(exc, connecting=state.status == "connecting"))
                state.status, state.client = "failed", None
                state.settled.set()
            if state.stopping.is_set():
                return
            ready = state.ready_since
            if ready is not None and time.monotonic() - ready >= self._stable_s:
                attempt = 0  # it was healthy: this loss is news, not the same failure again
            delay = self._backoff_s[min(attempt, len(self._backoff_s) - 1)]
            attempt += 1
            state.retry_delay = delay
            with anyio.move_on_after(delay):
                await state.stopping.wait()
            state.retry_delay = None

    async def _session(self, state: ServerState) -> None:
        from deepseek_eyes.mcp_host.connection import build_client, learn_capabilities
        from deepseek_eyes.mcp_host.liveness import StreamWatch

        self._connecting()
        s = state.settings
        state.status = "connecting"
        state.ready_since = None

        async def on_message(message: Any) -> None:
            if str(getattr(message, "method", "")).endswith("/list_changed"):
                state.refresh.set()

        watch = StreamWatch(on_end=state.activity.wake.set, on_fault=state.faults.note)
        # One of at most ``connect_concurrency`` handshakes at a time (a slot is held until
        # connected, not for the connection's life); the deadline starts with the slot.
        await self._connect_slots.acquire()
        held = True

        def free_slot() -> None:
            nonlocal held
            if held:
                held = False
                self._connect_slots.release()

        client = build_client(s, mode=state.mode, oauth=self._oauth(state),
                              message_handler=on_message, connector=self._connector,
                              watch=watch, stderr=state.stderr, wire=state.wire)
        started = time.perf_counter()
        # The connect deadline covers entering the client only; it is lifted once connected
        # (the SDK's scopes must be left in the task and order they were entered). Garbage
        # on the stream while the handshake waits fails it at once, not at the deadline.
        scope = anyio.CancelScope(deadline=anyio.current_time() + s.connect_timeout)
        state.faults.watch(scope)
        garbled = False
        try:
            with scope:
                async with client:
                    await learn_capabilities(client, state.mode)
                    scope.deadline = math.inf
                    free_slot()
                    garbled = state.faults.release(scope)
                    await self._serve(state, client, started, watch)
        finally:
            free_slot()
            garbled = state.faults.release(scope) or garbled
        if garbled and scope.cancelled_caught:
            raise invalid_response()
        if scope.cancelled_caught:
            raise McpTimeoutError("the server did not connect in time")

    async def _serve(self, state: ServerState, client: Client, started: float,
                     watch: StreamWatch) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        from deepseek_eyes.mcp_host.liveness import Heartbeat

        s = state.settings
        try:
            state.protocol = client.protocol_version
            if s.protocol == "auto" and state.protocol in HANDSHAKE_PROTOCOL_VERSIONS:
                state.mode = "legacy"  # remembered: reconnects skip the discover probe
            state.latency_ms = round((time.perf_counter() - started) * 1000, 2)
            state.client = client
            await self._discover(state, client)
            state.status = "ready"
            state.ready_since = time.monotonic()
            state.settled.set()
            heartbeat = Heartbeat(client, state.activity, interval=self._heartbeat_s,
                                  timeout=s.connect_timeout, watch=watch)
            async with anyio.create_task_group() as tg:
                if state.protocol not in HANDSHAKE_PROTOCOL_VERSIONS:
                    tg.start_soon(self._listen, state, client)
                tg.start_soon(heartbeat.run)
                while not state.stopping.is_set():
                    await state.refresh.wait()
                    state.refresh.clear()
                    await self._discover(state, client)
                tg.cancel_scope.cancel()
        finally:
            state.client = None

    async def _listen(self, state: ServerState, client: Client) -> None:
        caps = client.server_capabilities
        tools = bool(caps.tools and caps.tools.list_changed)
        resources = bool(caps.resources and caps.resources.list_changed)
        prompts = bool(caps.prompts and caps.prompts.list_changed)
        if not (tools or resources or prompts):
            return
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=tools, resources_list_changed=resources,
                                     prompts_list_changed=prompts) as sub:
                async for _event in sub:
                    state.refresh.set()

    async def _discover(self, state: ServerState, client: Client) -> None:
        """List both planes and publish the next generation, each plane on its own.

        Raises:
            Exception: only when nothing was ever published and no plane could be listed
                for a reason of the connection (it reconnects then).
        """
        from deepseek_eyes.mcp_host.planes import apply_listing

        listing = await list_planes(state.settings, client, timeout=state.settings.connect_timeout,
                                    activity=state.activity)
        if not listing.listed_any and state.catalog is None:
            wire = [e for e in listing.errors if not isinstance(e, McpCatalogError | McpError)]
            if wire:
                apply_listing(state, listing)  # the planes say failed while it reconnects
                raise wire[0]
        apply_listing(state, listing)

    # -- probe ---------------------------------------------------------------------------------
    async def probe(self, server_id: str) -> dict[str, Any]:
        """Connect, list and close a *separate* connection; the live one is untouched.

        A probe that confirms a withdrawn (now empty) catalog publishes it; one that finds
        entries asks the live connection to refresh. A server that is configured but not
        started (the CLI's ``mcp probe``) is probed on its own.

        Raises:
            ConfigError: ``CONFIG_ENV_MISSING``, before any connection.
            McpError: ``MCP_SERVER_UNKNOWN``, ``MCP_SERVER_DISABLED``, ``MCP_CLOSE_PENDING``
                (an earlier connection of it has not finished closing) or a connect code.
        """
        from deepseek_eyes.mcp_host.connection import (
            build_client,
            check_credentials,
            learn_capabilities,
            map_error,
        )
        from deepseek_eyes.mcp_host.planes import confirm_by_probe

        state = self._configured(server_id)
        s = state.settings
        if not (self.settings.enabled and s.enabled):
            raise McpError(f"{server_id} is disabled in the settings", code="MCP_SERVER_DISABLED",
                           details={"server": server_id})
        check_credentials(s)
        await self.closes.require_closed(server_id)
        redactor = redactor_for(s)
        if state.stderr is not None:
            state.stderr.redactor = redactor
        started = time.perf_counter()
        self._connecting()
        client = build_client(s, mode=state.mode, oauth=self._oauth(state),
                              message_handler=None, connector=self._connector,
                              stderr=state.stderr)
        try:
            with anyio.fail_after(s.connect_timeout):
                async with client:
                    await learn_capabilities(client, state.mode)
                    listing = await list_planes(s, client, timeout=s.connect_timeout)
                    protocol = client.protocol_version
        except Exception as exc:
            raise redactor.scrub_error(map_error(exc, connecting=True)) from None
        if not listing.listed_any and listing.errors:
            raise redactor.scrub_error(map_error(listing.errors[0])) from None
        confirm_by_probe(state, listing)
        tools = listing.tools or ToolsPlane()
        content = listing.content or ContentPlane()
        return {
            "id": s.id, "ok": True, "protocol": protocol,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
            "tools": [t.name for t in tools.tools],
            "resources": len(content.resources), "prompts": len(content.prompts),
            "instructions": listing.instructions is not None,
            "tools_error": _code(listing.tools_error, redactor),
            "content_error": _code(listing.content_error, redactor),
        }

    def status(self) -> list[dict[str, Any]]:
        return [state.view() for state in self.servers.values()]

    def catalogs(self) -> Mapping[str, ServerState]:
        return self.servers


def _code(exc: BaseException | None, redactor: Redactor) -> str | None:
    from deepseek_eyes.mcp_host.connection import map_error

    return None if exc is None else redactor.scrub_error(map_error(exc)).code
