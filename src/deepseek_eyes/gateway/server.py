"""Running the gateway: resolve the key, refuse unsafe binds, serve with uvicorn.

It runs on uvloop and parses HTTP with httptools when they are installed (dependencies on
Linux and macOS; ``serving.loop`` picks the loop, since uvicorn only does when it makes the
loop itself), which keeps the gateway's own overhead per turn small. The OCR models are
not loaded until the first image arrives, so an idle gateway stays small.

The gateway's own key follows the rule every server's token does (a weak one is
``GATEWAY_KEY_WEAK``); with tools that act on this machine (the terminal, the browser, the
desktop, MCP tools that are not read-only) there must be one (``GATEWAY_KEY_REQUIRED``), and
an open loopback gateway says at start what that risks (``GATEWAY_OPEN``).

A missing upstream key does not stop the server (``/healthz`` and ``/v1/models`` may still
be useful, and the key can be exported before the next start), but it is said on stderr at
start, because otherwise the first sign of it is every chat request failing; ``/readyz``
fails with ``LLM_CREDENTIAL_MISSING`` meanwhile.

Where it listens is said once the socket is bound (the port may have been 0): by default as
a line on stderr, or through ``announce`` for a caller with its own format (``serve --json``).

With the terminal among ``[runtime] tool_sources``, the terminal's approval console is
served beside the gateway, on ``[terminal] host:port``, for the same in-process terminal: a
person logs in with the one-time link printed on stderr (the console's own credential), and
a plan the model wants to run that needs approval waits there
(``runtime.approval_timeout``) and runs only if that person approves it. Without a terminal
token there is no console, so nobody can approve, and such plans are not run.

With traces configured (``[telemetry]`` or the standard ``OTEL_EXPORTER_OTLP_*``
variables, :mod:`deepseek_eyes.telemetry.setup`), each request is a server span whose
children are its turn's chat calls, vision attempts, MCP calls and terminal executions;
they are exported over OTLP/HTTP off the request path, and flushed at the stop.

SIGTERM and SIGINT stop it through :mod:`deepseek_eyes.gateway.drain`: ``/readyz`` fails
at once (for ``gateway.drain_delay`` seconds the rest is still served, when a balancer
probes it), then no new request is taken, running ones have ``gateway.drain_timeout``
seconds, a second signal ends them at once (each in our shape: an SSE error event and
``[DONE]``, or a 503), then the runtime and the data directory close and the process exits
0. The signals are the drain's from the start of :func:`serve` to its end; uvicorn's own
handlers are never installed (they would wait on running requests without a bound and
raise the signal again at exit).

On the gateway's own port, when it binds loopback, the web console is served at
``/console/`` (:mod:`deepseek_eyes.console`): its own one-time login link is printed on
stderr once the port is known; plans that need approval wait there too (with or without a
terminal token); its MCP edits are applied through the settings watch before they answer.
The console's paths never reach the gateway's routes, key or rules, nor the reverse.

Beside it, on a loopback port of its own, runs the control API (:mod:`.control`) through
which ``deepseek-eyes mcp …`` steers the running MCP servers, and the settings file is
watched (:mod:`.settings_watch`) so that an edit of ``[mcp]`` applies without a restart:
the MCP manager runs even when no server was enabled at start, so the first one registered
becomes live. A gateway serving without a key refuses a change that would allow MCP tools
acting on this machine (``GATEWAY_KEY_REQUIRED``, the running set kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import uvicorn

from deepseek_eyes.errors import ConfigError, DeepSeekEyesError, GatewayError
from deepseek_eyes.gateway.app import check_bind, create_app
from deepseek_eyes.gateway.control import ControlFile, control_app
from deepseek_eyes.gateway.drain import CUT_GRACE_S, Drain
from deepseek_eyes.gateway.settings_watch import SettingsWatch
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.approval import ConsoleWait
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.serving import loop
from deepseek_eyes.serving.console_login import login_url
from deepseek_eyes.serving.tokens import TOKEN_COMMAND, check_token_strength
from deepseek_eyes.settings import Settings
from deepseek_eyes.telemetry import setup as tracing

__all__ = ["Announce", "check_key", "gateway_key", "serve", "server_side_tools"]


#: Told the bound host and port once the gateway listens.
Announce = Callable[[str, int], None]


def _say_listening(host: str, port: int) -> None:
    print(f"deepseek-eyes gateway listening on http://{host}:{port}/v1",
          file=sys.stderr, flush=True)


def _say(sentence: str) -> None:
    print(f"deepseek-eyes gateway: {sentence}", file=sys.stderr, flush=True)


#: Once the drain settled, how long uvicorn's request tasks have to end (their answers are
#: sent: what is left is writing the last bytes), and then to unwind once cancelled.
_TASKS_WAIT_S = 1.0


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the drain owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class _Server(_QuietServer):
    """Says where it listens once it does (the port may have been 0), and stops as the
    drain says: at its begin, no new connection or request; running requests until it
    settles; what still runs then is cancelled and awaited, so no task is left pending."""

    def __init__(self, config: uvicorn.Config, announce: Announce, drain: Drain) -> None:
        super().__init__(config)
        self.announce = announce
        self.drain = drain
        drain.on_begin(self._stop_taking_work)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.servers:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.announce(host, port)
        if self.drain.draining:  # a signal came while it started
            self._stop_taking_work()

    def _stop_taking_work(self) -> None:
        """Close the listening sockets now, not at uvicorn's next tick, and ask every
        connection to close once its response is sent (an idle one closes now)."""
        self.should_exit = True
        for server in getattr(self, "servers", ()):
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._stop_taking_work()
        for sock in sockets or ():  # sockets handed in (none here), as uvicorn closes them
            sock.close()
        await self.drain.settle()
        tasks = set(self.server_state.tasks)
        if tasks:  # the last bytes of answers sent; or a client that reads nothing
            _, left = await asyncio.wait(tasks, timeout=_TASKS_WAIT_S)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=_TASKS_WAIT_S)
        for connection in list(self.server_state.connections):
            connection.shutdown()
        await self.lifespan.shutdown()


class _ControlServer(_QuietServer):
    """The control API's server: writes the control file once its port is known."""

    def __init__(self, config: uvicorn.Config, file: ControlFile,
                 settings_path: Path | None) -> None:
        super().__init__(config)
        self.file = file
        self.settings_path = settings_path
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
            if self.started and self.servers:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                self.file.write(host, port, self.settings_path)
        finally:
            self.ready.set()


