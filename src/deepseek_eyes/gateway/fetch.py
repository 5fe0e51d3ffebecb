"""Bounded download of an image named by an http(s) URL in a chat request.

On by default, as OpenAI's API fetches image URLs (``gateway.allow_image_urls = false``
turns it off). Attacker model: whoever can send a chat request chooses the URL, runs the
server behind it and its DNS, and would like the gateway to reach into its own network
(loopback, private, link-local, metadata addresses) or to hold a connection forever.
Decisions a newcomer would otherwise undo:

* **Every hop is checked.** Redirects are followed by hand, at most
  :data:`MAX_REDIRECTS`, and each ``Location`` is judged like the first URL (scheme, no
  user info, the host's addresses), so a public page cannot bounce the gateway to
  ``http://127.0.0.1``.
* **The checked address is the one connected to.** The host is resolved once per hop; every
  address it resolves to must be public (``is_global``, IPv4-mapped IPv6 judged as its
  IPv4), and the request goes to the first of them by address, with the name in ``Host``
  and, for https, in SNI and certificate checks. A DNS answer that changes between the
  check and the connection (rebinding) cannot move the request elsewhere.
* Private addresses are reachable only with ``gateway.allow_private_image_urls``.
* Every fetch has one deadline for all hops and a byte limit on the body.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

from deepseek_eyes.errors import TurnError

__all__ = ["MAX_REDIRECTS", "fetch_image"]

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _failed(message: str, url_host: str, **details: object) -> TurnError:
    return TurnError(
        message, code="RUNTIME_IMAGE_FETCH_FAILED", details={"host": url_host, **details}
    )


async def _resolve(host: str, port: int) -> list[str]:
    infos = await anyio.to_thread.run_sync(
        lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    return [str(info[4][0]) for info in infos]


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def _address(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to for ``host``, every one it resolves to checked."""
    try:
        addresses = await _resolve(host, port)
    except OSError as exc:
        raise _failed(f"cannot resolve image host {host}", host) from exc
    if not addresses:
        raise _failed(f"cannot resolve image host {host}", host)
    if not allow_private and not all(_public(a) for a in addresses):
        raise _failed(f"image host {host} resolves to a non-public address", host,
                      reason="private")
    return addresses[0]


def _target(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        raise _failed("an image URL must be http(s) with a host and no user info", host)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise _failed("the image URL's port is not a number", host) from exc
    return parts.scheme, host, port


async def fetch_image(
    url: str, *, max_bytes: int, timeout: float, allow_private: bool = False,
) -> bytes:
    """The bytes at ``url``, redirects followed and re-checked hop by hop.

    Raises:
        TurnError: ``RUNTIME_IMAGE_FETCH_FAILED`` for a refused host (on any hop), a
            non-2xx status, too many redirects, a body over ``max_bytes`` or a timeout.
    """
    host = urlsplit(url).hostname or ""
    try:
        with anyio.fail_after(timeout):
            async with httpx.AsyncClient(follow_redirects=False, timeout=timeout,
                                         trust_env=False) as client:
                for _ in range(MAX_REDIRECTS + 1):
                    scheme, host, port = _target(url)
                    address = await _address(host, port, allow_private=allow_private)
                    location = await _get(client, url, scheme, host, port, address,
                                          max_bytes)
                    if isinstance(location, bytes):
                        return location
                    url = urljoin(url, location)
                raise _failed(f"the image URL redirected more than {MAX_REDIRECTS} times",
                              host, redirects=MAX_REDIRECTS)
    except TimeoutError as exc:
        raise _failed("fetching the image URL timed out", host, timeout=timeout) from exc
    except httpx.HTTPError as exc:
        raise _failed(
            f"fetching the image URL failed: {type(exc).__name__}", host
        ) from exc


async def _get(client: httpx.AsyncClient, url: str, scheme: str, host: str, port: int,
               address: str, max_bytes: int) -> bytes | str:
    """One hop, to ``address``: the body, or where a redirect points."""
    parts = urlsplit(url)
    literal = f"[{address}]" if ":" in address else address
    pinned = parts._replace(netloc=f"{literal}:{port}").geturl()
    default = port == (443 if scheme == "https" else 80)
    headers = {"Accept": "image/*", "Host": host if default else f"{host}:{port}"}
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    async with client.stream("GET", pinned, headers=headers,
                             extensions=extensions) as response:
        if response.status_code in _REDIRECTS:
            location = str(response.headers.get("location") or "")
            if not location:
                raise _failed("the image URL redirected nowhere", host,
                              status=response.status_code)
            return location
        if response.status_code != 200:
            raise _failed(f"the image URL answered {response.status_code}", host,
                          status=response.status_code)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise _failed(f"the image at the URL is larger than {max_bytes} bytes",
                              host, limit=max_bytes)
            chunks.append(chunk)
        return b"".join(chunks)
