"""The optional advisory model for ``terminal serve --advisor``: the ``[llm]`` endpoint
explains a plan or suggests a command, as text. It lives in the CLI because the terminal
capability may not import ``llm``; the terminal only knows the :class:`Advisor` protocol, and
nothing an advisor says is ever executed."""

from __future__ import annotations

from deepseek_eyes.errors import TerminalError
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.llm.retry import RetryPolicy
from deepseek_eyes.settings import Settings

__all__ = ["DeepSeekAdvisor"]

_SYSTEM = (
    "You advise on shell commands for a policy-guarded terminal. Answer in plain text. "
    "Suggest at most one command as an argv list. You cannot run anything; a person "
    "reviews every plan."
)


class DeepSeekAdvisor:
    def __init__(self, client: ChatClient, model: str) -> None:
        self.client = client
        self.model = model

    @classmethod
    def from_settings(cls, settings: Settings) -> DeepSeekAdvisor:
        """Raises:
            TerminalError: ``TERMINAL_ADVISOR_UNAVAILABLE`` without a model or key.
        """
        llm = settings.llm
        model = llm.model or (llm.models[0].id if llm.models else None)
        if model is None or llm.api_key is None or not llm.api_key.is_set():
            raise TerminalError("--advisor needs llm.model and its API key",
                                code="TERMINAL_ADVISOR_UNAVAILABLE")
        client = ChatClient(
            llm.base_url, api_key=llm.api_key.resolve(), timeout=llm.timeout,
            connect_timeout=llm.connect_timeout,
            retry=RetryPolicy(max_retries=llm.max_retries, max_retry_after=llm.max_retry_after),
        )
        return cls(client, model)

    async def advise(self, question: str) -> str:
        result = await self.client.complete({
            "model": self.model,
            "messages": [{"role": "system", "content": _SYSTEM},
                         {"role": "user", "content": question}],
            "max_tokens": 800,
        })
        return result.content
