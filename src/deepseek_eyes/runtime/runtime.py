"""The runtime assembled from settings and a data directory: one object per process.

It owns the final-model client (one connection pool for every turn), the model catalog,
the tool registry, the session store and the vision bridge, and hands them to the turn
runner. The CLI and the gateway both hold exactly this object, so ``ask`` and
``POST /v1/chat/completions`` run the same turn code.
"""

from __future__ import annotations

from deepseek_eyes.errors import ConfigError, LLMError
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.runtime.look import LookTool
from deepseek_eyes.runtime.tools import ToolRegistry
from deepseek_eyes.runtime.turn import TurnRequest, TurnResult, TurnRunner, TurnStream
from deepseek_eyes.settings import Settings
from deepseek_eyes.store.events import SessionStore
from deepseek_eyes.vision.bridge import VisionBridge

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
        )
        self.catalog = ModelCatalog(llm, self.client)
        self.registry = ToolRegistry()
        self.registry.register(LookTool(self.bridge))
        self.sessions = SessionStore(home.db)
        self.runner = TurnRunner(
            settings=settings.runtime,
            bridge=self.bridge,
            client=self.client,
            catalog=self.catalog,
            registry=self.registry,
            sessions=self.sessions,
            usage=home.usage,
        )

    @property
    def credential_error(self) -> LLMError | None:
        """``LLM_CREDENTIAL_MISSING`` when the final-model key reference is unset, else None."""
        return self._credential_error

    def check_credentials(self) -> None:
        """Raises LLMError ``LLM_CREDENTIAL_MISSING`` when the key reference is unset."""
        if self._credential_error is not None:
            raise self._credential_error

    async def run(self, request: TurnRequest) -> TurnResult:
        self.check_credentials()
        return await self.runner.run(request)

    def stream(self, request: TurnRequest) -> TurnStream:
        self.check_credentials()
        return self.runner.stream(request)

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.bridge.aclose()
