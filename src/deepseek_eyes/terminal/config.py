"""From settings to a running :class:`TerminalService`: workspace, keyring, redactor,
sandbox and token, resolved in one place so the CLI, tests and benchmarks agree.

The bearer token comes from ``terminal.token`` (a ``{ env = "NAME" }`` reference) or from
``DEEPSEEK_EYES_TERMINAL_TOKEN``; it is checked for strength here and joins the redactor's
secrets, so no receipt can quote it.
"""

from __future__ import annotations

import os
from pathlib import Path

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.errors import TerminalError
from deepseek_eyes.serving.security import resolve_bearer_token
from deepseek_eyes.settings import Settings, data_home
from deepseek_eyes.terminal.execution.redact import Redactor
from deepseek_eyes.terminal.execution.sandbox import bwrap_available
from deepseek_eyes.terminal.policy.engine import MODES, Mode
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService

__all__ = [
    "ENV_TOKEN",
    "build_service",
    "load_keyring",
    "resolve_sandbox",
    "resolve_token",
    "resolve_workspace",
    "terminal_dir",
]

ENV_TOKEN = "DEEPSEEK_EYES_TERMINAL_TOKEN"  # noqa: S105 - the variable's name, not a token


def terminal_dir(settings: Settings) -> Path:
    return data_home(settings) / "terminal"


def resolve_token(settings: Settings) -> str:
    """The HTTP bearer token, checked for strength.

    Raises:
        TerminalError: ``TERMINAL_TOKEN_MISSING`` or ``TERMINAL_TOKEN_WEAK``.
        ConfigError: ``CONFIG_ENV_MISSING`` when ``terminal.token`` names an unset variable.
    """
    return resolve_bearer_token(settings.terminal.token, env=ENV_TOKEN,
                                setting="terminal.token", error=TerminalError,
                                prefix="TERMINAL")


def load_keyring(settings: Settings) -> Keyring:
    refs = settings.terminal.receipt_keys
    if refs:
        return Keyring.from_secrets([ref.resolve() for ref in refs])
    return Keyring.load_or_create(terminal_dir(settings))


def resolve_sandbox(settings: Settings) -> str | None:
    """The bwrap path to use, or None.

    Raises:
        TerminalError: ``TERMINAL_SPAWN_FAILED`` when ``sandbox = "bwrap"`` but it cannot run.
    """
    choice = settings.terminal.sandbox
    if choice == "none":
        return None
    path = bwrap_available()
    if path is None and choice == "bwrap":
        raise TerminalError("terminal.sandbox is bwrap, but bwrap cannot create a sandbox here",
                            code="TERMINAL_SPAWN_FAILED")
    return path


def resolve_workspace(
    roots: list[Path] | tuple[Path, ...], settings: Settings | None = None
) -> Workspace:
    """The workspace roots, with the data directory (keyring, receipts, audit) protected:
    no planned command may reach into it, even when a root contains it.

    Raises:
        TerminalError: ``TERMINAL_WORKSPACE_INVALID``.
    """
    protected = [data_home(settings)] if settings is not None else []
    try:
        return Workspace.of(list(roots) or [Path.cwd()], protected)
    except ValueError as exc:
        raise TerminalError(str(exc), code="TERMINAL_WORKSPACE_INVALID") from None


def build_service(
    settings: Settings,
    *,
    workspaces: list[Path] | None = None,
    mode: str | None = None,
    audit: AuditLog | None = None,
    token: str | None = None,
) -> TerminalService:
    """A service configured from ``settings``; CLI options override mode and workspaces."""
    term = settings.terminal
    chosen: Mode = term.mode
    if mode is not None:
        if mode not in MODES:
            raise TerminalError(f"unknown mode {mode!r}", code="TERMINAL_PLAN_STATE")
        chosen = mode
    keyring = load_keyring(settings)
    secrets = [token or ""] + [k.decode("utf-8", "replace") for k in keyring.keys]
    secrets += [os.environ.get(name, "") for name in term.redact_env]
    if settings.llm.api_key is not None:
        secrets.append(os.environ.get(settings.llm.api_key.env, ""))
    config = ServiceConfig(
        workspace=resolve_workspace(workspaces or list(term.workspaces), settings),
        mode=chosen,
        timeout=min(term.timeout, term.max_timeout),
        max_timeout=term.max_timeout,
        max_output_bytes=term.max_output_bytes,
        max_sessions=term.max_sessions,
        session_idle_timeout=term.session_idle_timeout,
        subscriber_queue=term.subscriber_queue,
        sandbox=resolve_sandbox(settings),
        approvals=term.approvals,
    )
    return TerminalService(config, keyring, terminal_dir(settings) / "receipts", audit=audit,
                           redactor=Redactor(secrets))
