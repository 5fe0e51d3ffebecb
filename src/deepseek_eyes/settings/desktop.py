"""Settings of the desktop capability (``[desktop]``): the MCP server ``deepseek-eyes
desktop serve`` and the runtime's ``desktop`` tool source share them.

Defaults are the safe ones: no application may be launched until one is named here (argv
only, never a shell line), semantic collection is bounded, and the display is the one the
process was given (``$DISPLAY``) — a private Xvfb is started only when ``headless`` is true.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator

from deepseek_eyes.settings.base import Secret, Strict
from deepseek_eyes.settings.browser import VisualMode

__all__ = ["DesktopSettings"]

_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_DISPLAY = re.compile(r"^:\d{1,4}(\.\d{1,2})?$")


class DesktopSettings(Strict):
    """``[desktop]``: the Linux desktop through AT-SPI, XTest and X image capture."""

    python: Path = Field(
        default=Path("/usr/bin/python3"),
        description="The interpreter that runs the native helper; it must import gi "
                    "(Gio, Atspi 2.0) and Xlib (Debian's python3-gi, gir1.2-atspi-2.0, "
                    "python3-xlib).",
    )
    display: str | None = Field(
        default=None, description="X display to drive, e.g. \":77\"; default: $DISPLAY.")
    headless: bool = Field(
        default=False,
        description="Start a private Xvfb, D-Bus session and AT-SPI bus for the session "
                    "(and stop them at desktop_close).",
    )
    screen: tuple[int, int] = Field(default=(1280, 800),
                                    description="Size of the headless Xvfb screen.")
    apps: dict[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description='What desktop_launch may start: name = ["argv0", "arg", …]; no shell.',
    )
    max_processes: int = Field(default=8, ge=1, le=64,
                               description="Launched applications alive at once.")
    max_elements: int = Field(default=400, ge=10, le=20_000,
                              description="Elements one window observation collects.")
    semantic_time_cap: float = Field(
        default=2.0, gt=0, le=30,
        description="Seconds one semantic collection may take; the rest is cut (and said).",
    )
    helper_timeout: float = Field(default=10.0, gt=0, le=120,
                                  description="Seconds one native helper request may take.")
    settle: float = Field(default=0.15, ge=0, le=5,
                          description="Seconds to let an application react before observing "
                                      "the result of an action.")
    screenshot_max_side: int = Field(
        default=1600, ge=200, le=8192,
        description="A capture larger than this (either side) is scaled down; the scale is "
                    "returned and coordinates are translated back.")
    visual_mode: VisualMode = Field(
        default="auto",
        description="When screenshots reach the model: auto (only when the semantic state is "
                    "not enough), always, or manual (only on include_screenshot).",
    )
    max_sessions: int = Field(default=2, ge=1, le=16,
                              description="Desktop sessions open at once (one per "
                                          "conversation in the runtime).")
    # `desktop serve --http`: the terminal server's rules, its own token and port.
    token: Secret | None = Field(
        default=None, description="Bearer token of `desktop serve --http` (a secret "
                                  "reference); else DEEPSEEK_EYES_DESKTOP_TOKEN.")
    host: str = Field(default="127.0.0.1", description="HTTP bind address.")
    port: int = Field(default=8768, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host header values accepted over HTTP (host:port).")
    allowed_origins: tuple[str, ...] = Field(
        default=(), description="Extra Origin values accepted over HTTP (scheme://host:port).")
    rate_limit_per_minute: int = Field(default=600, ge=1, le=1_000_000)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)

    @field_validator("apps")
    @classmethod
    def _apps(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if len(value) > 64:
            raise ValueError("at most 64 apps")
        for name, argv in value.items():
            if not _APP_NAME.match(name):
                raise ValueError(f"{name!r} is not an app name (letters, digits, . _ -)")
            if not argv or not argv[0]:
                raise ValueError(f"app {name!r} needs an argv (a list, the program first)")
        return value

    @field_validator("display")
    @classmethod
    def _display(cls, value: str | None) -> str | None:
        if value is not None and not _DISPLAY.match(value):
            raise ValueError(f"{value!r} is not a local X display (\":N\")")
        return value
