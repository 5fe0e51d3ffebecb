"""Sign-in to an OAuth MCP server from the web console: ``mcp login``'s flow, started by a
click.

The protocol is :func:`deepseek_eyes.mcp_host.signin.sign_in`, the very function ``mcp
login`` calls (discovery, registration, PKCE, the loopback redirect listener that checks
``state``, the token store under the data directory). What the console adds is where the
authorization URL goes: the CLI prints it; here it is handed back to the page, which shows
it as a link and opens it in a new window. The person signs in there; the authorization
server redirects that window to the loopback listener, and the sign-in ends in the
background. The page then asks how it went (:func:`signin_state`).

Why a background task rather than one long request: the redirect comes back through the
person's browser, minutes later perhaps, and a request held open that long would be cut by
any proxy or a reload of the page. One sign-in per server at a time; starting another drops
the one before (a login means a new grant). After a sign-in the running gateway's
connection to the server is restarted, so it connects with the new token at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from deepseek_eyes.console.control import ConsoleParts, server_settings
from deepseek_eyes.errors import ConsoleError, DeepSeekEyesError, McpError
from deepseek_eyes.mcp_host.tokens import token_root

__all__ = ["SIGNIN_TIMEOUT_S", "SignIn", "signin_state", "start_signin"]

#: How long a person has to finish a sign-in the console started (``mcp login``'s default).
SIGNIN_TIMEOUT_S = 300.0
#: How long the console waits for the authorization URL before answering the click.
_URL_WAIT_S = 30.0

SignInState = Literal["waiting", "signed in", "failed"]


@dataclass
class SignIn:
    """One sign-in the console started: its authorization URL, then how it ended."""

    server: str
    started_at: float
    state: SignInState = "waiting"
    url: str | None = None
    error: dict[str, Any] | None = None
    #: The token store's health after a sign-in (status and expiry; never a token).
    health: dict[str, Any] | None = None
    #: The server's status on the running gateway after its restart.
    status: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    url_ready: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def view(self) -> dict[str, Any]:
        return {"server": self.server, "state": self.state, "url": self.url,
                "error": self.error, "health": self.health, "status": self.status,
                "started_at": self.started_at}


def _jobs(parts: ConsoleParts) -> dict[str, SignIn]:
    return parts.signins


async def _run(parts: ConsoleParts, job: SignIn) -> None:
    server = server_settings(parts, job.server)

    async def show(url: str) -> None:
        # The URL comes from the server's metadata: only a web address goes to the page
        # (never a javascript: or data: one), whatever the server says.
        if not url.lower().startswith(("https://", "http://")):
            raise McpError("the server's authorization URL is not an http(s) address; it "
                           "was not shown", code="MCP_LOGIN_FAILED",
                           details={"server": job.server})
        job.url = url
        job.url_ready.set()

    # Here, not at the top: mcp_host.signin loads the MCP SDK (~55 MiB), which a gateway
    # with no MCP server never needs (tests/gateway/test_import_weight.py).
    from deepseek_eyes.mcp_host.signin import sign_in

    try:
        job.health = await sign_in(server, token_root(parts.home.root), open_url=show,
                                   timeout=SIGNIN_TIMEOUT_S)
    except DeepSeekEyesError as exc:
        job.state, job.error = "failed", exc.to_dict()
        job.url_ready.set()
        return
    job.state = "signed in"
    job.url_ready.set()
    manager = parts.mcp_manager
    if manager is not None and job.server in manager.servers:
        try:
            state = manager.require(job.server)
            await manager.restart(job.server, wait=state.settings.connect_timeout + 1)
            job.status = manager.require(job.server).status
        except DeepSeekEyesError as exc:
            job.status = f"restart failed: {exc.code}"


async def start_signin(parts: ConsoleParts, server_id: str) -> dict[str, Any]:
    """Start signing in to ``server_id``; its authorization URL once the server named it.

    Raises:
        McpError: ``MCP_SERVER_UNKNOWN``; ``sign_in``'s when it fails before a URL
            (``MCP_LOGIN_UNSUPPORTED`` for a server without ``oauth`` of type
            ``authorization_code``, ``MCP_LOGIN_FAILED``, an endpoint rule's code).
        ConsoleError: ``CONSOLE_SIGNIN_PENDING`` when the server named no URL in time.
    """
    server_settings(parts, server_id)  # an unknown id is refused before anything starts
    jobs = _jobs(parts)
    old = jobs.pop(server_id, None)
    if old is not None and old.task is not None and not old.task.done():
        old.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await old.task
    job = SignIn(server_id, time.time())
    jobs[server_id] = job
    job.task = asyncio.create_task(_run(parts, job), name=f"console-signin:{server_id}")
    try:
        async with asyncio.timeout(_URL_WAIT_S):
            await job.url_ready.wait()
    except TimeoutError:
        raise ConsoleError(f"{server_id} named no authorization URL within "
                           f"{_URL_WAIT_S:g} s; the sign-in goes on: ask again",
                           code="CONSOLE_SIGNIN_PENDING",
                           details={"server": server_id}) from None
    if job.state == "failed" and job.url is None and job.error is not None:
        jobs.pop(server_id, None)
        raise DeepSeekEyesError(str(job.error.get("message", "the sign-in failed")),
                                code=str(job.error.get("code", "MCP_LOGIN_FAILED")),
                                details=job.error.get("details") or {})
    return job.view()


def signin_state(parts: ConsoleParts, server_id: str) -> dict[str, Any]:
    """How the console's latest sign-in to ``server_id`` stands.

    Raises:
        ConsoleError: ``CONSOLE_NOT_FOUND`` when the console started none.
    """
    job = _jobs(parts).get(server_id)
    if job is None:
        raise ConsoleError(f"no sign-in to {server_id} was started here",
                           code="CONSOLE_NOT_FOUND", details={"server": server_id})
    return job.view()
