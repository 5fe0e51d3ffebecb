"""``terminal_advise`` against a loopback OpenAI-compatible model server: the model's text
comes back as text, and even advice that names a command plans, runs and signs nothing; a
model that cannot be reached, or none at all, is ``TERMINAL_ADVISOR_UNAVAILABLE``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.cli.terminal_advisor import DeepSeekAdvisor
from deepseek_eyes.errors import TerminalError
from deepseek_eyes.settings import Settings
from runtime.upstream import LoopbackUpstream
from terminal.support import Running, mcp_client, tool_error

pytestmark = pytest.mark.anyio

KEY_ENV = "TERMINAL_ADVISOR_TEST_API_KEY"
KEY = "advisor-test-key-0123456789"
MODEL = "deepseek-v4-pro"
ADVICE = 'run ["rm", "-rf", "/"] first, then ["du", "-sh", "."]'
QUESTION = f"How do I see the disk usage?\nANSWER: {ADVICE}"


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream(api_key=KEY) as server:
        yield server


def _settings(base_url: str, **llm: Any) -> Settings:
    return Settings.model_validate({"llm": {"base_url": base_url, "api_key": {"env": KEY_ENV},
                                            "model": MODEL, "timeout": 10.0, **llm}})


class OneClientPerCall:
    """The CLI's advisor, built from settings for each question and closed after it, so its
    HTTP client lives and dies on the server's event loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def advise(self, question: str) -> str:
        advisor = DeepSeekAdvisor.from_settings(self.settings)
        try:
            return await advisor.advise(question)
        finally:
            await advisor.client.aclose()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def advisor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


async def test_advisor_sends_the_question_and_returns_the_text(
    upstream: LoopbackUpstream, advisor_env: None
) -> None:
    upstream.reset()
    advisor = DeepSeekAdvisor.from_settings(_settings(upstream.base_url))
    try:
        assert await advisor.advise(QUESTION) == ADVICE
    finally:
        await advisor.client.aclose()
    (sent,) = upstream.requests
    assert sent["model"] == MODEL
    assert sent["messages"][0]["role"] == "system"
    assert "cannot run anything" in sent["messages"][0]["content"]
    assert sent["messages"][1] == {"role": "user", "content": QUESTION}


@pytest.mark.parametrize("llm", [{"model": None}, {"api_key": {"env": "UNSET_ADVISOR_KEY"}}])
def test_advisor_needs_a_model_and_a_key(llm: dict[str, Any], advisor_env: None) -> None:
    with pytest.raises(TerminalError) as err:
        DeepSeekAdvisor.from_settings(_settings("http://127.0.0.1:9/v1", **llm))
    assert err.value.code == "TERMINAL_ADVISOR_UNAVAILABLE"


@pytest.fixture
def loopback_advisor(upstream: LoopbackUpstream, advisor_env: None) -> OneClientPerCall:
    upstream.reset()
    return OneClientPerCall(_settings(upstream.base_url))


@pytest.fixture
def unreachable_advisor(advisor_env: None) -> OneClientPerCall:
    return OneClientPerCall(_settings(f"http://127.0.0.1:{_closed_port()}/v1"))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("running", [{"advisor": "loopback_advisor"}], indirect=True)
async def test_advice_over_mcp_runs_nothing(
    running: Running, upstream: LoopbackUpstream, workspace: Path, mode: str
) -> None:
    before = sorted(p.name for p in workspace.iterdir())
    async with mcp_client(running, mode) as client:
        result = await client.call_tool("terminal_advise", {"question": QUESTION})
    assert not result.is_error, result
    assert result.structured_content == {
        "advice": ADVICE, "executed": False,
        "note": "Advisory text only. Nothing was planned or run.",
    }
    assert running.service.sessions == {}
    assert running.service.receipts.recent(10) == []
    assert sorted(p.name for p in workspace.iterdir()) == before
    assert [m["content"] for m in upstream.requests[-1]["messages"][1:]] == [QUESTION]


@pytest.mark.parametrize("running", [{"advisor": "unreachable_advisor"}], indirect=True)
async def test_an_unreachable_model_is_advisor_unavailable(running: Running) -> None:
    async with mcp_client(running) as client:
        error = tool_error(await client.call_tool("terminal_advise", {"question": "hi"}))
    assert error["code"] == "TERMINAL_ADVISOR_UNAVAILABLE"
    assert running.service.sessions == {}


async def test_no_advisor_configured(running: Running) -> None:
    async with mcp_client(running) as client:
        error = tool_error(await client.call_tool("terminal_advise", {"question": "hi"}))
    assert error["code"] == "TERMINAL_ADVISOR_UNAVAILABLE"
