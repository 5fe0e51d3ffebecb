"""OpenAIRoute against the loopback server: request shape, health, secrets, error mapping."""

from __future__ import annotations

import hashlib
import json
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from deepseek_eyes.errors import RouteError, RouteTimeoutError
from deepseek_eyes.settings import RouteSettings, SecretRef
from deepseek_eyes.vision.evidence.gate import validate_evidence
from deepseek_eyes.vision.routes.openai_compat import OpenAIRoute
from deepseek_eyes.vision.types import RouteAnswer, Variant, VisionRequest, VisionRoute
from vision.loopback import USAGE, LoopbackVisionServer, grid_png, solid_png

KEY_ENV = "LOOP_API_KEY"
API_KEY = "sk-route-secret-9f8e7d6c"
BOUND_S = 10


def tagged(behaviour: str) -> str:
    """A behaviour with its own counters on the shared server."""
    return f"{behaviour}~{uuid.uuid4().hex[:8]}"


def settings(url: str, **overrides: Any) -> RouteSettings:
    fields: dict[str, Any] = {
        "name": "loop",
        "base_url": url,
        "model": "vision-1",
        "api_key": SecretRef(env=KEY_ENV),
        "timeout": 5.0,
        **overrides,
    }
    return RouteSettings(**fields)


def request(
    width: int = 40, height: int = 30, prompt: str = "Describe the image."
) -> VisionRequest:
    return VisionRequest(
        purpose="evidence",
        image_bytes=solid_png(width, height, (200, 100, 50)),
        media_type="image/png",
        width=width,
        height=height,
        system_prompt="You are the eyes of a test.",
        user_prompt=prompt,
    )


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    return API_KEY


@pytest.fixture
async def route_factory() -> AsyncIterator[Any]:
    made: list[OpenAIRoute] = []

    def make(url: str, **overrides: Any) -> OpenAIRoute:
        route = OpenAIRoute(settings(url, **overrides))
        made.append(route)
        return route

    yield make
    for route in made:
        await route.aclose()


async def call(route: OpenAIRoute, req: VisionRequest | None = None) -> RouteAnswer:
    with anyio.fail_after(BOUND_S):
        return await route.call(req or request())


async def call_error(route: OpenAIRoute, req: VisionRequest | None = None) -> RouteError:
    with pytest.raises(RouteError) as caught:
        await call(route, req)
    return caught.value


def test_identity_follows_settings() -> None:
    route = OpenAIRoute(settings("http://127.0.0.1:1/v1", box_convention="xyxy-1000"))
    other_model = OpenAIRoute(settings("http://127.0.0.1:1/v1", model="vision-2"))

    assert isinstance(route, VisionRoute)
    assert (route.name, route.kind, route.model) == ("loop", "openai", "vision-1")
    assert route.probe_exempt is False
    assert route.box_convention == "xyxy-1000"
    expected = hashlib.sha256(b"openai\nhttp://127.0.0.1:1/v1\nvision-1").hexdigest()
    assert route.fingerprint == expected
    assert other_model.fingerprint != route.fingerprint


@pytest.mark.anyio
async def test_healthy_evidence_comes_from_the_pixels(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    key = tagged("healthy")
    route = route_factory(loopback.url(key))

    answer = await call(route, request(37, 23))

    assert answer.text is not None
    evidence = json.loads(answer.text)
    assert evidence["schema"] == "deepseekeyes.evidence.v1"
    assert "37x23" in evidence["summary"]
    assert "RGB(200, 100, 50)" in evidence["summary"]
    assert loopback.last_image_size[key] == (37, 23)
    assert answer.usage.prompt_tokens == USAGE["prompt_tokens"]
    assert answer.model == "vision-1"
    assert answer.streamed is False
    sent = loopback.last_payload[key]
    assert sent["messages"][0] == {"role": "system", "content": "You are the eyes of a test."}
    assert sent["messages"][1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "<image>"},
    }
    assert (sent["max_tokens"], sent["temperature"]) == (4096, 0.0)
    assert "response_format" not in sent
    expected_auth = hashlib.sha256(f"Bearer {api_key}".encode()).hexdigest()
    assert loopback.last_authorization_sha256[key] == expected_auth


