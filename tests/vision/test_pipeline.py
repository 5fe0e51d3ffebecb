"""The acquisition's shape: each stage once, in order, and the image hashed once.

The router sequences the stages of :mod:`deepseek_eyes.vision.routing.pipeline`; these
tests watch them from outside against a real loopback endpoint (which decodes every image
it is sent), a real data directory and real blobs: which stages ran and in what order
(each stage class is wrapped to log its calls), how often the image's bytes went through
SHA-256 (``hashlib.sha256`` wrapped, counting only calls over exactly those bytes), how
often intake decoded and how often the blob store was read or written.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from deepseek_eyes.errors import StoreError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.routing.pipeline import intake as intake_module
from deepseek_eyes.vision.routing.pipeline.gate import EvidenceGate
from deepseek_eyes.vision.routing.pipeline.intake import ImageIntake
from deepseek_eyes.vision.routing.pipeline.lookup import EvidenceLookup
from deepseek_eyes.vision.routing.pipeline.routes import RouteWalk
from deepseek_eyes.vision.routing.pipeline.store import EvidenceStore
from deepseek_eyes.vision.types import Variant
from vision.loopback import LoopbackVisionServer, solid_png

pytestmark = pytest.mark.anyio

#: The stage methods the router calls, by the stage's name in the pipeline.
STAGES: dict[str, tuple[type, str]] = {
    "lookup": (EvidenceLookup, "find"),
    "intake": (ImageIntake, "admit"),
    "routes": (RouteWalk, "first_accepted"),
    "gate": (EvidenceGate, "check"),
    "store": (EvidenceStore, "keep"),
}


@dataclass
class Watch:
    """What one stretch of a test did to the image and the stages."""

    data: bytes
    stages: list[str] = field(default_factory=list)
    hashes: int = 0
    decodes: int = 0
    blobs: Counter[str] = field(default_factory=Counter)

    def reset(self, data: bytes | None = None) -> None:
        if data is not None:
            self.data = data
        self.stages.clear()
        self.hashes = self.decodes = 0
        self.blobs.clear()


def _logged(watch: Watch, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    if name in ("intake", "routes"):  # the async stages

        async def stage_async(*args: Any, **kwargs: Any) -> Any:
            watch.stages.append(name)
            return await method(*args, **kwargs)

        return stage_async

    def stage(*args: Any, **kwargs: Any) -> Any:
        watch.stages.append(name)
        return method(*args, **kwargs)

    return stage


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Watch:
    watched = Watch(b"")
    for name, (cls, attribute) in STAGES.items():
        monkeypatch.setattr(cls, attribute, _logged(watched, name, getattr(cls, attribute)))

    real_sha256 = hashlib.sha256

    def sha256(*args: Any, **kwargs: Any) -> Any:
        if args and len(args[0]) == len(watched.data) and args[0] == watched.data:
            watched.hashes += 1
        return real_sha256(*args, **kwargs)

    monkeypatch.setattr(hashlib, "sha256", sha256)
    real_decode = intake_module.decode_image

    def decode(*args: Any, **kwargs: Any) -> Any:
        watched.decodes += 1
        return real_decode(*args, **kwargs)

    monkeypatch.setattr(intake_module, "decode_image", decode)
    return watched


@pytest.fixture
async def opened(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Callable[..., VisionBridge]]:
    """Opens a bridge over tagged loopback behaviours, with the blob store's reads and
    writes counted into the watch it is given; closed after the test."""
    bridges: list[tuple[VisionBridge, DataHome]] = []
    tag = request.node.name

    def open_bridge(watch: Watch, *behaviours: str) -> VisionBridge:
        routes = [
            {
                "name": behaviour,
                "base_url": loopback.url(f"{behaviour}~{tag}"),
                "model": "vision-1",
                # The malformed server answers every prompt alike: no probe, to reach the gate.
                "probe": behaviour != "malformed",
            }
            for behaviour in behaviours
        ]
        settings = Settings.model_validate(
            {"vision": {"routes": routes, "route_priority": list(behaviours)}}
        )
        home = DataHome.open(settings)
        blob_get, blob_put = home.blobs.get, home.blobs.put

        def get(*args: Any, **kwargs: Any) -> bytes:
            watch.blobs["get"] += 1
            return blob_get(*args, **kwargs)

        def put(*args: Any, **kwargs: Any) -> Any:
            watch.blobs["put"] += 1
            return blob_put(*args, **kwargs)

        monkeypatch.setattr(home.blobs, "get", get)
        monkeypatch.setattr(home.blobs, "put", put)
        bridge = VisionBridge(settings, home)
        bridges.append((bridge, home))
        return bridge

    yield open_bridge
    for bridge, home in bridges:
        await bridge.aclose()
        home.close()


def phases(attempts: Any) -> list[tuple[str | None, str, str]]:
    return [(a["route"], a["phase"], a["outcome"]) for a in attempts]


async def test_a_new_image_walks_intake_lookup_routes_gate_store_and_is_hashed_once(
    watch: Watch, opened: Callable[..., VisionBridge], loopback: LoopbackVisionServer,
    request: pytest.FixtureRequest,
) -> None:
    bridge = opened(watch, "healthy")
    watch.reset(solid_png(32, 24))
    result = await bridge.see(watch.data)
    assert not result.cached
    assert result.route == "healthy"
    # New bytes: intake first (the identity comes from the pixels), then the lookup.
    assert watch.stages == ["intake", "lookup", "routes", "gate", "store"]
    assert watch.hashes == 1  # taken once by the router; decode and the store are given it
    assert watch.decodes == 1
    assert watch.blobs == Counter(put=1)
    assert loopback.calls[f"healthy~{request.node.name}"] == 2  # probe + evidence


async def test_a_cache_hit_is_one_lookup_no_decode_no_blob_and_no_route_call(
    watch: Watch, opened: Callable[..., VisionBridge], loopback: LoopbackVisionServer,
    request: pytest.FixtureRequest,
) -> None:
    bridge = opened(watch, "healthy")
    data = solid_png(40, 30, (200, 100, 50))
    first = await bridge.see(data)
    calls = loopback.calls[f"healthy~{request.node.name}"]

    watch.reset(data)
    hit = await bridge.see(data)
    assert hit.cached
    assert hit.record == first.record
    assert watch.stages == ["lookup"]
    assert (watch.hashes, watch.decodes, watch.blobs) == (1, 0, Counter())
    assert phases(hit.attempts) == [("healthy", "cache", "hit")]

    watch.reset()
    stored = await bridge.see_stored(first.image.sha256)  # known by its hash: not hashed
    assert stored.cached
    assert watch.stages == ["lookup"]
    assert (watch.hashes, watch.decodes, watch.blobs) == (0, 0, Counter())
    assert loopback.calls[f"healthy~{request.node.name}"] == calls


async def test_a_known_image_missing_evidence_is_looked_up_before_intake(
    watch: Watch, opened: Callable[..., VisionBridge],
) -> None:
    bridge = opened(watch, "healthy")
    data = solid_png(30, 20)
    await bridge.see(data)

    watch.reset(data)
    reread = await bridge.reread(data, "What colour is it?")
    assert not reread.cached
    assert reread.record.key.variant is Variant.TARGET
    # The image index knew the bytes: the lookup runs first, then the miss goes on.
    assert watch.stages == ["lookup", "intake", "routes", "gate", "store"]
    assert (watch.hashes, watch.decodes) == (1, 1)
    assert watch.blobs == Counter(put=1)  # given bytes are stored (a no-op when present)
    assert phases(reread.attempts)[:2] == [(None, "cache", "miss"), (None, "intake", "ok")]


async def test_a_stored_image_on_a_miss_is_read_once_and_not_stored_again(
    watch: Watch, opened: Callable[..., VisionBridge],
) -> None:
    bridge = opened(watch, "healthy")
    data = solid_png(16, 16, (1, 2, 3))
    (meta,) = await bridge.admit_all([data])

    watch.reset(data)
    result = await bridge.see_stored(meta.sha256)
    assert not result.cached
    assert result.image == meta
    assert watch.stages == ["lookup", "intake", "routes", "gate", "store"]
    # The one hash of the bytes is the blob store's check of what it read against its
    # address; the image is decoded once more (admission kept no pixels) and not rewritten.
    assert watch.blobs == Counter(get=1)
    assert (watch.hashes, watch.decodes) == (1, 1)


async def test_a_stored_image_whose_blob_is_gone_is_refused_at_intake(
    watch: Watch, opened: Callable[..., VisionBridge],
) -> None:
    bridge = opened(watch, "healthy")
    data = solid_png(12, 12, (9, 9, 9))
    (meta,) = await bridge.admit_all([data])
    bridge.home.blobs.path_for(meta.sha256).unlink()

    watch.reset(data)
    with pytest.raises(StoreError) as info:
        await bridge.see_stored(meta.sha256)
    assert info.value.code == "STORE_BLOB_MISSING"
    assert watch.stages == ["lookup", "intake"]  # no route was asked
    assert phases(info.value.details["attempts"]) == [
        (None, "cache", "miss"), (None, "intake", "refused"),
    ]
    assert info.value.details["operation_id"].startswith("see-")


async def test_an_answer_the_gate_refuses_sends_the_walk_on_and_only_the_passing_one_is_stored(
    watch: Watch, opened: Callable[..., VisionBridge],
) -> None:
    bridge = opened(watch, "malformed", "healthy")
    watch.reset(solid_png(20, 20))
    result = await bridge.see(watch.data)
    assert result.route == "healthy"
    # The gate is the walk's acceptance test: once per answer, inside the one walk.
    assert watch.stages == ["intake", "lookup", "routes", "gate", "gate", "store"]
    assert [(r, p, o) for r, p, o in phases(result.attempts) if p == "gate"] == [
        ("malformed", "gate", "fail"), ("healthy", "gate", "ok"),
    ]
    assert watch.hashes == 1
