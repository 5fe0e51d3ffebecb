"""ModelCatalog against the DeepSeek-like loopback upstream (and httpx.MockTransport where a
test must hold a listing in flight or serve one no real server would)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

from deepseek_eyes.errors import LLMError
from deepseek_eyes.llm import (
    MAX_LISTED_MODELS,
    ChatClient,
    ModelCatalog,
    ModelInfo,
    declares_image_input,
)
from deepseek_eyes.llm.catalog import FAILURE_RETRY_S
from deepseek_eyes.settings import LLMSettings
from runtime.upstream import BEHAVIOUR_MODELS, TEXT_MODELS, VISION_MODEL, LoopbackUpstream

BOUND_S = 10
TTL = 60.0


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    extra = [
        {"id": "or-vision", "architecture": {"input_modalities": ["text", "image"]}},
        {"id": "or-modality", "architecture": {"modality": "text+image->text"}},
        {"id": "caps-dict", "capabilities": {"vision": True}},
        {"id": "caps-list", "capabilities": ["completion", "vision"]},
        {"id": "mods-dict", "modalities": {"input": ["text", "image"], "output": ["text"]}},
        {"id": "mods-list", "modalities": ["text", "image"]},
        {"id": "flag-supports", "supports_vision": True},
        {"id": "flag-vision", "vision": True},
        {"id": "text-only-out", "modalities": {"input": ["text"], "output": ["image"]}},
        {"id": "caps-no", "capabilities": {"vision": False}},
    ]
    with LoopbackUpstream(extra_models=extra) as loopback:
        yield loopback


@pytest.fixture
async def client(upstream: LoopbackUpstream) -> AsyncIterator[ChatClient]:
    chat = ChatClient(upstream.base_url, timeout=BOUND_S)
    yield chat
    await chat.aclose()


def settings(base_url: str = "http://127.0.0.1:9/v1", **values: Any) -> LLMSettings:
    return LLMSettings.model_validate(
        {"base_url": base_url, "api_key": None, "models_ttl": TTL, **values}
    )


async def models(catalog: ModelCatalog) -> list[ModelInfo]:
    with anyio.fail_after(BOUND_S):
        return await catalog.models()


@pytest.mark.anyio
async def test_settings_models_come_first_then_the_upstream_ones(
    upstream: LoopbackUpstream, client: ChatClient
) -> None:
    configured = settings(
        upstream.base_url,
        model="deepseek-v4-flash",
        models=[{"id": "deepseek-v4-pro", "input": ["text"]}, {"id": "my-local-model"}],
    )
    listed = await models(ModelCatalog(configured, client))

    ids = [info.id for info in listed]
    assert ids[:3] == ["deepseek-v4-pro", "my-local-model", "deepseek-v4-flash"]
    assert ids[3] == VISION_MODEL
    assert set(BEHAVIOUR_MODELS) < set(ids)
    assert len(ids) == len(set(ids))
    by_id = {info.id: info for info in listed}
    assert by_id["deepseek-v4-pro"] == ModelInfo(
        "deepseek-v4-pro", image_input=False, source="settings+upstream", owned_by="deepseek"
    )
    assert by_id["my-local-model"] == ModelInfo(
        "my-local-model", image_input=False, source="settings"
    )
    assert by_id["deepseek-v4-flash"].source == "settings+upstream"
    # DeepSeek's listing gives ids only: it says nothing of images (runtime/sight.py asks
    # the model itself).
    assert by_id[VISION_MODEL] == ModelInfo(
        VISION_MODEL, image_input=False, source="upstream", owned_by="deepseek",
        listing_image=None,
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        (VISION_MODEL, False),  # DeepSeek's ids-only listing declares nothing
        ("or-vision", True),
        ("or-modality", True),
        ("caps-dict", True),
        ("caps-list", True),
        ("mods-dict", True),
        ("mods-list", True),
        ("flag-supports", True),
        ("flag-vision", True),
        ("text-only-out", False),
        ("caps-no", False),
        (TEXT_MODELS[0], False),
        ("not-listed-anywhere", False),
    ],
)
async def test_image_input_is_read_from_every_metadata_shape(
    client: ChatClient, model_id: str, expected: bool
) -> None:
    catalog = ModelCatalog(settings(), client)
    with anyio.fail_after(BOUND_S):
        assert await catalog.image_input(model_id) is expected


def test_declares_image_input_ignores_what_it_cannot_read() -> None:
    assert not declares_image_input({"id": "x", "input_modalities": "image"})  # not a list
    assert not declares_image_input({"id": "x", "architecture": {"modality": "text->image"}})
    assert not declares_image_input({"id": "x", "vision": "yes"})
    # Only the first items of a list are looked at: metadata is bounded work.
    assert not declares_image_input({"input_modalities": ["text"] * 1000 + ["image"]})


@pytest.mark.anyio
async def test_settings_input_wins_over_the_upstream_but_a_default_does_not(
    client: ChatClient,
) -> None:
    configured = settings(
        models=[
            {"id": "or-vision", "input": ["text"]},  # explicit: the operator says no
            {"id": "deepseek-v4-pro", "input": ["text", "image"]},  # explicit: yes
            {"id": "caps-dict"},  # no input given: the upstream's metadata decides
        ]
    )
    catalog = ModelCatalog(configured, client)
    with anyio.fail_after(BOUND_S):
        assert await catalog.image_input("or-vision") is False
        assert await catalog.image_input("deepseek-v4-pro") is True
        assert await catalog.image_input("caps-dict") is True
        info = await catalog.get("caps-dict")
    assert info is not None
    assert info.source == "settings+upstream"


@pytest.mark.anyio
async def test_the_listing_is_reused_for_the_ttl(
    upstream: LoopbackUpstream, client: ChatClient
) -> None:
    clock = Clock()
    catalog = ModelCatalog(settings(), client, clock=clock)
    before = upstream.models_calls

    await models(catalog)
    await models(catalog)
    with anyio.fail_after(BOUND_S):
        await catalog.get(VISION_MODEL)
        await catalog.image_input("deepseek-v4-pro")
    assert upstream.models_calls == before + 1

    clock.now += TTL - 0.001
    await models(catalog)
    assert upstream.models_calls == before + 1
    clock.now += 0.002
    await models(catalog)
    assert upstream.models_calls == before + 2


@pytest.mark.anyio
async def test_a_failed_listing_keeps_the_last_good_one(
    upstream: LoopbackUpstream, client: ChatClient
) -> None:
    clock = Clock()
    catalog = ModelCatalog(settings(models=[{"id": "mine"}]), client, clock=clock)
    good = await models(catalog)
    assert catalog.last_error is None
    before = upstream.models_calls
    upstream.fail_models(503)
    try:
        clock.now += TTL + 1
        assert await models(catalog) == good
        assert catalog.last_error == "LLM_HTTP_ERROR"
        assert upstream.models_calls == before + 1
        # A down upstream is not asked again on every call...
        clock.now += FAILURE_RETRY_S - 1
        assert await models(catalog) == good
        assert upstream.models_calls == before + 1
    finally:
        upstream.fail_models(None)
    # ...but once the retry window has passed, a good answer clears the error.
    clock.now += 2
    assert await models(catalog) == good
    assert upstream.models_calls == before + 2
    assert catalog.last_error is None


@pytest.mark.anyio
async def test_an_unreachable_upstream_leaves_the_settings_models() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    chat = ChatClient(f"http://127.0.0.1:{port}/v1", timeout=BOUND_S)
    try:
        catalog = ModelCatalog(settings(models=[{"id": "mine", "input": ["image"]}]), chat)
        listed = await models(catalog)
    finally:
        await chat.aclose()
    assert listed == [ModelInfo("mine", image_input=True, source="settings")]
    assert catalog.last_error == "LLM_UNAVAILABLE"


@pytest.mark.anyio
async def test_default_model_rules(upstream: LoopbackUpstream, client: ChatClient) -> None:
    with anyio.fail_after(BOUND_S):
        named = settings(model="picked", models=[{"id": "first"}])
        assert await ModelCatalog(named, client).default_model() == "picked"
        listed = settings(models=[{"id": "first"}, {"id": "second"}])
        assert await ModelCatalog(listed, client).default_model() == "first"
        # No model named: the upstream's first, as it lists them (deepseek-flash here).
        assert await ModelCatalog(settings(), client).default_model() == "deepseek-flash"


def listing_client(data: list[dict[str, Any]] | None, *, status: int = 200) -> ChatClient:
    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"object": "list", "data": data})

    return ChatClient("http://model.test/v1", transport=httpx.MockTransport(handler))


@pytest.mark.anyio
async def test_no_model_anywhere_is_model_unknown() -> None:
    chat = listing_client([])
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await ModelCatalog(settings(), chat).default_model()
    finally:
        await chat.aclose()
    assert caught.value.code == "LLM_MODEL_UNKNOWN"
    assert caught.value.details == {"last_error": None}


@pytest.mark.anyio
async def test_a_failed_listing_keeps_its_own_code_instead_of_model_unknown() -> None:
    chat = listing_client(None, status=500)
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await ModelCatalog(settings(), chat).default_model()
    finally:
        await chat.aclose()
    assert caught.value.code == "LLM_HTTP_ERROR"
    assert caught.value.details["status"] == 500
    assert caught.value.details["stage"] == "list_models"


@pytest.mark.anyio
async def test_a_down_upstream_is_unavailable_not_model_unknown() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    chat = ChatClient("http://model.test/v1", transport=httpx.MockTransport(refuse))
    catalog = ModelCatalog(settings(), chat)
    try:
        with anyio.fail_after(BOUND_S), pytest.raises(LLMError) as caught:
            await catalog.default_model()
    finally:
        await chat.aclose()
    assert caught.value.code == "LLM_UNAVAILABLE"
    assert catalog.last_failure is not None
    assert catalog.last_failure.code == "LLM_UNAVAILABLE"


@pytest.mark.anyio
async def test_a_listing_is_read_up_to_its_cap_and_odd_entries_are_skipped() -> None:
    data: list[dict[str, Any]] = [{"id": ""}, {"id": 7}, {"id": "x" * 201}, {"id": "dup"}]
    data += [{"id": "dup", "owned_by": "second"}]
    data += [{"id": f"m{i}"} for i in range(MAX_LISTED_MODELS + 500)]
    chat = listing_client(data)
    try:
        listed = await models(ModelCatalog(settings(), chat))
    finally:
        await chat.aclose()
    assert len(listed) == MAX_LISTED_MODELS - 4  # the cap counts entries read, odd ones too
    assert listed[0] == ModelInfo("dup", image_input=False, source="upstream")
    assert listed[-1].id == f"m{MAX_LISTED_MODELS - 6}"


@pytest.mark.anyio
async def test_concurrent_callers_share_one_refresh_and_a_stale_one_serves_meanwhile() -> None:
    calls = 0
    in_flight = anyio.Event()
    release = anyio.Event()

    async def handler(_: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 2:  # the second listing is held in flight
            in_flight.set()
            await release.wait()
        return httpx.Response(200, json={"data": [{"id": f"gen{calls}"}]})

    clock = Clock()
    chat = ChatClient("http://model.test/v1", transport=httpx.MockTransport(handler))
    catalog = ModelCatalog(settings(), chat, clock=clock)
    try:
        with anyio.fail_after(BOUND_S):
            results: list[list[ModelInfo]] = []

            async def ask() -> None:
                results.append(await catalog.models())

            async with anyio.create_task_group() as group:
                for _ in range(5):
                    group.start_soon(ask)
            assert calls == 1
            assert all([m.id for m in r] == ["gen1"] for r in results)

            clock.now += TTL + 1
            refreshed: list[list[ModelInfo]] = []

            async def refresh() -> None:
                refreshed.append(await catalog.models())

            async with anyio.create_task_group() as group:
                group.start_soon(refresh)
                await in_flight.wait()
                # Meanwhile another caller gets the stale listing at once.
                assert [m.id for m in await catalog.models()] == ["gen1"]
                release.set()
            assert [m.id for m in refreshed[0]] == ["gen2"]
            assert calls == 2
    finally:
        await chat.aclose()
