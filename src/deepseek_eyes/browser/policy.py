"""Where the browser may go and what it may fetch: one decision, on the canonical host and
the addresses it resolved to.

:meth:`NavigationPolicy.host_refusal` is the rule. Its main caller is the request proxy
(:mod:`deepseek_eyes.browser.proxy`) that Chromium is forced through: it sees every request
of every frame and worker, every redirect hop, every WebSocket and every prefetch, resolves
the host itself and asks this function with the addresses it is about to connect to. The
URL checks (:meth:`NavigationPolicy.refusal`) ask the same function without addresses,
before ``browser_navigate`` loads anything, in the navigation router and after each
committed main-frame navigation — early answers with clear messages, not the rule.

The order of the decision:

1. ``deny_hosts`` wins over everything, and is compared with every spelling and address
   of the host (``127.0.0.1`` also denies ``[::ffff:127.0.0.1]``, ``2130706433`` and a name
   that resolves to it; ``localhost`` also denies every loopback address).
2. With ``allow_hosts`` set, a page may be visited only on those hosts, and a sub-resource
   fetched only from those or ``allow_subresource_hosts`` (CDNs). The proxy cannot tell a
   visit from a fetch inside a TLS tunnel, so it admits both lists; visits are held to
   ``allow_hosts`` by the URL checks.
3. The private-network guard: loopback, RFC 1918, link-local, CGNAT, ULA, unspecified and
   every other non-public address (and a name that resolves to one) is refused unless
   ``allow_private_network`` is on or a pattern of the allow lists names the host. A page
   the user visits must not read the services of the user's machine or network.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from deepseek_eyes.browser.hosts import (
    Host,
    HostError,
    IPAddress,
    canonical_host,
    is_private_address,
    related_addresses,
)
from deepseek_eyes.errors import BrowserPolicyError
from deepseek_eyes.settings import BrowserSettings

__all__ = ["DEFAULT_PORTS", "INTERNAL_URLS", "HostPattern", "NavigationPolicy"]

#: Pages of the browser itself that are always allowed (an empty tab).
INTERNAL_URLS = frozenset({"about:blank"})
#: Schemes a page's sub-resources may always use (they name no host).
_INLINE_SCHEMES = frozenset({"data", "blob", "about"})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
MAX_URL_CHARS = 8192


@dataclass(frozen=True)
class HostPattern:
    """``host``, ``*.domain``, ``host:port``, ``[v6]:port`` of the settings, canonical."""

    text: str
    name: str
    wildcard: bool = False
    address: IPAddress | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> HostPattern:
        host, port = text, None
        if text.startswith("["):
            inner, _, rest = text.partition("]")
            host, port = inner + "]", rest[1:] if rest.startswith(":") else None
        elif text.count(":") == 1:
            host, port = text.split(":")
        wildcard = host.startswith("*.")
        if wildcard:
            host = host[2:]
        canonical = canonical_host(host)
        if wildcard and canonical.address is not None:
            raise HostError(f"{text!r}: a wildcard names a domain, not an address")
        return cls(text, canonical.name, wildcard, canonical.address,
                   int(port) if port else None)

    def matches(self, host: Host, port: int, addresses: set[IPAddress]) -> bool:
        """Names match names (``*.`` matches subdomains only); an address pattern matches
        every address the host stands for or resolved to; ``localhost`` matches loopback."""
        if self.port is not None and self.port != port:
            return False
        if self.wildcard:
            return host.name.endswith("." + self.name)
        if self.address is not None:
            return self.address in addresses
        if self.name == "localhost":
            return host.is_localhost_name or any(a.is_loopback for a in addresses)
        return host.name == self.name


def _patterns(texts: Iterable[str]) -> tuple[HostPattern, ...]:
    try:
        return tuple(HostPattern.parse(t) for t in texts)
    except HostError as exc:
        raise BrowserPolicyError(f"a host pattern of the browser settings is invalid: {exc}",
                                 code="CONFIG_INVALID") from None


@dataclass(frozen=True)
class NavigationPolicy:
    schemes: frozenset[str] = frozenset({"http", "https"})
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    subresource_allow: tuple[str, ...] = ()
    private_network: bool = False
    _allow: tuple[HostPattern, ...] = field(init=False, repr=False, compare=False)
    _deny: tuple[HostPattern, ...] = field(init=False, repr=False, compare=False)
    _sub: tuple[HostPattern, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allow", _patterns(self.allow))
        object.__setattr__(self, "_deny", _patterns(self.deny))
        object.__setattr__(self, "_sub", _patterns(self.subresource_allow))

    @classmethod
    def from_settings(cls, settings: BrowserSettings) -> NavigationPolicy:
        return cls(frozenset(settings.allowed_schemes), settings.allow_hosts,
                   settings.deny_hosts, settings.allow_subresource_hosts,
                   settings.allow_private_network)

    # -- the decision --------------------------------------------------------------------
    def host_refusal(self, host: Host, port: int, resolved: Iterable[IPAddress] = (), *,
                     navigation: bool = False) -> str | None:
        """Why a connection to ``host:port`` (which resolved to ``resolved``) is refused,
        or None. ``navigation``: a page visit, held to ``allow_hosts`` alone."""
        resolved = tuple(resolved)
        addresses: set[IPAddress] = set()
        for address in (*((host.address,) if host.address else ()), *resolved):
            addresses |= related_addresses(address)
        shown = host.url_form()
        if any(p.matches(host, port, addresses) for p in self._deny):
            return f"the host {shown!r} is on the deny list"
        allowed = self._allow if navigation else (*self._allow, *self._sub)
        explicit = any(p.matches(host, port, addresses) for p in allowed)
        if self._allow and not explicit:
            return f"the host {shown!r} is not on the allow list"
        if self.private_network or explicit:
            return None
        if host.is_localhost_name:
            return (f"the host {shown!r} is this machine (private network; "
                    "browser.allow_private_network)")
        if host.address is not None and is_private_address(host.address):
            return (f"the address {shown!r} is in a private network "
                    "(browser.allow_private_network)")
        for address in resolved:
            if is_private_address(address):
                return (f"the host {shown!r} resolves to {str(address)!r}, an address in a "
                        "private network (browser.allow_private_network)")
        return None

    def refusal(self, url: str, *, navigation: bool = True) -> str | None:
        """Why ``url`` may not be loaded, or None when it may (no name is resolved here:
        the proxy checks the addresses)."""
        if url in INTERNAL_URLS:
            return None
        if len(url) > MAX_URL_CHARS:
            return f"the URL is longer than {MAX_URL_CHARS} characters"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return "the URL cannot be parsed"
        scheme = parts.scheme.lower()
        if not navigation and scheme in _INLINE_SCHEMES:
            return None
        if scheme not in self.schemes and not (not navigation and scheme in ("ws", "wss")):
            allowed = ", ".join(sorted(self.schemes))
            return f"the scheme {scheme or '(none)'!r} is not allowed (allowed: {allowed})"
        if parts.username is not None or parts.password is not None:
            return "URLs with credentials (user:password@) are refused"
        if scheme == "file":
            return None
        if not parts.hostname:
            return "the URL has no host"
        try:
            host = canonical_host(parts.hostname)
        except HostError as exc:
            return f"the host cannot be parsed ({exc})"
        return self.host_refusal(host, port or DEFAULT_PORTS.get(scheme, 0),
                                 navigation=navigation)

    def check(self, url: str) -> None:
        """Raises BrowserPolicyError ``BROWSER_NAVIGATION_BLOCKED`` for a refused URL."""
        reason = self.refusal(url)
        if reason is not None:
            raise BrowserPolicyError(f"navigation refused: {reason}",
                                     code="BROWSER_NAVIGATION_BLOCKED",
                                     details={"url": url[:300], "reason": reason})

    def describe(self) -> dict[str, Sequence[str] | bool]:
        return {"schemes": sorted(self.schemes), "allow_hosts": list(self.allow),
                "deny_hosts": list(self.deny),
                "allow_subresource_hosts": list(self.subresource_allow),
                "allow_private_network": self.private_network}
