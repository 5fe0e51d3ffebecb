"""Where the browser may go: schemes, a host allow list and a deny list.

Checked at three points, because no single one sees every navigation: before
``browser_navigate`` loads anything; in the request router for every navigation request a
page makes (links, forms, scripts, iframes); and after each committed main-frame navigation,
because Chromium follows HTTP redirects without asking the router again. A page that ends up
somewhere refused is replaced by ``about:blank`` before anything reads it.

Sub-resources (images, scripts, fetches) are held to the scheme list and the deny list only:
an allow list names the sites a task may *visit*, and those sites load from CDNs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from deepseek_eyes.errors import BrowserPolicyError
from deepseek_eyes.settings import BrowserSettings

__all__ = ["INTERNAL_URLS", "NavigationPolicy"]

#: Pages of the browser itself that are always allowed (an empty tab).
INTERNAL_URLS = frozenset({"about:blank"})
#: Schemes a page's sub-resources may always use (they name no host).
_INLINE_SCHEMES = frozenset({"data", "blob", "about"})
MAX_URL_CHARS = 8192


def _split_pattern(pattern: str) -> tuple[str, str | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` → (host, port or None)."""
    if pattern.startswith("["):
        host, _, rest = pattern[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else None
    if pattern.count(":") == 1:
        host, port = pattern.split(":")
        return host, port
    return pattern, None


def _matches(pattern: str, host: str, port: int | None) -> bool:
    """``*.example.org`` matches subdomains of example.org (not example.org itself)."""
    name, want_port = _split_pattern(pattern)
    if want_port is not None and (port is None or str(port) != want_port):
        return False
    if name.startswith("*."):
        return host.endswith(name[1:])
    return host == name.strip("[]")


@dataclass(frozen=True)
class NavigationPolicy:
    schemes: frozenset[str] = frozenset({"http", "https"})
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: BrowserSettings) -> NavigationPolicy:
        return cls(frozenset(settings.allowed_schemes), settings.allow_hosts,
                   settings.deny_hosts)

    def refusal(self, url: str, *, navigation: bool = True) -> str | None:
        """Why ``url`` may not be loaded, or None when it may."""
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
        if scheme not in self.schemes:
            allowed = ", ".join(sorted(self.schemes))
            return f"the scheme {scheme or '(none)'!r} is not allowed (allowed: {allowed})"
        if parts.username is not None or parts.password is not None:
            return "URLs with credentials (user:password@) are refused"
        if scheme == "file":
            return None
        host = (parts.hostname or "").lower()
        if not host:
            return "the URL has no host"
        if any(_matches(p, host, port) for p in self.deny):
            return f"the host {host!r} is on the deny list"
        if navigation and self.allow and not any(_matches(p, host, port) for p in self.allow):
            return f"the host {host!r} is not on the allow list"
        return None

    def check(self, url: str) -> None:
        """Raises BrowserPolicyError ``BROWSER_NAVIGATION_BLOCKED`` for a refused URL."""
        reason = self.refusal(url)
        if reason is not None:
            raise BrowserPolicyError(f"navigation refused: {reason}",
                                     code="BROWSER_NAVIGATION_BLOCKED",
                                     details={"url": url[:300], "reason": reason})

    def describe(self) -> dict[str, Sequence[str]]:
        return {"schemes": sorted(self.schemes), "allow_hosts": list(self.allow),
                "deny_hosts": list(self.deny)}

