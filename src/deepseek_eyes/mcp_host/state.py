"""One managed server's state: what the manager knows of it, and the view it publishes.

Kept apart from :mod:`deepseek_eyes.mcp_host.manager` (which drives connections) because the host,
the events and the CLI read it too. Assigning a watched field (status, plane statuses,
generation, last error, pending retry) records a status transition and tells the manager's
:class:`~deepseek_eyes.mcp_host.events.StatusEvents`, so no code path can change what a watcher
sees without it being published.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deepseek_eyes.errors import ConfigError, McpError
from deepseek_eyes.mcp_host.catalog import Catalog
from deepseek_eyes.mcp_host.events import EVENT_FIELDS
from deepseek_eyes.mcp_host.faults import ProtocolFaults
from deepseek_eyes.mcp_host.liveness import Activity
from deepseek_eyes.mcp_host.redact import Redactor
from deepseek_eyes.mcp_host.stderr_log import StderrLog
from deepseek_eyes.mcp_host.wire import WireIds
from deepseek_eyes.settings import McpServerSettings

if TYPE_CHECKING:  # the SDK loads with the first connection (issue 41: not in a bare gateway)
    from mcp import Client

    from deepseek_eyes.mcp_host.oauth import OAuthHandle

__all__ = ["HISTORY", "ServerState"]

#: Status changes kept per server (oldest dropped first).
HISTORY = 64


@dataclass
class ServerState:
    settings: McpServerSettings
    status: str = "stopped"  # stopped | connecting | ready | failed | disabled
    tools_status: str = "pending"  # pending | ready | failed | withdrawn | disabled
    content_status: str = "disabled"  # as tools_status: each plane fails and recovers alone
    #: The code of each plane's last failed listing, cleared when that plane lists again.
    tools_error: str | None = None
    content_error: str | None = None
    catalog: Catalog | None = None
    generation: int = 0
    latency_ms: float | None = None
    last_error: str | None = None
    protocol: str | None = None
    mode: str = "auto"
    client: Client | None = None
    task: asyncio.Task[None] | None = None
    oauth: OAuthHandle | None = None
    refresh: asyncio.Event = field(default_factory=asyncio.Event)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    activity: Activity = field(default_factory=Activity)
    #: When the current connection became ready (monotonic), else ``None``.
    ready_since: float | None = None
    #: The wait before the next reconnect, while one is pending.
    retry_delay: float | None = None
    #: ``(monotonic time, status)`` of every status change, so flapping is on record and
    #: not only visible to whoever looked at the right moment.
    transitions: deque[tuple[float, str]] = field(
        default_factory=lambda: deque(maxlen=HISTORY), repr=False)
    #: The last failure's message, scrubbed of secrets (``last_error`` is its code).
    error_message: str | None = None
    #: The environment variable whose absence failed the server (``CONFIG_ENV_MISSING``).
    missing_env: str | None = None
    redactor: Redactor = field(default_factory=Redactor, repr=False)
    faults: ProtocolFaults = field(default_factory=ProtocolFaults, repr=False)
    stderr: StderrLog | None = field(default=None, repr=False)
    #: The connection's session and request ids, for the call spans (mcp_host/wire.py).
    wire: WireIds = field(default_factory=WireIds, repr=False)
    #: Called with the server id when a field an event reports changes.
    on_change: Callable[[str], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.transitions.append((time.monotonic(), self.status))

    def __setattr__(self, name: str, value: Any) -> None:
        # Recorded here rather than at each assignment so that no path (restart, close,
        # a failed credential check) can change the status unrecorded.
        changed = name in _WATCHED and name in self.__dict__ and value != getattr(self, name)
        if name == "status" and "transitions" in self.__dict__ and value != self.status:
            self.transitions.append((time.monotonic(), value))
        object.__setattr__(self, name, value)
        hook = self.__dict__.get("on_change")
        if changed and hook is not None:
            hook(self.settings.id)

    def fail(self, err: McpError | ConfigError) -> None:
        """Keep a failure for display: its code, and its message scrubbed of secrets."""
        self.redactor.scrub_error(err)
        self.error_message = err.message
        self.missing_env = err.details.get("env") if err.code == "CONFIG_ENV_MISSING" else None
        self.last_error = err.code

    def view(self) -> dict[str, Any]:
        cat = self.catalog
        return {
            "id": self.settings.id, "name": self.settings.display_name,
            "transport": self.settings.transport, "status": self.status,
            "tools_status": self.tools_status, "content_status": self.content_status,
            "tools_error": self.tools_error, "content_error": self.content_error,
            "generation": self.generation, "latency_ms": self.latency_ms,
            "last_error": self.last_error, "protocol": self.protocol,
            "tools": len(cat.tools) if cat else 0,
            "resources": len(cat.resources) if cat else 0,
            "prompts": len(cat.prompts) if cat else 0,
            "oauth": self.oauth.storage.health() if self.oauth else None,
            "missed_checks": self.activity.misses, "retry_delay_s": self.retry_delay,
            "error": self.error_message, "missing_env": self.missing_env,
            "invalid_messages": self.faults.count,
            "stderr_log": str(self.stderr.path) if self.stderr is not None else None,
        }

    @property
    def failed(self) -> bool:
        """Whether an enabled server is unusable or lost a plane it wanted."""
        if self.status == "disabled":
            return False
        return self.status != "ready" or "failed" in (self.tools_status, self.content_status)


#: ServerState fields whose change is published (the view names ``retry_delay`` with ``_s``).
_WATCHED = frozenset({*EVENT_FIELDS, "retry_delay"}) - {"retry_delay_s"}
