"""Settings of the browser capability (``[browser]``): the MCP server ``deepseek-eyes
browser serve`` and the runtime's ``browser`` tool source share them.

Defaults are the safe ones: ``http``/``https`` only, headless, no uploads until a directory
is named, a non-persistent profile (nothing a site sets survives the session).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from deepseek_eyes.settings.base import Secret, Strict

__all__ = ["BrowserSettings", "VisualMode"]

VisualMode = Literal["auto", "always", "manual"]

# A host pattern: a host name, an IP address or "*." + a domain, with an optional ":port".
_HOST_PATTERN = re.compile(r"^(\*\.)?[a-z0-9._-]{1,253}(:\d{1,5})?$|^\[[0-9a-f:.]+\](:\d{1,5})?$")
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_OCTET = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_DOTTED_QUAD = re.compile(rf"^{_OCTET}(\.{_OCTET}){{3}}$")


def _plain_host(pattern: str) -> bool:
    """Names of valid labels, or an IPv4 address in its one plain spelling (the browser's
    policy compares every other spelling with it)."""
    if pattern.startswith("["):
        return True  # checked by the browser's policy when it parses the address
    host = pattern.rsplit(":", 1)[0] if ":" in pattern else pattern
    host = host.removeprefix("*.").removesuffix(".")
    labels = host.split(".")
    if re.fullmatch(r"[0-9]+|0x[0-9a-f]*", labels[-1]):
        return not pattern.startswith("*.") and bool(_DOTTED_QUAD.match(host))
    return all(_LABEL.match(label) for label in labels)


class BrowserSettings(Strict):
    """``[browser]``: one headless Chromium per browser session, driven by Playwright."""

    executable: Path | None = Field(
        default=None,
        description="Chromium to drive; default: /usr/bin/chromium, else `chromium` on PATH.",
    )
    headless: bool = True
    viewport_width: int = Field(default=1280, ge=320, le=3840)
    viewport_height: int = Field(default=800, ge=240, le=2160)
    visual_mode: VisualMode = Field(
        default="auto",
        description="When screenshots reach the model: auto (only when the page's semantic "
                    "state is not enough), always, or manual (only on include_screenshot).",
    )
    allowed_schemes: tuple[Literal["http", "https", "file"], ...] = Field(
        default=("http", "https"), description="URL schemes a page may be loaded from."
    )
    allow_hosts: tuple[str, ...] = Field(
        default=(), description="When not empty, only these hosts (`*.example.org`, "
                                "`host:port`) may be visited or fetched from."
    )
    allow_subresource_hosts: tuple[str, ...] = Field(
        default=(), description="With allow_hosts: more hosts pages may fetch from (CDNs) "
                                "but not be visited on."
    )
    deny_hosts: tuple[str, ...] = Field(
        default=(), description="Hosts never navigated to or fetched from, in any spelling "
                                "or by any address; wins over everything."
    )
    allow_private_network: bool = Field(
        default=False, description="Let pages reach loopback, private, link-local and other "
                                   "non-public addresses (off: only hosts named in the allow "
                                   "lists may be private).",
    )
    max_dialogs_per_minute: int = Field(
        default=20, ge=1, le=10_000,
        description="JavaScript dialogs one browser shows per minute; the tab that opens "
                    "one more is closed.",
    )
    action_timeout: float = Field(default=15.0, gt=0, le=300,
                                  description="Seconds one action may take.")
    navigation_timeout: float = Field(default=30.0, gt=0, le=600,
                                      description="Seconds a page load may take.")
    settle_timeout: float = Field(
        default=2.0, ge=0, le=30,
        description="Seconds to wait after an action for requests and DOM changes to settle.",
    )
    max_tabs: int = Field(default=4, ge=1, le=32)
    max_navigations: int = Field(default=200, ge=1, le=100_000,
                                 description="Page loads one browser session may make.")
    max_sessions: int = Field(default=4, ge=1, le=64,
                              description="Browsers open at once (one per conversation).")
    observe_page_chars: int = Field(
        default=12_000, ge=2_000, le=80_000,
        description="Characters of one observation page; the rest is in further pages.",
    )
    downloads_dir: Path | None = Field(
        default=None, description="Where downloads are saved; default: <data dir>/browser/"
                                  "downloads."
    )
    max_download_bytes: int = Field(default=100 * 1024 * 1024, ge=0, le=4 * 1024**3)
    upload_roots: tuple[Path, ...] = Field(
        default=(), description="Directories files may be uploaded from; empty: no uploads."
    )
    upload_allow_hard_links: bool = Field(
        default=False,
        description="Upload files with more than one hard link from upload_roots (a hard "
                    "link can name any file of its file system); the data directory's own "
                    "files are refused either way.",
    )
    max_upload_bytes: int = Field(default=50 * 1024 * 1024, ge=0, le=4 * 1024**3)
    # `browser serve --http`: the terminal server's rules, its own token and port.
    token: Secret | None = Field(
        default=None, description="Bearer token of `browser serve --http` (a secret "
                                  "reference); else DEEPSEEK_EYES_BROWSER_TOKEN.")
    host: str = Field(default="127.0.0.1", description="HTTP bind address.")
    port: int = Field(default=8767, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host header values accepted over HTTP (host:port)."
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(), description="Extra Origin values accepted over HTTP (scheme://host:port)."
    )
    rate_limit_per_minute: int = Field(default=600, ge=1, le=1_000_000)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    session_idle_timeout: float = Field(
        default=900.0, gt=0, le=7 * 86400,
        description="Seconds an HTTP connection's browser may sit unused before it is closed.",
    )

    @field_validator("allow_hosts", "allow_subresource_hosts", "deny_hosts")
    @classmethod
    def _host_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for item in value:
            pattern = item.strip().lower()
            if not _HOST_PATTERN.match(pattern) or not _plain_host(pattern):
                raise ValueError(f"{item!r} is not a host pattern (host, *.domain, "
                                 "host:port, a dotted IPv4 or a [v6] address)")
            out.append(pattern)
        return tuple(out)
