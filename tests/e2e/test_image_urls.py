"""Image URLs work as OpenAI's API takes them, with the private-network guard on (#24.5).

langchain-openai (like llm and pydantic-ai) sends images as http(s) ``image_url`` parts.
The gateway fetches them by default, from public addresses only: a loopback URL is refused
with ``RUNTIME_IMAGE_FETCH_FAILED`` unless ``gateway.allow_private_image_urls`` is set (the
test's image server is on loopback, so that setting stands in for a public host; the
namespace test in tests/gateway/test_fetch.py covers a public first hop).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from helpers import open_gateway_env, require_module, serve_gateway
from runtime.upstream import LoopbackUpstream

MODEL = "deepseek-v4-pro"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def images() -> Iterator[str]:
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(ROOT / "examples"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/receipt.png"
    server.shutdown()
    server.server_close()


def _config(tmp_path: Path, upstream: LoopbackUpstream, extra: str = "") -> Path:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\nmodel = "{MODEL}"\n'
        f"[gateway]\n{extra}", encoding="utf-8")
    return config


@pytest.mark.slow
def test_an_image_url_from_langchain_is_fetched_and_bridged(
    tmp_path: Path, images: str,
) -> None:
    require_module("langchain_openai")
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    with LoopbackUpstream() as upstream, serve_gateway(
            _config(tmp_path, upstream, "allow_private_image_urls = true\n"),
            open_gateway_env(tmp_path / "data")) as gateway:
        model = ChatOpenAI(model=MODEL, base_url=gateway.base, api_key="unused",  # type: ignore[arg-type]
                           max_retries=0, timeout=120)
        answer = model.invoke([HumanMessage(content=[
            {"type": "text", "text": "What is the total?"},
            {"type": "image_url", "image_url": {"url": images}}])])
        assert answer.content
        sent: list[dict[str, Any]] = upstream.requests[-1]["messages"]
        text = str(sent)
        # The evidence of the fetched image reached the model (DeepSeek's own eyes read it:
        # only [llm] is set) and the image itself never did.
        assert "evidence from route deepseek" in text
        assert "the whole 900x700 image" in text
        assert "image_url" not in text


def test_a_private_image_url_is_refused_by_default(tmp_path: Path, images: str) -> None:
    with LoopbackUpstream() as upstream, serve_gateway(
            _config(tmp_path, upstream), open_gateway_env(tmp_path / "data")) as gateway, \
            openai.OpenAI(base_url=gateway.base, api_key="unused", max_retries=0) as client:
        calls = upstream.chat_calls
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": images}}]}])
        assert refused.value.code == "RUNTIME_IMAGE_FETCH_FAILED"
        assert upstream.chat_calls == calls
