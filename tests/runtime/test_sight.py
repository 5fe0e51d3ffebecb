"""Eyes for whichever DeepSeek you have, end to end against the loopback DeepSeek.

The loopback follows DeepSeek's contract of 2026-12 (tests/runtime/upstream.py):
``deepseek-flash`` and its aliases decode every image they are sent, ``deepseek-v4-pro``
refuses image parts with DeepSeek's 400, its ``/models`` gives ids only, and a switch
(:meth:`LoopbackUpstream.grant_sight`) makes any model see. The settings here hold only
``[llm]``, as a new user's do, unless a test says otherwise: which model sees is learned
(a pixel probe of the model), and a blind model's images are read by the ``deepseek``
vision route (``deepseek-flash`` on the same upstream and key), then ``local``.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.messages import image_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import TurnRequest
from deepseek_eyes.settings import Settings
from runtime.upstream import TEXT_MODEL, VISION_MODEL, LoopbackUpstream

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
RECEIPT = (ROOT / "examples" / "receipt.png").read_bytes()
PROBE_WORD = "PROBE:"


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


def settings_for(upstream: LoopbackUpstream, model: str, **sections: Any) -> Settings:
    llm = {"base_url": upstream.base_url, "api_key": False, "model": model, "timeout": 10.0,
           **sections.pop("llm", {})}
    return Settings.model_validate({"llm": llm, **sections})


@pytest.fixture
async def opened() -> AsyncIterator[list[Runtime]]:
    runtimes: list[Runtime] = []
    yield runtimes
    for runtime in runtimes:
        await runtime.aclose()
        runtime.home.close()


async def runtime_for(opened: list[Runtime], settings: Settings) -> Runtime:
    runtime = Runtime(settings, DataHome.open(settings))
    await runtime.start()
    opened.append(runtime)
    return runtime


def user(text: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}, *parts]}


def probes(upstream: LoopbackUpstream, model: str) -> list[dict[str, Any]]:
    return [r for r in upstream.requests_for(model)
            if PROBE_WORD in json.dumps(r.get("messages"))]


def evidence_calls(upstream: LoopbackUpstream, model: str) -> list[dict[str, Any]]:
    return [r for r in upstream.requests_for(model)
            if "deepseekeyes.evidence.v1" in json.dumps(r.get("messages"))]


def png(width: int, height: int, colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, format="PNG")
    return out.getvalue()


async def test_a_text_only_model_is_learned_and_deepseeks_own_eyes_read_its_image(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, TEXT_MODEL))
    meta = await runtime.bridge.admit(RECEIPT)
    result = await runtime.run(TurnRequest(messages=[user("ANSWER: read", image_part(meta))]))

    assert result.path == "bridged"
    assert result.sight is not None
    assert (result.sight["sees"], result.sight["how"], result.sight["code"]) == (
        False, "probe", "LLM_IMAGE_REFUSED")
    # One probe of v4-pro (refused with DeepSeek's 400), then the deepseek route: its own
    # probe and the evidence call, both to deepseek-flash on the same upstream.
    assert len(probes(upstream, TEXT_MODEL)) == 1
    assert len(probes(upstream, VISION_MODEL)) == 1
    assert len(evidence_calls(upstream, VISION_MODEL)) == 1
    assert result.evidence[0]["route"] == "deepseek"
    # The final model never received an image part.
    final = [r for r in upstream.requests_for(TEXT_MODEL) if PROBE_WORD not in json.dumps(r)]
    assert "image_url" not in json.dumps(final)
    attempts = runtime.bridge.attempts.rows(result.evidence[0]["operation_id"])
    assert {a["route"] for a in attempts if a["route"]} == {"deepseek"}

    # Learned once: the next image turn asks no probe.
    before = len(upstream.requests)
    again = await runtime.run(TurnRequest(messages=[user("ANSWER: again", image_part(meta))]))
    assert again.sight is not None
    assert again.sight["how"] == "probe"
    assert len(upstream.requests) == before + 1  # the answer; the evidence is cached


@pytest.mark.parametrize("fault", ["misprobe", "badjson"])
async def test_deepseeks_eyes_fall_over_to_local_when_they_fail(
    upstream: LoopbackUpstream, opened: list[Runtime], fault: str
) -> None:
    upstream.reset()
    upstream.vision_fault(VISION_MODEL, fault)
    try:
        runtime = await runtime_for(opened, settings_for(upstream, TEXT_MODEL))
        acquisition = await runtime.bridge.see(png(30, 20, (0, 90, 0)))
    finally:
        upstream.vision_fault(VISION_MODEL, None)
    assert acquisition.route == "local"
    failed = [a for a in acquisition.attempts if a["route"] == "deepseek" and a["code"]]
    assert failed, acquisition.attempts
    if fault == "misprobe":
        assert failed[-1]["code"] == "VISION_PROBE_FAILED"
    else:
        assert failed[-1]["code"].startswith(("EVIDENCE_", "VISION_")), failed
    assert any(a["route"] == "local" for a in acquisition.attempts)


async def test_a_seeing_model_gets_the_pixels_themselves(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, VISION_MODEL))
    meta = await runtime.bridge.admit(RECEIPT)
    result = await runtime.run(TurnRequest(messages=[user("what is it?", image_part(meta))]))

    assert result.path == "native"
    assert result.sight is not None
    assert (result.sight["sees"], result.sight["how"]) == (
        True, "probe")
    assert result.evidence == []
    assert result.content == "I see an image of 900x700 pixels."
    final = upstream.decoded[-1]
    assert final["model"] == VISION_MODEL
    assert [i["sha256"] for i in final["images"]] == [hashlib.sha256(RECEIPT).hexdigest()]
    assert not evidence_calls(upstream, VISION_MODEL)
    usage = runtime.home.usage.summary()
    assert usage["estimated"]["native_image_input"]["estimated_tokens"] == 402  # ceil(900*700/1568)


async def test_a_model_that_gains_sight_is_noticed_without_a_settings_change(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, TEXT_MODEL))
    meta = await runtime.bridge.admit(png(64, 48))
    first = await runtime.run(TurnRequest(messages=[user("ANSWER: one", image_part(meta))]))
    assert first.path == "bridged"
    upstream.grant_sight(TEXT_MODEL)
    try:
        # A day later the verdict has expired (its row says so), and the model is asked again.
        runtime.home.db.execute("UPDATE model_sight SET expires_at = 0")
        later = await runtime.run(TurnRequest(messages=[user("look", image_part(meta))]))
    finally:
        upstream.grant_sight(TEXT_MODEL, sees=False)
    assert later.path == "native"
    assert later.sight is not None
    assert (later.sight["sees"], later.sight["how"]) == (
        True, "probe")
    assert later.content == "I see an image of 64x48 pixels."


async def test_a_refusal_of_pixels_mid_turn_goes_on_with_evidence(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, "deepseek-v4-flash"))
    meta = await runtime.bridge.admit(png(40, 30))
    first = await runtime.run(TurnRequest(messages=[user("hi", image_part(meta))]))
    assert first.path == "native"
    # DeepSeek re-points the alias to a text-only model: the learned verdict is stale.
    upstream.grant_sight("deepseek-v4-flash", sees=False)
    try:
        second = await runtime.run(TurnRequest(messages=[user("ANSWER: fine", image_part(meta))]))
    finally:
        upstream.grant_sight("deepseek-v4-flash")
    assert second.content == "fine"
    assert second.path == "bridged"
    assert second.sight is not None
    assert (second.sight["how"], second.sight["rebridged"]) == ("refusal", True)
    assert second.evidence
    assert second.evidence[0]["route"] == "deepseek"
    assert second.model_calls == 2  # the refused call, then the answer
    verdict = runtime.sight.learned("deepseek-v4-flash")
    assert verdict is not None
    assert not verdict.sees
    assert verdict.code == "LLM_IMAGE_REFUSED"


async def test_the_settings_decide_when_they_say_and_nothing_is_probed(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    models = [{"id": VISION_MODEL, "input": ["text"]}]
    runtime = await runtime_for(opened, settings_for(
        upstream, VISION_MODEL, llm={"models": models}, vision={"deepseek": {"enabled": False}}))
    meta = await runtime.bridge.admit(RECEIPT)
    result = await runtime.run(TurnRequest(messages=[user("ANSWER: ok", image_part(meta))]))
    assert result.path == "bridged"
    assert result.sight == {"model": VISION_MODEL, "sees": False, "how": "settings"}
    assert not probes(upstream, VISION_MODEL)
    assert result.evidence[0]["route"] == "local"


async def test_delivery_both_sends_pixels_and_evidence_together(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(
        upstream, VISION_MODEL, vision={"delivery": "both"}))
    meta = await runtime.bridge.admit(RECEIPT)
    result = await runtime.run(TurnRequest(messages=[user("what?", image_part(meta))]))
    assert result.path == "native"
    assert result.evidence
    assert result.evidence[0]["route"] in ("deepseek", "local")
    final = upstream.requests_for(VISION_MODEL)[-1]
    parts = final["messages"][-1]["content"]
    kinds = [p["type"] for p in parts]
    assert kinds == ["text", "image_url", "text"]
    assert "img-1" in parts[2]["text"]
    assert "evidence" in parts[2]["text"].lower()


async def test_delivery_evidence_keeps_pixels_from_a_seeing_model(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(
        upstream, VISION_MODEL, vision={"delivery": "evidence"}))
    meta = await runtime.bridge.admit(RECEIPT)
    result = await runtime.run(TurnRequest(messages=[user("ANSWER: ok", image_part(meta))]))
    assert result.path == "bridged"
    final = [r for r in upstream.requests_for(VISION_MODEL)
             if PROBE_WORD not in json.dumps(r) and "deepseekeyes.evidence" not in json.dumps(r)]
    assert "image_url" not in json.dumps(final[-1])


async def test_look_with_a_region_zooms_for_both_kinds_of_model(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    picture = Image.new("RGB", (400, 200), (255, 255, 255))
    picture.paste((0, 0, 255), (200, 100, 400, 200))  # the bottom-right quarter is blue
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    ask = 'CALL[look]: {"image": "img-1", "question": "colour?", "region": [0.5, 0.5, 0.5, 0.5]}'

    seeing = await runtime_for(opened, settings_for(upstream, VISION_MODEL))
    meta = await seeing.bridge.admit(buffer.getvalue())
    result = await seeing.run(TurnRequest(messages=[user(ask, image_part(meta))]))
    assert result.path == "native"
    (call,) = result.tools
    assert call["tool"] == "look"
    assert call["pixels"] is True
    assert call["region"] == [0.5, 0.5, 0.5, 0.5]
    # The crop went back inside the tool result, as pixels, and was decoded upstream.
    crop = upstream.decoded[-1]["images"][-1]
    assert (crop["role"], crop["width"], crop["height"]) == ("tool", 200, 100)
    assert "I see an image of 200x100 pixels." in result.content

    blind = await runtime_for(opened, settings_for(upstream, TEXT_MODEL))
    meta = await blind.bridge.admit(buffer.getvalue())
    result = await blind.run(TurnRequest(messages=[user(ask, image_part(meta))]))
    assert result.path == "bridged"
    (call,) = result.tools
    assert call["tool"] == "look"
    assert call["region"] == [0.5, 0.5, 0.5, 0.5]
    assert "The image is 200x100 pixels." in result.content  # the reread read the crop
    assert "Region [0.5, 0.5, 0.5, 0.5] of img-1" in result.content


async def test_a_bad_region_is_the_models_error_not_the_turns(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, VISION_MODEL))
    meta = await runtime.bridge.admit(png(50, 50))
    ask = 'CALL[look]: {"image": "img-1", "question": "q", "region": [0.5, 0.5, 0, 2]}'
    result = await runtime.run(TurnRequest(messages=[user(ask, image_part(meta))]))
    assert "after look: region must be [x, y, w, h]" in result.content


async def test_an_image_too_large_for_the_model_is_fitted_before_it_is_sent(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, VISION_MODEL))
    meta = await runtime.bridge.admit(png(9000, 300))
    result = await runtime.run(TurnRequest(messages=[user("size?", image_part(meta))]))
    assert result.path == "native"
    (sent,) = upstream.decoded[-1]["images"]
    assert (sent["width"], sent["height"]) == (8192, 273)
    assert result.content == "I see an image of 8192x273 pixels."
    # The stored original is untouched.
    assert runtime.bridge.image_bytes(meta.sha256) == png(9000, 300)


async def test_five_tool_turns_on_deepseek_flash_never_get_the_reasoning_400(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    """DeepSeek's whole-exchange rule: every assistant message of an exchange that called
    tools goes back with its reasoning, the final answer too; the loopback refuses any
    request that breaks it."""
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(upstream, VISION_MODEL))
    meta = await runtime.bridge.admit(png(32, 32))
    history: list[dict[str, Any]] = []
    for number in range(5):
        ask = f"LOOK[img-1]: turn {number}?" if number % 2 == 0 else f"ANSWER: plain {number}"
        parts = [image_part(meta)] if number == 0 else []
        history.append(user(ask, *parts))
        result = await runtime.run(TurnRequest(messages=list(history), session_id="five"))
        assert result.tools if number % 2 == 0 else not result.tools
        history.append({"role": "assistant", "content": result.content})  # no reasoning
    assert result.content == "after look: [img-1: the image, 32x32 image/png, attached as pixels]"\
        "\nI see an image of 32x32 pixels."
    final = [r for r in upstream.requests_for(VISION_MODEL) if PROBE_WORD not in json.dumps(r)]
    sent = final[-1]["messages"]
    # Every assistant message of an exchange that called look went back with reasoning,
    # the exchanges' final answers too (the client resent them without it).
    users = [i for i, m in enumerate(sent) if m["role"] == "user"]
    for start, end in zip(users, [*users[1:], len(sent)], strict=True):
        exchange = [m for m in sent[start:end] if m["role"] == "assistant"]
        if any(m.get("tool_calls") for m in exchange):
            assert all(isinstance(m.get("reasoning_content"), str) for m in exchange), exchange


@pytest.mark.parametrize(("status", "message", "refused"), [
    (400, "Failed to deserialize the JSON body into the target type: messages[1]: unknown "
          "variant `image_url`, expected `text`", True),
    (400, "This model does not support image input", True),
    (400, "Vision is not supported for this model", True),
    (400, "messages[0]: the image is larger than 32 MiB", False),  # one image, not sight
    (400, "Missing `reasoning_content` field", False),
    (503, "unknown variant `image_url`, expected `text`", False),
])
def test_a_refusal_of_sight_is_told_apart_from_other_400s(
    status: int, message: str, refused: bool
) -> None:
    from deepseek_eyes.errors import LLMError
    from deepseek_eyes.runtime.sight import refuses_images

    exc = LLMError("x", code="LLM_HTTP_ERROR",
                   details={"status": status, "provider_message": message})
    assert refuses_images(exc) is refused


async def test_look_with_delivery_both_gives_the_crop_and_its_evidence(
    upstream: LoopbackUpstream, opened: list[Runtime]
) -> None:
    upstream.reset()
    runtime = await runtime_for(opened, settings_for(
        upstream, VISION_MODEL, vision={"delivery": "both"}))
    meta = await runtime.bridge.admit(png(400, 200))
    ask = 'CALL[look]: {"image": "img-1", "question": "q", "region": [0, 0, 0.5, 0.5]}'
    result = await runtime.run(TurnRequest(messages=[user(ask, image_part(meta))]))
    finals = [r for r in upstream.requests_for(VISION_MODEL)
              if PROBE_WORD not in json.dumps(r) and "deepseekeyes.evidence.v1" not in
              json.dumps(r) and "deepseekeyes.target.v1" not in json.dumps(r)]
    (tool,) = [m for m in finals[-1]["messages"] if m["role"] == "tool"]
    assert [p["type"] for p in tool["content"]] == ["text", "image_url"]
    assert "Boxes below are relative to the crop" in tool["content"][0]["text"]
    assert upstream.decoded[-1]["images"][-1]["width"] == 200
    assert "I see an image of 200x100 pixels." in result.content
