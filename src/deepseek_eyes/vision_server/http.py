"""``vision serve --http``: the vision MCP server over Streamable HTTP at ``/mcp``, behind
the security layer every HTTP server of ours shares (bearer token in constant time, Host and
Origin allow-lists, rate limits, a body cap), with the ``VISION_…`` refusal codes.

One bridge serves every connection. A client's MCP roots are ignored unless
``vision.serve.http_client_roots`` is on: a remote client's ``file://`` roots name paths on
its own disk, and honouring them would let any token holder widen what this server reads.
When on, each connection's roots are its own. The bridge is closed when the server stops.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp

from deepseek_eyes.errors import VisionError
from deepseek_eyes.serving.mcp_http import streamable_mcp
from deepseek_eyes.serving.security import (
    HttpOptions,
    RefusalCodes,
    resolve_bearer_token,
)
from deepseek_eyes.settings.vision import VisionServeSettings
from deepseek_eyes.vision_server.server import build_vision_server
from deepseek_eyes.vision_server.service import VisionService

__all__ = [
    "ENV_TOKEN",
    "VISION_REFUSALS",
    "build_vision_http_app",
    "resolve_vision_token",
]

ENV_TOKEN = "DEEPSEEK_EYES_VISION_TOKEN"  # noqa: S105 - the variable's name, not a token
VISION_REFUSALS = RefusalCodes.prefixed("VISION", realm="deepseek-eyes-vision")


def resolve_vision_token(settings: VisionServeSettings) -> str:
    """The HTTP bearer token (``vision.serve.token``, else ``DEEPSEEK_EYES_VISION_TOKEN``),
    checked for strength.

    Raises:
        VisionError: ``VISION_TOKEN_MISSING`` or ``VISION_TOKEN_WEAK``.
        ConfigError: ``CONFIG_ENV_MISSING`` when ``vision.serve.token`` names an unset
            variable.
    """
    return resolve_bearer_token(settings.token, env=ENV_TOKEN, setting="vision.serve.token",
                                error=VisionError, prefix="VISION")


def build_vision_http_app(service: VisionService, options: HttpOptions, *,
                          open_world: bool = False, client_roots: bool = False) -> ASGIApp:
    """The whole HTTP server as one ASGI app (lifespan included). ``client_roots``
    (``vision.serve.http_client_roots``): also serve the roots clients offer."""
    mcp = build_vision_server(service, open_world=open_world, client_roots=client_roots,
                              close_on_exit=False)
    routes, lifespan = streamable_mcp(mcp, options, close=service.bridge.aclose)
    app = Starlette(routes=routes, lifespan=lifespan)
    return options.guard(app, codes=VISION_REFUSALS)