@pytest.mark.anyio
async def test_target_prompt_gets_a_target_answer(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    route = route_factory(loopback.url(tagged("healthy")))
    answer = await call(route, request(64, 48, "Answer with a deepseekeyes.target.v1 object."))

    assert answer.text is not None
    assert json.loads(answer.text)["answer"] == "The image is 64x48 pixels."


@pytest.mark.anyio
async def test_json_mode_sends_response_format(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    key = tagged("healthy")
    route = route_factory(loopback.url(key), json_mode=True, max_tokens=512, temperature=0.2)
    await call(route)

    sent = loopback.last_payload[key]
    assert sent["response_format"] == {"type": "json_object"}
    assert (sent["max_tokens"], sent["temperature"]) == (512, 0.2)


@pytest.mark.anyio
async def test_streaming_mode(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    key = tagged("healthy")
    route = route_factory(loopback.url(key), stream=True)

    answer = await call(route, request(21, 13))

    assert answer.streamed is True
    assert answer.text is not None
    assert "21x13" in json.loads(answer.text)["summary"]
    assert answer.usage.completion_tokens == USAGE["completion_tokens"]
    assert loopback.last_payload[key]["stream"] is True


@pytest.mark.anyio
async def test_probe_grid_is_read_from_pixels_only_by_a_seeing_route(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    cells = [["blue", "green", "red"], ["yellow", "black", "white"], ["cyan", "magenta", "blue"]]
    probe = VisionRequest(
        purpose="probe",
        image_bytes=grid_png(cells, 20),
        media_type="image/png",
        width=60,
        height=60,
        system_prompt="Answer with JSON.",
        user_prompt="PROBE: name the colour of every cell.",
    )
    seeing = await call(route_factory(loopback.url(tagged("healthy"))), probe)
    blind = await call(route_factory(loopback.url(tagged("textonly")), model="text-1"), probe)

    assert seeing.text is not None
    assert blind.text is not None
    assert json.loads(seeing.text)["cells"] == cells
    assert json.loads(blind.text)["cells"] == [["red"] * 3] * 3


@pytest.mark.anyio
async def test_malformed_answer_is_returned_as_text(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    answer = await call(route_factory(loopback.url(tagged("malformed"))))
    assert answer.text is not None
    assert answer.text.startswith("<think>")
    assert '"font": "x"' in answer.text


@pytest.mark.anyio
async def test_health_check_lists_the_model(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    key = tagged("healthy")
    with anyio.fail_after(BOUND_S):
        await route_factory(loopback.url(key)).check_health()
    assert loopback.model_calls[key] == 1


@pytest.mark.anyio
async def test_health_check_fails_when_the_model_is_not_listed(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    route = route_factory(loopback.url(tagged("nomodel")))
    with anyio.fail_after(BOUND_S), pytest.raises(RouteError) as caught:
        await route.check_health()

    assert caught.value.code == "VISION_ROUTE_UNHEALTHY"
    assert caught.value.details["model"] == "vision-1"
    assert caught.value.operational is True


@pytest.mark.anyio
async def test_health_check_none_sends_nothing(
    loopback: LoopbackVisionServer, route_factory: Any
) -> None:
    key = tagged("nomodel")
    with anyio.fail_after(BOUND_S):
        await route_factory(loopback.url(key), health_check="none").check_health()
    assert loopback.model_calls[key] == 0


@pytest.mark.anyio
async def test_health_check_maps_transport_failures(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    route = route_factory(loopback.url("healthy").replace("/v1", "/v2"))
    with anyio.fail_after(BOUND_S), pytest.raises(RouteError) as caught:
        await route.check_health()

    assert caught.value.code == "VISION_ROUTE_HTTP_ERROR"
    assert caught.value.details["status"] == 404


@pytest.mark.anyio
@pytest.mark.parametrize(
    "overrides",
    [{}, {"api_key": None, "headers": {"X-Org": SecretRef(env="LOOP_ORG_TOKEN")}}],
    ids=["api_key", "header"],
)
async def test_missing_secret_is_not_operational(
    loopback: LoopbackVisionServer, route_factory: Any, overrides: dict[str, Any]
) -> None:
    key = tagged("healthy")
    route = route_factory(loopback.url(key), **overrides)

    error = await call_error(route)
    with pytest.raises(RouteError) as health:
        await route.check_health()

    for err in (error, health.value):
        assert err.code == "VISION_ROUTE_CREDENTIAL_MISSING"
        assert err.operational is False
    assert error.details["env"] in (KEY_ENV, "LOOP_ORG_TOKEN")
    assert loopback.calls[key] == 0
    assert loopback.model_calls[key] == 0


@pytest.mark.anyio
async def test_header_secret_resolves_from_the_environment(
    loopback: LoopbackVisionServer, route_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOP_ORG_TOKEN", "org-123")
    key = tagged("healthy")
    route = route_factory(
        loopback.url(key), api_key=None, headers={"X-Org": SecretRef(env="LOOP_ORG_TOKEN")}
    )
    await call(route)
    assert loopback.last_authorization_sha256[key] is None


@pytest.mark.anyio
async def test_http_500_maps_to_http_error(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    error = await call_error(route_factory(loopback.url(tagged("error500"))))

    assert error.code == "VISION_ROUTE_HTTP_ERROR"
    assert error.details["status"] == 500
    assert error.operational is True
    assert api_key not in json.dumps(error.to_dict()) + str(error) + repr(error)


@pytest.mark.anyio
async def test_hang_maps_to_route_timeout(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    route = route_factory(loopback.url(tagged("hang")), timeout=0.5)
    with pytest.raises(TimeoutError) as caught:  # callers may catch the builtin
        await call(route)

    error = caught.value
    assert isinstance(error, RouteTimeoutError)
    assert error.code == "VISION_ROUTE_TIMEOUT"
    assert error.operational is True


@pytest.mark.anyio
async def test_cut_stream_maps_to_stream_incomplete(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    error = await call_error(route_factory(loopback.url(tagged("cut")), stream=True))

    assert error.code == "VISION_ROUTE_STREAM_INCOMPLETE"
    assert error.details["chunks"] == 2
    assert error.operational is True


@pytest.mark.anyio
async def test_bad_chunk_and_empty_answer_are_bad_responses(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    bad_chunk = await call_error(route_factory(loopback.url(tagged("badchunk")), stream=True))
    empty = await call_error(route_factory(loopback.url(tagged("empty"))))

    assert bad_chunk.code == "VISION_ROUTE_BAD_RESPONSE"
    assert empty.code == "VISION_ROUTE_BAD_RESPONSE"
    assert empty.details["finish_reason"] == "stop"


@pytest.mark.anyio
async def test_refused_connection_maps_to_unavailable(api_key: str, route_factory: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await call_error(route_factory(f"http://127.0.0.1:{port}/v1"))

    assert error.code == "VISION_ROUTE_UNAVAILABLE"
    assert error.operational is True


@pytest.mark.anyio
async def test_loopback_answers_meet_the_evidence_gate(
    loopback: LoopbackVisionServer, api_key: str, route_factory: Any
) -> None:
    target_prompt = "Answer with a deepseekeyes.target.v1 object."
    answers = {
        ("healthy", Variant.EVIDENCE): request(),
        ("healthy", Variant.TARGET): request(prompt=target_prompt),
        ("textonly", Variant.EVIDENCE): request(),
        ("textonly", Variant.TARGET): request(prompt=target_prompt),
    }
    for (behaviour, variant), req in answers.items():
        route = route_factory(loopback.url(tagged(behaviour)))
        answer = await call(route, req)
        assert answer.text is not None
        assert validate_evidence(json.loads(answer.text), variant) == [], (behaviour, variant)

    malformed = await call(route_factory(loopback.url(tagged("malformed"))))
    assert malformed.text is not None
    fenced = malformed.text.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    issues = validate_evidence(json.loads(fenced), Variant.EVIDENCE)
    assert [issue.pointer for issue in issues] == ["/ocr/0/font"]


def test_namespaced_model_ids_match() -> None:
    from deepseek_eyes.vision.routes.openai_compat import _same_model

    assert _same_model("gemini-2.5-flash", "models/gemini-2.5-flash")
    assert _same_model("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct")
    assert not _same_model("vision-1", "vision-2")
