"""The runtime assembled from settings and a data directory: one object per process.

It owns the final-model client (one connection pool for every turn), the model catalog,
the tool hub with its sources, the session store and the vision bridge, and hands them to
the turn runner. The CLI and the gateway both hold exactly this object, so ``ask`` and
``POST /v1/chat/completions`` run the same turn code with the same tools.

Tool sources come from ``[runtime] tool_sources`` (default ``["look", "mcp"]``): ``look``
rereads images; ``mcp`` is the MCP host over the enabled ``[[mcp.servers]]`` (connected by
:meth:`Runtime.start`, only when there is one); ``terminal`` is the terminal service
in-process, configured from ``[terminal]``, only when listed; ``browser`` is a headless
Chromium per conversation, configured from ``[browser]``, only when listed (it starts on the
model's first browser call, not here); ``desktop`` is the Linux desktop (AT-SPI, XTest)
per conversation, configured from ``[desktop]``, only when listed (its native helper starts
on the model's first desktop call).

Lifecycle: construct (cheap, no connections), ``await start()`` before the first turn
that should see MCP tools, ``await aclose()`` at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from deepseek_eyes.errors import ConfigError, LLMError, StoreError
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.llm.retry import RetryPolicy
from deepseek_eyes.runtime.look import LookSource
from deepseek_eyes.runtime.messages import Fetch, ParsedHistories
from deepseek_eyes.runtime.sight import Sight
from deepseek_eyes.runtime.tools import ToolHub, ToolSource
from deepseek_eyes.runtime.turn import (
    TurnRequest,
    TurnResult,
    TurnRunner,
    TurnStream,
    request_from_openai,
)
from deepseek_eyes.runtime.turn.events import TurnEvent
from deepseek_eyes.runtime.turn.recovery import recover
from deepseek_eyes.settings import Settings
from deepseek_eyes.store.events import SessionStore
from deepseek_eyes.store.idempotency import IdempotencyStore
from deepseek_eyes.vision.bridge import VisionBridge

if TYPE_CHECKING:
    from deepseek_eyes.mcp_host.host import McpHost
    from deepseek_eyes.mcp_host.manager import McpManager
    from deepseek_eyes.runtime.approval import Approver
    from deepseek_eyes.runtime.mcp_tools import McpToolSource
    from deepseek_eyes.runtime.tools import Notify
    from deepseek_eyes.terminal.service import TerminalService

__all__ = ["Runtime"]


class Runtime:
    def __init__(
        self,
        settings: Settings,
        home: DataHome,
        *,
        bridge: VisionBridge | None = None,
    ) -> None:
        self.settings = settings
        self.home = home
        self.bridge = bridge or VisionBridge(settings, home)
        llm = settings.llm
        api_key: str | None = None
        self._credential_error: LLMError | None = None
        if llm.api_key is not None:
            try:
                api_key = llm.api_key.resolve()
            except ConfigError:
                # Resolved lazily as an error at the first turn, so commands that never call
                # the final model (sessions list, serve --help) still work without a key.
                self._credential_error = LLMError(
                    f"the final-model key is not set: export {llm.api_key.env} (or set "
                    "llm.api_key = false for an endpoint that takes no key)",
                    code="LLM_CREDENTIAL_MISSING",
                    details={"env": llm.api_key.env},
                )
        self.client = ChatClient(
            llm.base_url, api_key=api_key, timeout=llm.timeout,
            connect_timeout=llm.connect_timeout,
            retry=RetryPolicy(max_retries=llm.max_retries, max_retry_after=llm.max_retry_after),
            base_url_source=llm.base_url_source, provider="deepseek",
        )
        self.catalog = ModelCatalog(llm, self.client)
        #: Which final model sees: settings, learned verdicts, a pixel probe, the priors.
        self.sight = Sight(llm, catalog=self.catalog, client=self.client, db=home.db,
                           usage=home.usage, audit=home.audit)
        rt = settings.runtime
        self.tools = ToolHub(max_tools=rt.max_tools, max_schema_tokens=rt.max_tool_schema_tokens,
                             read_only=rt.tool_risk == "read-only")
        self._started = False
        #: The MCP servers' manager once :meth:`start` connected them (the gateway's
        #: control API steers it); None without MCP.
        self.mcp_manager: McpManager | None = None
        #: Its host (exposure: what the model is offered), for the web console.
        self.mcp_host: McpHost | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.terminal: TerminalService | None = None
        for name in rt.tool_sources:
            if name == "look":
                self.tools.add(LookSource(self.bridge))
            elif name == "terminal":
                self._add_terminal()
            elif name == "browser":
                self._add_browser()
            elif name == "desktop":
                self._add_desktop()
        self.sessions = SessionStore(home.db)
        self.parsed = ParsedHistories()  # each gateway client's resent history, structured
        # Turns a process that died left half-written are closed before this one's start.
        recover(self.sessions, home.audit)
        self.idempotency = IdempotencyStore(home.db, ttl_s=settings.gateway.idempotency_ttl)
        self.runner = TurnRunner(
            settings=settings.runtime,
            llm=settings.llm,
            bridge=self.bridge,
            client=self.client,
            catalog=self.catalog,
            tools=self.tools,
            sessions=self.sessions,
            usage=home.usage,
            audit=home.audit,
            seal=home.seal,
            sight=self.sight,
            vision=settings.vision,
            idempotency=self.idempotency,
        )

    def _add_terminal(self) -> None:
        # Imported here: the terminal's policy tables cost start-up time other commands
        # should not pay.
        from deepseek_eyes.runtime.terminal_tools import TerminalToolSource
        from deepseek_eyes.terminal.config import build_service

        service = build_service(self.settings, audit=self.home.audit)
        source = TerminalToolSource(service)
        self.terminal = service
        self.tools.add(source)

    def _add_browser(self) -> None:
        from deepseek_eyes.runtime.browser_tools import BrowserToolSource

        browser = self.settings.browser
        downloads = browser.downloads_dir or self.home.root / "browser" / "downloads"
        self.tools.add(BrowserToolSource(
            browser, bridge=self.bridge, blobs=self.home.blobs, downloads_dir=downloads,
            max_images=self.settings.runtime.max_images_per_turn))

    def _add_desktop(self) -> None:
        from deepseek_eyes.runtime.desktop_tools import DesktopToolSource

        self.tools.add(DesktopToolSource(
            self.settings.desktop, bridge=self.bridge, blobs=self.home.blobs,
            max_images=self.settings.runtime.max_images_per_turn))

    async def start(self, *, follow: bool = False) -> None:
        """Connect what needs connecting (the enabled MCP servers), once.

        ``follow``: this process follows the settings file (the gateway, ``chat``), so
        with ``mcp`` among the tool sources the MCP manager starts even when no server is
        enabled yet: one registered later must become live without a restart.
        """
        if self._started:
            return
        self._started = True
        mcp = self.settings.mcp
        sourced = "mcp" in self.settings.runtime.tool_sources
        wanted = sourced and (follow or (mcp.enabled and any(s.enabled for s in mcp.servers)))
        if wanted:
            from deepseek_eyes.mcp_host.audit import McpAudit
            from deepseek_eyes.mcp_host.host import McpHost
            from deepseek_eyes.mcp_host.manager import McpManager
            from deepseek_eyes.mcp_host.stderr_log import server_log_dir
            from deepseek_eyes.mcp_host.tokens import set_token_root, token_root
            from deepseek_eyes.runtime.mcp_tools import McpToolSource

            # Signed-in servers' tokens live in the data directory's token store.
            set_token_root(token_root(self.home.root))
            # stdio servers log to the data directory, never over the gateway's terminal.
            manager = McpManager(mcp, log_dir=server_log_dir(self.home.root))
            host = McpHost(manager, blobs=self.home.blobs, artifacts=self.home.artifacts,
                           audit=McpAudit(self.home.audit, ring=mcp.audit_ring),
                           usage=self.home.usage)
            longest = max((s.connect_timeout for s in mcp.servers if s.enabled), default=1.0)
            await manager.start(wait=longest + 1)
            self.mcp_manager = manager
            self.mcp_host = host
            rt = self.settings.runtime
            source = McpToolSource(host, self.bridge, max_images=rt.max_images_per_turn,
                                   tool_mode=rt.tool_mode)
            # MCP tools come after look and before the terminal, as tool_sources lists them;
            # Code Mode's two tools right after them.
            order: list[str] = list(rt.tool_sources)
            self.tools.sources.append(source)
            if source.code_mode:
                self.tools.sources.append(self._code_source(source))
            self.tools.sources.sort(key=lambda s: order.index("mcp") + 0.5 if s.name == "code"
                                    else order.index(s.name))
        if self.terminal is not None:
            self._reaper = asyncio.create_task(self.terminal.run_reaper())

    def _code_source(self, mcp: McpToolSource) -> ToolSource:
        from deepseek_eyes.runtime.code.sandbox import Limits, Sandbox
        from deepseek_eyes.runtime.code.source import CodeToolSource

        rt = self.settings.runtime
        limits = Limits(wall_seconds=rt.code_timeout, cpu_seconds=rt.code_cpu_seconds,
                        memory_bytes=rt.code_memory_mb * 1024 * 1024,
                        output_bytes=rt.code_max_output_bytes)
        return CodeToolSource(self.tools, mcp, Sandbox(limits))

    @property
    def credential_error(self) -> LLMError | None:
        """``LLM_CREDENTIAL_MISSING`` when the final-model key reference is unset, else None."""
        return self._credential_error

    def check_credentials(self) -> None:
        """Raises LLMError ``LLM_CREDENTIAL_MISSING`` when the key reference is unset."""
        if self._credential_error is not None:
            raise self._credential_error

    async def request_from_openai(
        self,
        body: Mapping[str, Any],
        *,
        session_id: str | None = None,
        continue_session: bool = False,
        source: str = "gateway",
        approver: Approver | None = None,
        notify: Notify | None = None,
        fetch: Fetch | None = None,
        scope: str | None = None,
    ) -> TurnRequest:
        """A turn request from an OpenAI ``chat/completions`` body: the one admission path
        of the gateway, ``ask`` and ``chat`` (:func:`~deepseek_eyes.runtime.turn.wire.
        openai_chat.request_from_openai`, with this runtime's image limits and store).

        ``continue_session``: the body holds only the new messages, and the session's
        stored log goes before them (``ask --session``, ``chat``); a gateway client resends
        its whole history instead, structured once per client ``scope``
        (:class:`~deepseek_eyes.runtime.messages.ParsedHistories`).
        """
        history: list[dict[str, Any]] = []
        if continue_session and session_id is not None and SessionStore.valid_id(session_id) \
                and self.sessions.exists(session_id):
            history = self.sessions.messages(session_id)
            if any(m.get("unkept") for m in history):  # hashes only: no history to give
                raise StoreError(
                    "the session holds messages kept only as hashes (store: false); send "
                    "the whole history instead", code="STORE_SESSION_UNKEPT",
                    details={"session_id": session_id})
        return await request_from_openai(
            body, admit=self.bridge.admit_all, fetch=fetch,
            max_image_bytes=self.settings.image.max_bytes,
            max_images=self.settings.runtime.max_images_per_turn,
            session_id=session_id, history=history, source=source, approver=approver,
            notify=notify, memo=self.parsed if scope is not None else None,
            scope=f"{source} {scope}" if scope is not None else None,
        )

    async def run(
        self, request: TurnRequest, *, started: Callable[[str], None] | None = None
    ) -> TurnResult:
        """Run a turn to its answer; ``started`` is told the session id once the request is
        logged (a caller cut off before the answer can still name the session)."""
        self.check_credentials()
        return await self.runner.run(request, started=started)

    def stream(self, request: TurnRequest) -> TurnStream:
        self.check_credentials()
        return self.runner.stream(request)

    def events(self, request: TurnRequest) -> AsyncGenerator[TurnEvent, None]:
        """A streamed turn as the loop's own events, for a wire format of its own (the
        Anthropic front); :meth:`stream` is the OpenAI one."""
        self.check_credentials()
        return self.runner.events(request, stream=True)

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await self.tools.close()
        await self.client.aclose()
        await self.bridge.aclose()
