"""One spelling per host: what a URL's host means once a browser has parsed it.

A rule written as ``127.0.0.1`` or ``localhost`` must hold against every spelling that
reaches the same machine: ``[::ffff:127.0.0.1]``, ``0.0.0.0``, ``localhost.``,
``2130706433``, ``0x7f.1``, ``127.1``, ``LOCALHOST``, ``１２７．０．０．１``. So every host is
brought to one canonical form before anything compares it: percent-decoded, IDNA-mapped
(Unicode full stops and full-width digits included) and lower-cased, the trailing dot
dropped, an IPv4 address parsed the way the WHATWG URL standard (and so Chromium) parses it
(one to four parts, each decimal, ``0x`` hex or ``0`` octal), and an IPv6 address that
carries an IPv4 one (mapped, compatible, NAT64, 6to4) read as that IPv4 address too.

Hand-written because the rule is small and exactly the browser's: ``ipaddress`` does not
parse the short and numeric IPv4 forms, and the ``idna`` codec alone keeps them as names.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["Host", "HostError", "canonical_host", "is_private_address", "related_addresses"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
MAX_HOST_CHARS = 253


class HostError(ValueError):
    """The host cannot be parsed (a browser would refuse the URL too)."""


@dataclass(frozen=True)
class Host:
    """A canonical host: ``name`` is what rules compare, ``address`` is set for IP literals."""

    name: str  # "example.org", "127.0.0.1", "::1" (no brackets)
    address: IPAddress | None = None

    @property
    def is_localhost_name(self) -> bool:
        """``localhost`` and its subdomains: browsers resolve them to loopback themselves."""
        return self.name == "localhost" or self.name.endswith(".localhost")

    def url_form(self) -> str:
        return f"[{self.name}]" if ":" in self.name else self.name


def _ipv4_part(text: str) -> int | None:
    """One part of a WHATWG IPv4 address, or None when it is not a number."""
    if text[:2] in ("0x", "0X"):
        digits, base = text[2:], 16
        if not digits:
            return 0
        if not re.fullmatch(r"[0-9a-fA-F]+", digits):
            return None
    elif len(text) > 1 and text.startswith("0"):
        digits, base = text[1:], 8
        if not re.fullmatch(r"[0-7]+", digits):
            return None
    else:
        digits, base = text, 10
        if not re.fullmatch(r"[0-9]+", digits):
            return None
    return int(digits, base)


def _ends_in_number(labels: list[str]) -> bool:
    """The WHATWG test: a host whose last label is a number is an IPv4 address (or bad)."""
    return bool(re.fullmatch(r"[0-9]+|0[xX][0-9a-fA-F]*", labels[-1]))


def _parse_ipv4(labels: list[str]) -> ipaddress.IPv4Address:
    if len(labels) > 4:
        raise HostError("an IPv4 address has at most four parts")
    numbers = []
    for label in labels:
        number = _ipv4_part(label)
        if number is None:
            raise HostError(f"{label!r} is not a number of an IPv4 address")
        numbers.append(number)
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise HostError("an IPv4 address part is out of range")
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _unwrap(address: IPAddress) -> IPAddress:
    """An IPv6 address that only carries an IPv4 one, as that IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        packed = int(address)
        if packed >> 32 == 0 and packed > 1:  # IPv4-compatible ::a.b.c.d (not :: or ::1)
            return ipaddress.IPv4Address(packed)
    return address


def canonical_host(raw: str) -> Host:
    """The canonical form of a URL's (or a CONNECT line's) host.

    Raises:
        HostError: when no browser would accept the host either.
    """
    text = unquote(raw.strip())
    if not text:
        raise HostError("the host is empty")
    if text.startswith("[") or ":" in text:
        inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
        inner = inner.split("%", 1)[0]  # a zone id names an interface, not another host
        try:
            address = _unwrap(ipaddress.IPv6Address(inner))
        except ValueError:
            raise HostError(f"{raw[:80]!r} is not an IPv6 address") from None
        return Host(str(address), address)
    try:
        ascii_host = text.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise HostError(f"{raw[:80]!r} is not a valid host name") from None
    if ascii_host.endswith("."):
        ascii_host = ascii_host[:-1]
    if not ascii_host or len(ascii_host) > MAX_HOST_CHARS:
        raise HostError("the host is empty or too long")
    labels = ascii_host.split(".")
    if _ends_in_number(labels):
        address4 = _parse_ipv4(labels)
        return Host(str(address4), address4)
    if not all(_LABEL.match(label) for label in labels):
        raise HostError(f"{raw[:80]!r} is not a valid host name")
    return Host(ascii_host)


def related_addresses(address: IPAddress) -> set[IPAddress]:
    """The address and every address it stands for: an IPv4 address an IPv6 one carries
    (NAT64, 6to4), and loopback for the unspecified address (connecting to ``0.0.0.0`` or
    ``::`` reaches the local machine)."""
    out: set[IPAddress] = {address, _unwrap(address)}
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64:
            out.add(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address.sixtofour is not None:
            out.add(address.sixtofour)
    if any(a.is_unspecified for a in out):
        out |= {ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1")}
    return out


def is_private_address(address: IPAddress) -> bool:
    """True for every address that is not a public unicast one: loopback, RFC 1918,
    link-local (169.254/16, cloud metadata), CGNAT 100.64/10, ``::1``, ULA fc00::/7,
    fe80::/10, unspecified, multicast, reserved and documentation ranges — and any IPv6
    address that carries one of those."""
    for one in related_addresses(address):
        if one.is_multicast or one.is_unspecified or not one.is_global:
            return True
        if isinstance(one, ipaddress.IPv4Address) and one in _CGNAT:
            return True
    return False
