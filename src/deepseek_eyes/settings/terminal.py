"""Settings of the terminal MCP server."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
)

from deepseek_eyes.settings.base import (
    Secret,
    Strict,
)

__all__ = ["TerminalMode", "TerminalSettings"]

TerminalMode = Literal["read-only", "confirm", "trusted"]


class TerminalSettings(Strict):
    """``deepseek-eyes terminal serve``: the terminal MCP server and its approval console.

    The bearer token is a reference like every secret; ``DEEPSEEK_EYES_TERMINAL_TOKEN`` is
    read when ``token`` is not set. Receipt keys are references too; with none configured a
    private keyring file in the data directory holds generated keys.
    """

    mode: TerminalMode = "confirm"
    workspaces: tuple[Path, ...] = Field(
        default=(), description="Workspace roots; empty means the working directory."
    )
    token: Secret | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8766, ge=0, le=65535)
    allowed_hosts: tuple[str, ...] = Field(
        default=(), description="Extra Host header values accepted (host:port)."
    )
    allowed_origins: tuple[str, ...] = Field(
        default=(), description="Extra Origin values accepted (scheme://host:port)."
    )
    timeout: float = Field(default=60.0, gt=0, le=3600, description="Default command timeout.")
    max_timeout: float = Field(default=600.0, gt=0, le=86400)
    max_output_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=256 * 1024 * 1024,
        description="Bytes of stdout and of stderr kept in a receipt; the rest is truncated.",
    )
    max_sessions: int = Field(default=8, ge=1, le=1024)
    session_idle_timeout: float = Field(default=900.0, gt=0, le=7 * 86400)
    rate_limit_per_minute: int = Field(default=600, ge=1, le=1_000_000)
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    subscriber_queue: int = Field(default=256, ge=4, le=65536)
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    receipt_keys: tuple[Secret, ...] = Field(
        default=(), description="HMAC keys (first signs, all verify); else the keyring file."
    )
    redact_env: tuple[str, ...] = Field(
        default=(), description="Environment variables whose values are redacted from receipts."
    )
    approvals: Literal["client", "console"] = Field(
        default="client",
        description="Who may approve plans: the MCP client (terminal_approve) or only the console.",
    )


# --- MCP host (capability `deepseek_eyes.mcp_host`) -------------------------------------------
