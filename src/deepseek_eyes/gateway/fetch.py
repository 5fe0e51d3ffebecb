"""Bounded download of an image named by an http(s) URL in a chat request.

Off unless ``gateway.allow_image_urls`` is set. Every fetch has a deadline and a byte
limit, follows no redirects, and refuses hosts that resolve to loopback, private,
link-local or otherwise non-global addresses (a request must not make the gateway reach
into its own network) unless ``gateway.allow_private_image_urls`` says so. The address
check runs before the connection; a host that changes its DNS answer in between can still
reach a private address, which is why the setting stays off by default.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import anyio
import httpx

from deepseek_eyes.errors import TurnError

__all__ = ["fetch_image"]


def _failed(message: str, url_host: str, **details: object) -> TurnError:
    return TurnError(
        message, code="RUNTIME_IMAGE_FETCH_FAILED", details={"host": url_host, **details}
    )


async def _check_host(host: str, port: int) -> None:
    try:
        infos = await anyio.to_thread.run_sync(
            lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        )
    except OSError as exc:
        raise _failed(f"cannot resolve image host {host}", host) from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise _failed(
                f"image host {host} resolves to a non-public address", host, reason="private"
            )


async def fetch_image(
    url: str, *, max_bytes: int, timeout: float, allow_private: bool = False
) -> bytes:
    """The bytes at ``url``.

    Raises:
        TurnError: ``RUNTIME_IMAGE_FETCH_FAILED`` for a refused host, a non-2xx status, a
            body over ``max_bytes``, a redirect or a timeout.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        raise _failed("an image URL must be http(s) with a host and no user info", host)
    if not allow_private:
        await _check_host(host, parts.port or (443 if parts.scheme == "https" else 80))
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(timeout):
            async with (
                httpx.AsyncClient(follow_redirects=False, timeout=timeout) as client,
                client.stream("GET", url, headers={"Accept": "image/*"}) as response,
            ):
                if response.status_code != 200:
                    raise _failed(
                        f"the image URL answered {response.status_code}", host,
                        status=response.status_code,
                    )
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise _failed(
                            f"the image at the URL is larger than {max_bytes} bytes", host,
                            limit=max_bytes,
                        )
                    chunks.append(chunk)
    except TimeoutError as exc:
        raise _failed("fetching the image URL timed out", host, timeout=timeout) from exc
    except httpx.HTTPError as exc:
        raise _failed(
            f"fetching the image URL failed: {type(exc).__name__}", host
        ) from exc
    return b"".join(chunks)
