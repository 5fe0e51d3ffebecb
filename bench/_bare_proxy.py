"""A pass-through proxy on the gateway's own serving stack: the floor of a gateway hop.

    python bench/_bare_proxy.py UPSTREAM_BASE_URL PORT

Serves ``http://127.0.0.1:PORT/v1/…`` and forwards each request's method, path, query,
body and content type to ``UPSTREAM_BASE_URL`` unchanged, answering with the upstream's
status, content type and body, chunk by chunk as they arrive (a stream stays a stream).
It runs on what ``deepseek-eyes serve`` runs on (uvicorn on uvloop, parsing HTTP with
httptools; the upstream reached through the chat client's own transport,
``deepseek_eyes.llm.transport.KeepAliveTransport``, called directly: no httpx client
around it, so no request building, cookie jar or redirect handling either) and does
nothing else: no parse, no check, no store, no audit. So its added latency is what the hop
alone costs on this stack, the least any gateway built on it can add (bench/gateway.py
prints it beside ours).
Prints ``listening`` to stderr once it accepts connections.
"""

from __future__ import annotations

import sys
from typing import Any

import httpx
import uvicorn

from deepseek_eyes.llm.transport import KeepAliveTransport
from deepseek_eyes.serving import loop

_KEPT_HEADERS = ("content-type",)


def build(upstream: str) -> Any:
    transport = KeepAliveTransport()
    base = upstream.rstrip("/")
    urls: dict[str, httpx.URL] = {}  # parsed once a target
    timeouts = httpx.Timeout(30).as_dict()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path = scope["path"].removeprefix("/v1")
        query = scope["query_string"].decode()
        target = f"{base}{path}" + (f"?{query}" if query else "")
        url = urls.get(target) or urls.setdefault(target, httpx.URL(target))
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"]
                   if k.decode().lower() in _KEPT_HEADERS]
        request = httpx.Request(scope["method"], url, content=body, headers=headers,
                                extensions={"timeout": timeouts})
        response = await transport.handle_async_request(request)
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k.encode(), v.encode()) for k, v in response.headers.items()
                                    if k.lower() in _KEPT_HEADERS]})
            async for chunk in response.stream:  # type: ignore[union-attr]
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()

    return app


async def main(upstream: str, port: int) -> None:
    config = uvicorn.Config(build(upstream), host="127.0.0.1", port=port, log_level="warning",
                            access_log=False, lifespan="off", server_header=False)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup()
    print("listening", file=sys.stderr, flush=True)
    await server.main_loop()
    await server.shutdown()


if __name__ == "__main__":
    loop.run(main(sys.argv[1], int(sys.argv[2])))
