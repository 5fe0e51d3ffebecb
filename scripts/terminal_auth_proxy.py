"""A loopback proxy that adds a server's bearer token to every request.

Why: the MCP conformance suite cannot send custom headers, and the terminal's HTTP server
refuses every request without its token (by design; there is no switch to turn that off).
This proxy forwards requests byte for byte, Host and Origin unchanged (so the suite's DNS
rebinding scenario still reaches the server's own checks), streams responses back (SSE
included), and injects ``Authorization: Bearer $DEEPSEEK_EYES_TERMINAL_TOKEN``.

    python scripts/terminal_auth_proxy.py LISTEN_PORT UPSTREAM_PORT [TOKEN_VARIABLE]

TOKEN_VARIABLE names the environment variable holding the token (default
``DEEPSEEK_EYES_TERMINAL_TOKEN``; ``scripts/vision-conformance.sh`` passes
``DEEPSEEK_EYES_VISION_TOKEN``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-authorization", "proxy-authenticate", "content-length", "authorization"}


def main() -> None:
    listen, upstream = int(sys.argv[1]), int(sys.argv[2])
    variable = sys.argv[3] if len(sys.argv) > 3 else "DEEPSEEK_EYES_TERMINAL_TOKEN"
    token = os.environ[variable]
    # No read deadline: SSE responses stay open as long as the suite listens.
    timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=10.0)
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{upstream}", timeout=timeout)

    async def forward(request: Request) -> StreamingResponse:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        headers.append(("authorization", f"Bearer {token}"))

        async def body() -> AsyncIterator[bytes]:
            async for chunk in request.stream():
                yield chunk

        upstream_request = client.build_request(
            request.method, request.url.path + (f"?{request.url.query}" if request.url.query
                                                else ""),
            headers=headers, content=body(),
        )
        response = await client.send(upstream_request, stream=True)
        out_headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP}
        return StreamingResponse(response.aiter_raw(), status_code=response.status_code,
                                 headers=out_headers, background=BackgroundTask(response.aclose))

    methods = ["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"]
    app = Starlette(routes=[Route("/{path:path}", forward, methods=methods)])
    uvicorn.run(app, host="127.0.0.1", port=listen, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
