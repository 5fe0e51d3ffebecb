"""Settings of the terminal MCP server."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from deepseek_eyes.settings.base import (
    Secret,
    Strict,
)

__all__ = ["Approvals", "TerminalMode", "TerminalSettings"]

TerminalMode = Literal["read-only", "confirm", "trusted"]

#: Who approves a plan that needs approval. ``person``: a person, in the approval console
#: (its own login) or at chat's prompt, never the MCP client that planned it.
#: ``mcp-client``: the MCP client may approve its own plans with ``terminal_approve``.
Approvals = Literal["person", "mcp-client"]


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
    approvals: Approvals = Field(
        default="person",
        description='Who approves plans that need it: "person" (the console, with its own '
        'login, or chat\'s prompt) or "mcp-client" (the MCP client that planned a command may '
        "approve it itself with terminal_approve: no person in the loop).",
    )

    @field_validator("approvals", mode="before")
    @classmethod
    def _approvals_by_name(cls, value: object) -> object:
        """``console`` (the old name of "only a person") is read as ``person``; ``client``
        (the old default, which let the client approve its own plans) is refused, so that
        nobody keeps self-approval without choosing it by its new name."""
        if value == "console":
            return "person"
        if value == "client":
            raise ValueError(
                'approvals = "client" is no longer accepted: it let the MCP client approve '
                'its own plans. Write approvals = "person" (the default: a person approves in '
                'the console or at chat\'s prompt) or, knowingly, approvals = "mcp-client"')
        return value


# --- MCP host (capability `deepseek_eyes.mcp_host`) -------------------------------------------
