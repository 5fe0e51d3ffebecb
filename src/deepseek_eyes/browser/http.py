"""``browser serve --http``: the browser's MCP server over Streamable HTTP at ``/mcp``,
behind the same security layer as the terminal's server
(:class:`~deepseek_eyes.serving.security.SecurityMiddleware`: bearer token in constant time,
Host and Origin allow-lists, rate limits per token and per address, a body cap), with the
browser's refusal codes (``BROWSER_UNAUTHORIZED``, …).

There is nothing but ``/mcp``: no console, no public path. Each MCP connection gets a
browser of its own from a :class:`~deepseek_eyes.browser.connections.BrowserPool`, whose
idle ones the app's lifespan closes; the pool is closed when the server stops.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp

from deepseek_eyes.browser.connections import BrowserPool
from deepseek_eyes.browser.server import build_browser_server
from deepseek_eyes.errors import BrowserError
from deepseek_eyes.serving.mcp_http import streamable_mcp
from deepseek_eyes.serving.security import (
    HttpOptions,
    RefusalCodes,
    resolve_bearer_token,
)
from deepseek_eyes.settings import BrowserSettings
from deepseek_eyes.toolkit.visual import Describe

__all__ = [
    "BROWSER_REFUSALS",
    "ENV_TOKEN",
    "build_browser_http_app",
    "resolve_browser_token",
]

ENV_TOKEN = "DEEPSEEK_EYES_BROWSER_TOKEN"  # noqa: S105 - the variable's name, not a token
BROWSER_REFUSALS = RefusalCodes.prefixed("BROWSER", realm="deepseek-eyes-browser")


def resolve_browser_token(settings: BrowserSettings) -> str:
    """The HTTP bearer token (``browser.token``, else ``DEEPSEEK_EYES_BROWSER_TOKEN``),
    checked for strength.

    Raises:
        BrowserError: ``BROWSER_TOKEN_MISSING`` or ``BROWSER_TOKEN_WEAK``.
        ConfigError: ``CONFIG_ENV_MISSING`` when ``browser.token`` names an unset variable.
    """
    return resolve_bearer_token(settings.token, env=ENV_TOKEN, setting="browser.token",
                                error=BrowserError, prefix="BROWSER")


def build_browser_http_app(pool: BrowserPool, options: HttpOptions, *,
                           describe: Describe | None = None) -> ASGIApp:
    """The whole HTTP server as one ASGI app (lifespan included)."""
    mcp = build_browser_server(pool, describe=describe, close_on_exit=False)
    routes, lifespan = streamable_mcp(
        mcp, options, background=pool.reap, close=pool.aclose,
    )
    app = Starlette(routes=routes, lifespan=lifespan)
    return options.guard(app, codes=BROWSER_REFUSALS)
