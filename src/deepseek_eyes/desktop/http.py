"""``desktop serve --http``: the desktop's MCP server over Streamable HTTP at ``/mcp``,
behind the same security layer as the terminal's and the browser's servers (bearer token
in constant time, Host and Origin allow-lists, rate limits, a body cap), with the desktop's
refusal codes (``DESKTOP_UNAUTHORIZED``, …).

Unlike the browser, every connection shares **one** desktop service: there is one screen.
So state ids are shared too — when one client observes or acts, another client's older
state is stale and its next mutation is refused and re-observed, which is exactly right for
two planners looking at the same screen.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp

from deepseek_eyes.desktop.server import build_desktop_server
from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.errors import DesktopError
from deepseek_eyes.serving.mcp_http import streamable_mcp
from deepseek_eyes.serving.security import (
    HttpOptions,
    RefusalCodes,
    resolve_bearer_token,
)
from deepseek_eyes.settings import DesktopSettings

__all__ = ["DESKTOP_REFUSALS", "ENV_TOKEN", "build_desktop_http_app",
           "resolve_desktop_token"]

ENV_TOKEN = "DEEPSEEK_EYES_DESKTOP_TOKEN"  # noqa: S105 - the variable's name, not a token
DESKTOP_REFUSALS = RefusalCodes.prefixed("DESKTOP", realm="deepseek-eyes-desktop")


def resolve_desktop_token(settings: DesktopSettings) -> str:
    """The HTTP bearer token (``desktop.token``, else ``DEEPSEEK_EYES_DESKTOP_TOKEN``),
    checked for strength.

    Raises:
        DesktopError: ``DESKTOP_TOKEN_MISSING`` or ``DESKTOP_TOKEN_WEAK``.
        ConfigError: ``CONFIG_ENV_MISSING`` when ``desktop.token`` names an unset variable.
    """
    return resolve_bearer_token(settings.token, env=ENV_TOKEN, setting="desktop.token",
                                error=DesktopError, prefix="DESKTOP")


def build_desktop_http_app(service: DesktopService, options: HttpOptions) -> ASGIApp:
    """The whole HTTP server as one ASGI app; the service is closed when it stops."""
    mcp = build_desktop_server(service, close_on_exit=False)
    routes, lifespan = streamable_mcp(mcp, options, close=service.aclose)
    app = Starlette(routes=routes, lifespan=lifespan)
    return options.guard(app, codes=DESKTOP_REFUSALS)
