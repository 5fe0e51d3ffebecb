"""The order vision routes are considered in (the seed's "Route ordering and failover"):
as :func:`route_order` ranks it, and as the router, auto-detection and ``look`` use it
against loopback endpoints that really decode the pixels."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from deepseek_eyes.errors import VisionError
from deepseek_eyes.home import DataHome
from deepseek_eyes.llm.catalog import declares_image_input, declares_text_and_image_input
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.routing.order import route_order
from deepseek_eyes.vision_server.roots import NO_ROOTS
from deepseek_eyes.vision_server.service import VisionService
from vision.loopback import CATALOG_ENTRIES, LoopbackVisionServer, solid_png

KNOWN = {"base", "pick", "sel", "p1", "p2", "c1", "c2", "llm/a", "llm/b", "local"}
EVERY_STEP: dict[str, Any] = {
    "configured": ["c1", "p2", "c2", "sel"],
    "priority": ["p1", "p2"],
    "selected": "sel",
    "auto": ["llm/a", "llm/b"],
    "explicit": "pick",
    "base_route": "base",
}


# -- the pure order ----------------------------------------------------------------------


def test_every_step_in_the_seed_order() -> None:
    assert route_order(known=KNOWN, **EVERY_STEP) == [
        "base",            # 1. the route of the base evidence (a reread)
        "pick",            # 2. the explicit route ...
        "sel",             #    ... then vision.route
        "p1", "p2",        # 3. vision.route_priority
        "c1", "c2",        # 4. the other [[vision.routes]], in file order
        "llm/a", "llm/b",  # 5. auto-detected models
    ]


@pytest.mark.parametrize("step", ["base_route", "explicit"])
def test_a_missing_step_leaves_the_others_in_place(step: str) -> None:
    full = route_order(known=KNOWN, **EVERY_STEP)
    without = route_order(known=KNOWN, **{**EVERY_STEP, step: None})
    assert without == [name for name in full if name != EVERY_STEP[step]]


def test_without_vision_route_its_route_keeps_its_configured_place() -> None:
    assert route_order(known=KNOWN, **{**EVERY_STEP, "selected": None}) == [
        "base", "pick", "p1", "p2", "c1", "c2", "sel", "llm/a", "llm/b",
    ]


def test_an_explicit_route_is_prepended_not_a_replacement() -> None:
    configured = ["a", "b", "c"]
    known = {*configured, "local"}
    # Without a priority list the configured order is the failover behind it...
    assert route_order(known=known, configured=configured, explicit="c") == ["c", "a", "b"]
    # ...and a route also in the priority list moves to the front once.
    assert route_order(
        known=known, configured=configured, priority=["a", "b"], explicit="b"
    ) == ["b", "a", "c"]
    assert route_order(
        known=known, configured=configured, selected="a", explicit="c"
    ) == ["c", "a", "b"]


def test_an_unknown_explicit_route_is_refused() -> None:
    with pytest.raises(VisionError) as info:
        route_order(known={"a", "local"}, configured=["a"], explicit="nope")
    assert info.value.code == "VISION_ROUTE_UNKNOWN"
    assert info.value.details["known"] == ["a", "local"]
    assert info.value.message == (
        "no route is named 'nope'; the known routes are a, local "
        "(`deepseek-eyes routes` lists them)"
    )


def test_a_base_route_that_no_longer_exists_is_skipped() -> None:
    assert route_order(known={"a", "local"}, configured=["a"], base_route="gone") == ["a"]


def test_configured_routes_outside_the_priority_list_come_before_auto_detected() -> None:
    known = {"c1", "c2", "c3", "llm/a", "local"}
    assert route_order(
        known=known, configured=["c1", "c2", "c3"], priority=["c2"], auto=["llm/a"]
    ) == ["c2", "c1", "c3", "llm/a"]
    # The reviewer's case: auto-detection on, no priority list: the route still serves.
    assert route_order(known=known, configured=["c1"], auto=["llm/a"]) == ["c1", "llm/a"]


def test_local_serves_alone_or_where_it_is_named() -> None:
    assert route_order(known={"local"}) == ["local"]
    assert route_order(known={"local", "r"}, configured=["r"]) == ["r"]
    assert route_order(known={"local", "llm/a"}, auto=["llm/a"]) == ["llm/a"]
    assert route_order(
        known={"local", "r"}, configured=["r"], priority=["r", "local"]
    ) == ["r", "local"]
    assert route_order(known={"local"}, priority=["ghost"], auto=["llm/ghost"]) == ["local"]


# -- what counts as "declares text and image input" -------------------------------------


def test_only_a_list_of_both_input_modalities_qualifies() -> None:
    both = {e["id"] for e in CATALOG_ENTRIES if declares_text_and_image_input(e)}
    assert both == {"vision-1", "or-vision", "said-text"}
    # The native path reads image input more loosely; auto-detection does not.
    assert declares_image_input({"id": "image-only", "input_modalities": ["image"]})
    assert declares_image_input({"id": "flag", "supports_vision": True})
    assert not declares_text_and_image_input({"input_modalities": ["image"]})
    assert not declares_text_and_image_input({"supports_vision": True, "vision": True})
    assert not declares_text_and_image_input({"architecture": {"modality": "image->text"}})
    assert not declares_text_and_image_input({"input_modalities": "text,image"})
    assert declares_text_and_image_input({"modalities": ["Text", "Images"]})
    assert declares_text_and_image_input({"architecture": {"input_modalities": ["text", "image"]}})


# -- the router over loopback endpoints ---------------------------------------------------

@pytest.fixture
async def opened() -> AsyncIterator[list[VisionBridge]]:
    """Bridges a test opens (with ``open_bridge``), closed with their data homes."""
    bridges: list[VisionBridge] = []
    yield bridges
    for bridge in bridges:
        await bridge.aclose()
        bridge.home.close()


def open_bridge(opened: list[VisionBridge], values: dict[str, Any]) -> VisionBridge:
    settings = Settings.model_validate(values)
    bridge = VisionBridge(settings, DataHome.open(settings))
    opened.append(bridge)
    return bridge


def remote(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "base_url": url, "model": "vision-1", **extra}


@pytest.mark.anyio
async def test_a_model_declaring_only_image_input_is_not_auto_detected(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    bridge = open_bridge(opened, {
        "vision": {"auto_detect": True},
        "llm": {"base_url": loopback.url(f"healthy~{request.node.name}"), "api_key": None,
                "models": [{"id": "eyes-only", "input": ["image"]},
                           {"id": "vision-1", "input": ["text", "image"]}]},
    })
    assert bridge.router.order() == ["llm/vision-1"]
    await bridge.router.refresh_routes()
    assert bridge.router.order() == ["llm/vision-1"]
    assert "llm/eyes-only" not in bridge.router.routes


@pytest.mark.anyio
async def test_models_metadata_is_honoured(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    key = f"catalog~{request.node.name}"
    bridge = open_bridge(opened, {
        "vision": {"auto_detect": True},
        # An explicit input in the settings wins over what /models says.
        "llm": {"base_url": loopback.url(key), "api_key": None,
                "models": [{"id": "said-text", "input": ["text"]}]},
    })
    # The settings alone declare no vision model: the built-in routes (DeepSeek's own eyes
    # on this keyless upstream, then local) until the listing is read.
    assert bridge.router.order() == ["deepseek", "local"]
    result = await bridge.see(solid_png(24, 16))
    assert result.route == "llm/vision-1"
    assert loopback.last_payload[key]["model"] == "vision-1"
    assert bridge.router.order() == ["llm/vision-1", "llm/or-vision"]
    listed = {row["name"] for row in bridge.router.status()}
    assert not listed & {"llm/image-only", "llm/flag-vision", "llm/text-1", "llm/said-text"}


@pytest.mark.anyio
async def test_a_failed_listing_leaves_the_settings_answer(
    opened: list[VisionBridge],
) -> None:
    bridge = open_bridge(opened, {
        "vision": {"auto_detect": True},
        "llm": {"base_url": "http://127.0.0.1:9/v1", "api_key": None,  # nothing listens
                "models": [{"id": "vision-1", "input": ["text", "image"]}]},
    })
    await bridge.router.refresh_routes()
    assert bridge.router.order() == ["llm/vision-1"]


@pytest.mark.anyio
async def test_an_unset_endpoint_key_leaves_the_settings_answer(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    key = f"catalog~{request.node.name}"
    bridge = open_bridge(opened, {
        "vision": {"auto_detect": True},
        "llm": {"base_url": loopback.url(key), "api_key": {"env": "ROUTE_ORDER_UNSET_KEY"}},
    })
    await bridge.router.refresh_routes()
    assert bridge.router.order() == ["local"]
    assert loopback.model_calls[key] == 0


@pytest.mark.anyio
async def test_a_configured_route_without_priority_is_used_with_auto_detection(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    tag = request.node.name
    bridge = open_bridge(opened, {
        "vision": {"auto_detect": True,
                   "routes": [remote("mine", loopback.url(f"healthy~{tag}"))]},
        "llm": {"base_url": loopback.url(f"catalog~{tag}"), "api_key": None},
    })
    result = await bridge.see(solid_png(20, 20))
    assert result.route == "mine"
    assert bridge.router.order() == ["mine", "llm/vision-1", "llm/or-vision", "llm/said-text"]
    assert loopback.calls[f"catalog~{tag}"] == 0


@pytest.mark.anyio
async def test_a_configured_route_takes_its_name_from_an_auto_detected_model(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    tag = request.node.name
    bridge = open_bridge(opened, {
        "vision": {"auto_detect": True,
                   "routes": [remote("llm/vision-1", loopback.url(f"healthy~{tag}"))]},
        "llm": {"base_url": loopback.url(f"catalog~{tag}"), "api_key": None},
    })
    await bridge.router.refresh_routes()
    # The configured route stands where configured routes stand; the model has no row.
    assert bridge.router.order() == ["llm/vision-1", "llm/or-vision", "llm/said-text"]
    result = await bridge.see(solid_png(20, 20))
    assert result.route == "llm/vision-1"
    assert loopback.calls[f"healthy~{tag}"] == 2  # probe, evidence: the configured one
    assert loopback.calls[f"catalog~{tag}"] == 0


@pytest.mark.anyio
async def test_an_explicit_route_goes_first_and_fails_over_to_the_order(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    tag = request.node.name
    bridge = open_bridge(opened, {"vision": {"probe": False, "routes": [
        remote("good", loopback.url(f"healthy~{tag}")),
        remote("bad", loopback.url(f"error500~{tag}")),
    ]}})
    assert bridge.router.order(explicit="bad") == ["bad", "good"]
    result = await bridge.see(solid_png(12, 12), route="bad")
    assert result.route == "good"
    calls = [(a["route"], a["outcome"]) for a in result.attempts if a["phase"] == "call"]
    assert calls == [("bad", "fail"), ("good", "ok")]


@pytest.mark.anyio
async def test_look_tries_the_route_of_the_base_evidence_first(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest, opened: list[VisionBridge]
) -> None:
    tag = request.node.name
    bridge = open_bridge(opened, {"vision": {"route_priority": ["first", "second"], "routes": [
        remote("first", loopback.url(f"healthy~{tag}-first")),
        remote("second", loopback.url(f"healthy~{tag}-second")),
    ]}})
    service = VisionService(bridge, NO_ROOTS)
    data_url = "data:image/png;base64," + base64.b64encode(solid_png(30, 20)).decode()
    base = await service.see(data_url, route="second")
    assert base.route == "second"
    reread = await service.look(base.image.sha256, "How wide is it?")
    assert reread.route == "second"
    assert reread.record.evidence["schema"] == "deepseekeyes.target.v1"
    assert loopback.calls[f"healthy~{tag}-first"] == 0
    # Evidence from a route since removed: the reread still answers, from the order.
    again = await bridge.reread(base.image.sha256, "What colour is it?", base_route="gone")
    assert again.route == "first"