def _keyed_tools(running: Settings, key: str | None) -> Callable[[Settings], None]:
    """The settings watch's judge: a gateway serving without a key takes no MCP server
    whose tools act on this machine (``check_key`` at start would have refused them)."""
    def admit(new: Settings) -> None:
        if key is None and "mcp" in server_side_tools(running.model_copy(
                update={"mcp": new.mcp})):
            raise GatewayError(
                "the change allows MCP tools that act on this machine, and this gateway "
                "serves without a key: set DEEPSEEK_EYES_GATEWAY_KEY (or gateway.api_key; "
                f"`{TOKEN_COMMAND}` makes one) and restart it",
                code="GATEWAY_KEY_REQUIRED", details={"tool_sources": ["mcp"]})
    return admit


def _settings_watch(runtime: Runtime, settings_path: Path | None,
                    key: str | None) -> SettingsWatch | None:
    """The watch of the settings file (None without MCP or without a file to follow)."""
    manager = runtime.mcp_manager
    if manager is None or settings_path is None:
        return None
    return SettingsWatch(settings_path, manager, say=_say,
                         admit=_keyed_tools(runtime.settings, key))


async def _run_control(runtime: Runtime, home: DataHome, settings_path: Path | None,
                       watch: SettingsWatch | None) -> Callable[[], Awaitable[None]]:
    """Start the control API and the settings watch; returns the coroutine function that
    stops both and removes the control file."""
    manager = runtime.mcp_manager
    file = ControlFile(home.root)
    config = uvicorn.Config(
        control_app(manager, watch, file.token), host="127.0.0.1", port=0,
        log_level="warning", access_log=False, lifespan="off", server_header=False,
        timeout_graceful_shutdown=1,  # a `mcp watch` stream ends with the gateway
    )
    server = _ControlServer(config, file, settings_path)
    tasks = [asyncio.create_task(server.serve(), name="control-api")]
    # The control file exists before the gateway says it listens: whoever starts `serve`
    # and then runs an `mcp` command reaches it.
    ready = asyncio.create_task(server.ready.wait())
    await asyncio.wait([ready, tasks[0]], return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if watch is not None:
        tasks.append(asyncio.create_task(watch.run(), name="settings-watch"))

    async def stop() -> None:
        server.should_exit = True
        if len(tasks) > 1:
            tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        file.remove()

    return stop


def _approval_console(
    settings: Settings, runtime: Runtime, *, web_console: bool = False
) -> tuple[uvicorn.Server | None, ConsoleWait | None]:
    """The terminal console beside the gateway and the approver that waits on it; both
    None without the terminal source. Without a terminal token there is no terminal
    console (said on stderr); plans then wait in the web console when it is served
    (``web_console``), else they cannot run."""
    service = runtime.terminal
    if service is None:
        return None, None
    from deepseek_eyes.terminal.config import resolve_token
    from deepseek_eyes.terminal.transport.http import HttpOptions, build_console_app

    term = settings.terminal
    try:
        token = resolve_token(settings)
    except DeepSeekEyesError as exc:
        if web_console:
            return None, _console_wait(settings, runtime, "the web console's Approvals")
        print(f"deepseek-eyes gateway warning {exc.code}: {exc.message}; no approval console, "
              "so plans that need approval will not run", file=sys.stderr, flush=True)
        return None, None
    from deepseek_eyes.terminal.transport.console_login import ConsoleLogins

    options = HttpOptions.from_settings(term, token)
    where = f"http://{term.host}:{term.port}/console/"

    def show_code(code: str) -> None:  # the person's own login, never the terminal token
        print(f"deepseek-eyes gateway: terminal console login (one use): "
              f"{login_url(where, code)}", file=sys.stderr, flush=True)

    logins = ConsoleLogins(show_code)
    config = uvicorn.Config(
        build_console_app(service, options, logins=logins), host=term.host, port=term.port,
        log_level="warning", access_log=False, lifespan="off", server_header=False,
        timeout_graceful_shutdown=math.ceil(CUT_GRACE_S),  # stopped after the gateway drained
    )
    logins.issue()
    return _QuietServer(config), _console_wait(settings, runtime, where)


def _console_wait(settings: Settings, runtime: Runtime, where: str) -> ConsoleWait:
    """The approver a turn waits on: a plan's state, as a console decides it."""
    service = runtime.terminal
    assert service is not None

    def notice(plan: Mapping[str, Any]) -> None:
        print(f"deepseek-eyes gateway: plan {plan.get('plan_id')} waits for approval at "
              f"{where}", file=sys.stderr, flush=True)

    return ConsoleWait(lambda sid, pid: service.get_plan(sid, pid).state,
                       timeout=settings.runtime.approval_timeout, notice=notice)


def _web_console(runtime: Runtime, home: DataHome, settings_path: Path | None,
                 watch: SettingsWatch | None, bind_host: str,
                 drain: Drain) -> tuple[Any, Any] | None:
    """The web console's app and logins for this gateway, or None when the gateway binds
    beyond loopback (the console is loopback only; said on stderr)."""
    from deepseek_eyes.console.app import WebConsoleLogins, console_app, gateway_key_login
    from deepseek_eyes.console.control import ConsoleParts
    from deepseek_eyes.serving.security import allowed_hosts_for, loopback_hosts

    if allowed_hosts_for(bind_host) != loopback_hosts():
        _say(f"no web console: it is served on loopback only, and this gateway binds "
             f"{bind_host}; run `deepseek-eyes console` on this machine instead")
        return None
    llm = runtime.settings.llm
    parts = ConsoleParts(home, settings_path, terminal=runtime.terminal,
                         mcp_manager=runtime.mcp_manager, mcp_host=runtime.mcp_host,
                         reload=None if watch is None else watch.check, actor="gateway",
                         sight=runtime.sight, router=runtime.bridge.router,
                         models=tuple(dict.fromkeys(
                             [*([llm.model] if llm.model else []), *(m.id for m in llm.models)])))
    drain.on_begin(parts.stopping.set)  # its live streams end when the stop begins
    where: list[str] = []

    def show_code(code: str) -> None:  # the person's own login, never the gateway key
        if where:
            _say(f"web console login (one use): {login_url(where[0], code)}")

    # The gateway key logs in too, bound to its client's scope (its own conversations).
    logins = WebConsoleLogins(show_code, key_scope=gateway_key_login(
        gateway_key(runtime.settings)))
    return console_app(parts, logins), (logins, where)


def gateway_key(settings: Settings) -> str | None:
    """The resolved bearer key, or None when its variable is unset (open on loopback)."""
    ref = settings.gateway.api_key
    if ref is None:
        return None
    try:
        return ref.resolve()
    except ConfigError:
        return None


def server_side_tools(settings: Settings) -> list[str]:
    """The tool sources that act on this machine or beyond it for whoever calls the
    gateway: the terminal, the browser, the desktop, and MCP servers that may call tools
    that are not read-only."""
    found: list[str] = [name for name in settings.runtime.tool_sources
                        if name in ("terminal", "browser", "desktop")]
    mcp = settings.mcp
    if "mcp" in settings.runtime.tool_sources and mcp.enabled and any(
            s.enabled and s.allow.tools and s.risk_policy != "read-only" for s in mcp.servers):
        found.append("mcp")
    return found


def check_key(settings: Settings, key: str | None) -> str | None:
    """What serving with ``key`` risks, said as a warning (None: nothing to say).

    Raises:
        GatewayError: ``GATEWAY_KEY_WEAK`` for a key a guesser could find;
            ``GATEWAY_KEY_REQUIRED`` for no key with server-side tools.
    """
    if key is not None:
        check_token_strength(key, error=GatewayError, prefix="GATEWAY", code="GATEWAY_KEY_WEAK")
        return None
    tools = server_side_tools(settings)
    if tools:
        raise GatewayError(
            f"the gateway offers tools that act on this machine ({', '.join(tools)}); it "
            "needs a key so that only your clients can call them: set "
            f"DEEPSEEK_EYES_GATEWAY_KEY (or gateway.api_key); `{TOKEN_COMMAND}` makes one",
            code="GATEWAY_KEY_REQUIRED", details={"tool_sources": tools},
        )
    return ("no gateway key: any program on this machine can spend your upstream key "
            "through it (web pages are refused by the Host, Origin and Content-Type checks); "
            f"set DEEPSEEK_EYES_GATEWAY_KEY (`{TOKEN_COMMAND}` makes one)")


def serve(settings: Settings, *, host: str | None = None, port: int | None = None,
          announce: Announce | None = None, settings_path: Path | None = None) -> None:
    """Serve until interrupted; ``announce`` (default: a line on stderr) is told where it
    listens once it does. ``settings_path``, the file ``settings`` came from, is watched
    and named in the control file, so that ``mcp`` commands on it reach this gateway.

    Raises:
        GatewayError: ``GATEWAY_UNSAFE_BIND`` for a non-loopback host without a key,
            ``GATEWAY_KEY_WEAK`` and ``GATEWAY_KEY_REQUIRED`` (:func:`check_key`).
    """
    bind_host = host or settings.gateway.host
    bind_port = settings.gateway.port if port is None else port
    key = gateway_key(settings)
    check_bind(bind_host, key)
    warning = check_key(settings, key)
    if warning is not None:
        print(f"deepseek-eyes gateway warning GATEWAY_OPEN: {warning}", file=sys.stderr,
              flush=True)

    async def main() -> None:
        drain = Drain(settings.gateway.drain_timeout, delay=settings.gateway.drain_delay,
                      notice=_say)
        telemetry = settings.telemetry
        traced = tracing.start(tracing.TraceSettings(
            enabled=telemetry.enabled, endpoint=telemetry.endpoint,
            service_name=telemetry.service_name, sample_ratio=telemetry.sample_ratio))
        try:
            with drain.signals():
                await _serve(drain)
        finally:
            if traced:  # what is batched goes out, bounded by the export timeout
                await asyncio.to_thread(tracing.stop)

    async def _serve(drain: Drain) -> None:
        home = DataHome.open(settings)
        runtime = Runtime(settings, home)
        missing = runtime.credential_error
        if missing is not None:
            print(f"deepseek-eyes gateway warning {missing.code}: {missing.message}; "
                  "chat completions will fail until it is set",
                  file=sys.stderr, flush=True)
        try:
            # With a settings file to follow, MCP is ready for servers registered later.
            await runtime.start(follow=settings_path is not None)
            if drain.draining:  # stopped while it started: nothing to serve
                return
            watch = _settings_watch(runtime, settings_path, key)
            web = _web_console(runtime, home, settings_path, watch, bind_host, drain)
            console, approver = _approval_console(settings, runtime,
                                                  web_console=web is not None)
            app = create_app(runtime, settings.gateway, key=key, approver=approver,
                             bind_host=bind_host, drain=drain)
            told = announce or _say_listening
            if web is not None:
                from deepseek_eyes.console.app import beside

                console_asgi, (logins, where) = web
                app = beside(console_asgi, app)

                def told_and_console(host: str, port: int) -> None:
                    told(host, port)
                    shown = f"[{host}]" if ":" in host else host
                    where.append(f"http://{shown}:{port}/console/")
                    logins.issue()

                announce_all: Announce = told_and_console
            else:
                announce_all = told
            config = uvicorn.Config(
                app, host=bind_host, port=bind_port, log_level="warning", access_log=False,
                lifespan="off", server_header=False,
            )
            loop.settle_heap()  # what start-up built stays: out of every collection
            console_task = None if console is None else asyncio.create_task(console.serve())
            stop_control = await _run_control(runtime, home, settings_path, watch)
            from deepseek_eyes.gateway.replicas import share_with_replicas

            stop_sharing = share_with_replicas(runtime, home)
            try:
                await _Server(config, announce_all, drain).serve()
            finally:
                await stop_sharing()
                await stop_control()
                if console is not None and console_task is not None:
                    console.should_exit = True
                    await console_task
        finally:
            await runtime.aclose()
            home.close()

    loop.run(main())
