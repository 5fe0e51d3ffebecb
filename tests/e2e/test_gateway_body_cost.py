"""A body costs what it weighs, measured on a real ``deepseek-eyes serve`` process: a 32 MiB
body of empty objects in an unknown field (once 1.7-1.9 GB of RSS, 26 s and a 200) is
refused with a code while the process's peak RSS (``VmHWM``) stays under 700 MB, with the
text allowance raised too (the value count refuses it then); an image request near the old
limits still passes; an unknown field is dropped and named in ``deepseekeyes.ignored``."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import ServedGateway, serve_gateway
from runtime.upstream import LoopbackUpstream

RSS_LIMIT_MB = 700
RECEIPT = Path(__file__).resolve().parents[2] / "examples" / "receipt.png"
CHAT = "/chat/completions"


def _peak_rss_mb(pid: int) -> float:
    """The process's high-water resident set (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")


def _empty_objects(size: int) -> bytes:
    """``{"model", "messages", "extra": [{}, {}, …]}`` of about ``size`` bytes."""
    head = b'{"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}], '
    items = (size - len(head)) // 3
    return head + b'"extra": [' + b",".join([b"{}"] * items) + b"]}"


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def _serve(upstream: LoopbackUpstream, root: Path,
           gateway: str = "") -> Any:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
        f'model = "deepseek-v4-pro"\ntimeout = 30\n\n[gateway]\n{gateway}'
        "max_concurrent_turns = 2\n\n[image]\nmax_bytes = 33554432\n", encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root / "data")}
    return serve_gateway(config, env)


def _post(gateway: ServedGateway, body: bytes) -> httpx.Response:
    return httpx.post(gateway.base + CHAT, content=body, timeout=120,
                      headers={**gateway.headers, "content-type": "application/json"})


def test_a_32_mib_body_of_empty_objects_is_refused_in_bounded_memory(
    upstream: LoopbackUpstream, tmp_path: Path
) -> None:
    body = _empty_objects(32 * 1024 * 1024)
    for name, extra, code in (
        ("defaults", "", "GATEWAY_BODY_TEXT_TOO_LARGE"),
        # With the text allowance opened as wide as the body limit, the value count refuses.
        ("text allowance opened", "max_text_bytes = 67108864\n",
         "GATEWAY_JSON_TOO_MANY_NODES"),
    ):
        upstream.reset()
        with _serve(upstream, tmp_path / name.replace(" ", "-"), extra) as gateway:
            before = _peak_rss_mb(gateway.process.pid)
            started = time.perf_counter()
            response = _post(gateway, body)
            elapsed = time.perf_counter() - started
            peak = _peak_rss_mb(gateway.process.pid)
            assert response.status_code == 413, response.text
            assert response.json()["error"]["code"] == code
            assert peak < RSS_LIMIT_MB, (name, peak)
            assert upstream.requests == []
            # Still serving, and a good request right after passes.
            ok = _post(gateway, json.dumps({"model": "deepseek-v4-pro", "messages": [
                {"role": "user", "content": "hi"}]}).encode())
            assert ok.status_code == 200, ok.text
            print(f"{name}: refused {len(body) >> 20} MiB of {{}} with {code} in "
                  f"{elapsed:.2f}s; peak RSS {before:.0f} MB before, {peak:.0f} MB after")


def test_an_image_near_the_old_limits_still_passes_and_unknown_fields_are_named(
    upstream: LoopbackUpstream, tmp_path: Path
) -> None:
    upstream.reset()
    # The receipt 720 times over (one image to decode: repeats are found by their hash):
    # ~42 MiB of base64, five times the text allowance, within the body limit.
    url = "data:image/png;base64," + base64.b64encode(RECEIPT.read_bytes()).decode()
    images = [{"type": "image_url", "image_url": {"url": url}}] * 240  # 256 parts at most
    messages: list[dict[str, Any]] = []
    for _ in range(3):
        messages += [{"role": "user", "content": images}, {"role": "assistant", "content": "ok"}]
    messages[-1] = {"role": "user", "content": "What is the total?"}
    body = json.dumps({
        "model": "deepseek-v4-pro", "store": False, "metadata": {"run": [1, {"a": None}]},
        "messages": messages,
    }).encode()
    assert 40 * 1024 * 1024 < len(body) < 64 * 1024 * 1024
    with _serve(upstream, tmp_path) as gateway:
        response = _post(gateway, body)
        assert response.status_code == 200, response.text[:500]
        ours = response.json()["deepseekeyes"]
        assert ours["ignored"] == ["store", "metadata"]
        assert len(ours["evidence"]) == 1
        print(f"an image request of {len(body) >> 20} MiB passed; peak RSS "
              f"{_peak_rss_mb(gateway.process.pid):.0f} MB")
        sent = upstream.requests[-1]  # the final call (after the probes and the evidence)
        assert sent["model"] == "deepseek-v4-pro"
        assert "metadata" not in sent
        assert "store" not in sent
        plain = _post(gateway, json.dumps({"model": "deepseek-v4-pro", "messages": [
            {"role": "user", "content": "hi"}]}).encode())
        assert "ignored" not in plain.json()["deepseekeyes"]
