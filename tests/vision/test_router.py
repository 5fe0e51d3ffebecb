"""The VisionRouter end to end against loopback servers that really decode the pixels.

Time-based behaviour (health TTL, circuit cooldown, probe TTL) runs on an injected clock, so
no test sleeps; the only real wait is the hanging server's short timeout.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from deepseek_eyes.audit.show import show
from deepseek_eyes.errors import DeepSeekEyesError, ImageError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.vision.bridge import VisionBridge
from helpers import raw_store
from vision.loopback import LoopbackVisionServer, solid_png

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def png(width: int, height: int, rgb: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    return solid_png(width, height, rgb)


class Harness:
    """A bridge over named loopback behaviours, each with counters of its own."""

    def __init__(self, loopback: LoopbackVisionServer, tag: str, clock: Clock) -> None:
        self.loopback = loopback
        self.tag = tag
        self.clock = clock
        self.bridge: VisionBridge | None = None
        self.home: DataHome | None = None

    def key(self, behaviour: str) -> str:
        return f"{behaviour}~{self.tag}"

    def calls(self, behaviour: str) -> int:
        return self.loopback.calls[self.key(behaviour)]

    def model_calls(self, behaviour: str) -> int:
        return self.loopback.model_calls[self.key(behaviour)]

    def open(self, behaviours: list[str], **vision: Any) -> VisionBridge:
        routes = []
        for behaviour in behaviours:
            base = behaviour.split("~")[0]
            route: dict[str, Any] = {
                "name": base,
                "base_url": self.loopback.url(self.key(base)),
                "model": "text-1" if base == "textonly" else "vision-1",
                "timeout": 0.5 if base == "hang" else 10.0,
            }
            route.update(vision.pop(f"{base}_route", {}))
            routes.append(route)
        vision.setdefault("route_priority", [r["name"] for r in routes])
        settings = Settings.model_validate({"vision": {"routes": routes, **vision}})
        self.home = DataHome.open(settings)
        self.bridge = VisionBridge(settings, self.home, clock=self.clock)
        return self.bridge

    async def close(self) -> None:
        if self.bridge is not None:
            await self.bridge.aclose()
        if self.home is not None:
            self.home.close()


@pytest.fixture
async def harness(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    h = Harness(loopback, request.node.name, Clock())
    yield h
    await h.close()


def phases(attempts: Any) -> list[tuple[str | None, str, str]]:
    return [(a["route"], a["phase"], a["outcome"]) for a in attempts]


async def test_healthy_route_then_cache_hit_makes_no_call(harness: Harness) -> None:
    bridge = harness.open(["healthy"])
    first = await bridge.see(png(64, 48))
    assert not first.cached
    assert first.route == "healthy"
    assert harness.loopback.last_image_size[harness.key("healthy")] == (64, 48)
    assert "64x48" in first.record.evidence["summary"]
    assert phases(first.attempts) == [
        (None, "intake", "ok"),
        (None, "cache", "miss"),  # unknown bytes: looked up by pixel hash after intake
        ("healthy", "health", "ok"),
        ("healthy", "probe", "pass"),
        ("healthy", "call", "ok"),
        ("healthy", "gate", "ok"),
    ]
    calls = harness.calls("healthy")
    assert calls == 2  # probe + evidence
    second = await bridge.see(png(64, 48))
    assert second.cached
    assert second.record == first.record
    assert harness.calls("healthy") == calls
    assert phases(second.attempts) == [("healthy", "cache", "hit")]
    summary = harness.home.usage.summary() if harness.home else {}
    assert summary["exact"]["vision"]["prompt_tokens"] == 100
    assert summary["exact"]["probe"]["calls"] == 1
    assert summary["estimated"]["avoided_replay"]["events"] == 1
    # A hit's one row is its attempt: no acquisition audit row, and `audit show IMAGE`
    # lists it beside the acquisition that called the route.
    assert harness.home is not None
    shown = show(harness.home.db, first.image.sha256)
    assert [a["record"]["details"]["outcome"]
            for a in shown["acquisitions"]] == ["ok"]
    assert len(shown["cache_hits"]) == 1
    assert shown["cache_hits"][0]["chain"]["intact"]


async def test_a_hit_its_caller_records_writes_no_attempt_row(harness: Harness) -> None:
    """A turn names every image it showed in its chained record: its cache hits write no
    attempts row (a conversation resends its images every turn), and still list the hit."""
    bridge = harness.open(["healthy"])
    first = await bridge.see(png(30, 20))
    assert harness.home is not None

    def rows() -> int:
        assert harness.home is not None
        return int(harness.home.db.query("SELECT COUNT(*) n FROM attempts")[0]["n"])

    before = rows()
    quiet = await bridge.see_stored(first.image.sha256, recorded=True)
    assert quiet.cached
    assert quiet.record == first.record
    assert phases(quiet.attempts) == [("healthy", "cache", "hit")]
    assert rows() == before
    loud = await bridge.see_stored(first.image.sha256)  # the CLI's, MCP's: its row is its record
    assert phases(loud.attempts) == [("healthy", "cache", "hit")]
    assert rows() == before + 1


async def test_same_pixels_in_another_encoding_hit_the_cache(harness: Harness) -> None:
    bridge = harness.open(["healthy"])
    await bridge.see(png(20, 10, (200, 10, 10)))
    calls = harness.calls("healthy")
    bmp = io.BytesIO()
    Image.new("RGB", (20, 10), (200, 10, 10)).save(bmp, format="BMP")
    again = await bridge.see(bmp.getvalue())
    assert again.cached
    assert harness.calls("healthy") == calls


async def test_failover_opens_circuit_then_skips_until_cooldown(harness: Harness) -> None:
    bridge = harness.open(["error500", "healthy"], failure_cooldown=60)
    first = await bridge.see(png(10, 10))
    assert first.route == "healthy"
    # The first call to a new route is its probe; the 500 arrives there.
    failed = [a for a in first.attempts if a["route"] == "error500" and a["code"]]
    assert [(a["phase"], a["code"]) for a in failed] == [("probe", "VISION_ROUTE_HTTP_ERROR")]
    assert harness.calls("error500") == 1

    second = await bridge.see(png(11, 11))
    assert ("error500", "circuit", "skip") in phases(second.attempts)
    assert harness.calls("error500") == 1  # skipped, not called

    harness.clock.advance(61)
    await bridge.see(png(12, 12))
    assert harness.calls("error500") == 2  # cooldown over: tried again


async def test_open_circuit_is_tried_when_no_alternative_exists(harness: Harness) -> None:
    bridge = harness.open(["error500"], failure_cooldown=60)
    with pytest.raises(DeepSeekEyesError):
        await bridge.see(png(10, 10))
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(11, 11))
    assert ("error500", "circuit", "half_open") in phases(info.value.details["attempts"])
    assert harness.calls("error500") == 2


async def test_single_route_failure_keeps_its_code(harness: Harness) -> None:
    bridge = harness.open(["error500"])
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_ROUTE_HTTP_ERROR"
    assert info.value.details["status"] == 500
    assert info.value.details["attempts"]


async def test_timeout_is_its_own_code(harness: Harness) -> None:
    bridge = harness.open(["hang"])
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_ROUTE_TIMEOUT"
    assert isinstance(info.value, TimeoutError)


async def test_exhaustion_reports_structured_attempts(harness: Harness) -> None:
    bridge = harness.open(["error500", "hang"])
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_FAILOVER_EXHAUSTED"
    assert info.value.details["failures"] == [
        {"route": "error500", "code": "VISION_ROUTE_HTTP_ERROR"},
        {"route": "hang", "code": "VISION_ROUTE_TIMEOUT"},
    ]
    codes = [a["code"] for a in info.value.details["attempts"] if a["code"]]
    assert codes == ["VISION_ROUTE_HTTP_ERROR", "VISION_ROUTE_TIMEOUT"]


async def test_failover_attempts_bound_the_routes_tried(harness: Harness) -> None:
    bridge = harness.open(["error500", "healthy"], failover_attempts=0)
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_ROUTE_HTTP_ERROR"
    assert (None, "failover", "budget_exhausted") in phases(info.value.details["attempts"])
    assert harness.calls("healthy") == 0


async def test_malformed_evidence_fails_the_gate_and_fails_over(harness: Harness) -> None:
    # The malformed server answers every prompt with the same bad evidence, so its probe is
    # switched off here to reach the gate.
    bridge = harness.open(["malformed", "healthy"], malformed_route={"probe": False})
    result = await bridge.see(png(10, 10))
    assert result.route == "healthy"
    gate = next(a for a in result.attempts if a["route"] == "malformed" and a["phase"] == "gate")
    assert gate["code"] == "EVIDENCE_SCHEMA_INVALID"
    assert {"pointer": "/ocr/0/font", "keyword": "additionalProperties"} in gate["details"][
        "pointers"
    ]
    # A bad answer is not an operational failure: no circuit.
    status = {r["name"]: r for r in bridge.router.status()}
    assert status["malformed"]["circuit"] == "closed"


async def test_incomplete_stream_retries_once_on_the_same_route(harness: Harness) -> None:
    bridge = harness.open(["cut_once"], cut_once_route={"stream": True, "probe": False})
    result = await bridge.see(png(10, 10))
    assert result.route == "cut_once"
    calls = [(a["phase"], a["outcome"], a["code"]) for a in result.attempts]
    assert ("call", "fail", "VISION_ROUTE_STREAM_INCOMPLETE") in calls
    assert ("retry", "same_route", "VISION_ROUTE_STREAM_INCOMPLETE") in calls
    assert calls[-2:] == [("call", "ok", None), ("gate", "ok", None)]


async def test_an_incomplete_probe_stream_is_retried_too(harness: Harness) -> None:
    bridge = harness.open(["cut_once"], cut_once_route={"stream": True})
    result = await bridge.see(png(10, 10))
    steps = [(a["phase"], a["outcome"], a["code"]) for a in result.attempts]
    assert steps[3:6] == [
        ("probe", "error", "VISION_ROUTE_STREAM_INCOMPLETE"),
        ("retry", "same_route", "VISION_ROUTE_STREAM_INCOMPLETE"),
        ("probe", "pass", None),
    ]


async def test_a_stream_cut_twice_fails_with_its_code(harness: Harness) -> None:
    bridge = harness.open(["cut"], cut_route={"stream": True}, probe=False)
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_ROUTE_STREAM_INCOMPLETE"
    assert harness.calls("cut") == 2


async def test_probe_failure_makes_route_ineligible(harness: Harness) -> None:
    bridge = harness.open(["textonly", "healthy"])
    first = await bridge.see(png(10, 10))
    assert first.route == "healthy"
    probe = next(a for a in first.attempts if a["route"] == "textonly" and a["phase"] == "probe")
    assert probe["outcome"] == "fail"
    assert probe["code"] == "VISION_PROBE_FAILED"
    assert harness.calls("textonly") == 1  # only the probe: its evidence is never asked for
    second = await bridge.see(png(11, 11))
    assert ("textonly", "probe", "ineligible") in phases(second.attempts)
    assert harness.calls("textonly") == 1
    assert harness.calls("healthy") == 3  # one probe, two evidence calls: probe is cached


async def test_probe_only_route_failing_raises_probe_code(harness: Harness) -> None:
    bridge = harness.open(["textonly"])
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_PROBE_FAILED"
    assert info.value.details["correct"] < 9


async def test_health_is_cached_for_its_ttl(harness: Harness) -> None:
    bridge = harness.open(["healthy"], health_ttl=300)
    await bridge.see(png(10, 10))
    await bridge.see(png(11, 11))
    assert harness.model_calls("healthy") == 1
    harness.clock.advance(301)
    await bridge.see(png(12, 12))
    assert harness.model_calls("healthy") == 2


async def test_unlisted_model_is_unhealthy(harness: Harness) -> None:
    bridge = harness.open(["nomodel"])
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10))
    assert info.value.code == "VISION_ROUTE_UNHEALTHY"
    assert harness.calls("nomodel") == 0


async def test_explicit_route_goes_first_and_unknown_is_refused(harness: Harness) -> None:
    bridge = harness.open(["error500", "healthy"])
    result = await bridge.see(png(10, 10), route="healthy")
    assert result.route == "healthy"
    assert harness.calls("error500") == 0
    assert bridge.router.order(explicit="healthy") == ["healthy", "error500"]
    assert bridge.router.order(base_route="error500", explicit="healthy")[0] == "error500"
    with pytest.raises(DeepSeekEyesError) as info:
        await bridge.see(png(10, 10), route="nope")
    assert info.value.code == "VISION_ROUTE_UNKNOWN"


async def test_reread_prefers_the_base_route_and_caches_by_question(harness: Harness) -> None:
    bridge = harness.open(["error500", "healthy"])
    base = await bridge.see(png(30, 20))
    reread = await bridge.reread(png(30, 20), "How large is it?", base_route=base.route)
    assert reread.route == "healthy"
    assert reread.record.evidence["schema"] == "deepseekeyes.target.v1"
    assert harness.calls("error500") == 1  # only the base attempt, not the reread
    again = await bridge.reread(png(30, 20), "How large is it?", base_route=base.route)
    assert again.cached
    other = await bridge.reread(png(30, 20), "What colour?", base_route=base.route)
    assert not other.cached


async def test_refused_image_calls_no_route(harness: Harness) -> None:
    bridge = harness.open(["healthy"])
    with pytest.raises(ImageError) as info:
        await bridge.see(b"")
    assert info.value.code == "IMAGE_EMPTY"
    with pytest.raises(ImageError) as info:
        await bridge.see(b"not an image at all")
    assert info.value.code == "IMAGE_UNSUPPORTED_FORMAT"
    assert harness.calls("healthy") == 0
    assert harness.model_calls("healthy") == 0


async def test_tampered_record_is_refused_quarantined_and_replaced(harness: Harness) -> None:
    bridge = harness.open(["healthy"])
    first = await bridge.see(png(10, 10))
    assert harness.home is not None
    db_path = harness.home.root / "eyes.db"
    conn = raw_store(db_path, tamper=True)
    row = conn.execute("SELECT record FROM evidence").fetchone()
    body = json.loads(row[0])
    body["evidence"]["summary"] = "Nothing to see here."
    conn.execute("UPDATE evidence SET record = ?", (json.dumps(body),))
    conn.commit()
    conn.close()
    bridge.cache.forget_memory()

    calls = harness.calls("healthy")
    again = await bridge.see(png(10, 10))
    assert not again.cached
    assert ("healthy", "cache", "tampered") in phases(again.attempts)
    assert harness.calls("healthy") == calls + 1
    assert again.record.evidence["summary"] == first.record.evidence["summary"]
    quarantined = harness.home.db.query("SELECT reason FROM evidence_quarantine")
    assert [r["reason"] for r in quarantined] == ["hash_mismatch"]


async def test_secrets_and_pixels_never_reach_the_database(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPBACK_VISION_KEY", "sk-test-very-secret-value")
    bridge = harness.open(
        ["healthy"], healthy_route={"api_key": {"env": "LOOPBACK_VISION_KEY"}}
    )
    await bridge.see(png(10, 10))
    assert harness.loopback.last_authorization_sha256[harness.key("healthy")] is not None
    assert harness.home is not None
    harness.home.db.close()
    raw = b"".join(p.read_bytes() for p in harness.home.root.glob("eyes.db*"))
    assert b"sk-test-very-secret-value" not in raw
    assert b"data:image" not in raw
    assert b"You are the eyes" not in raw  # prompts are not logged
    harness.home = None  # already closed


async def test_attempts_log_is_bounded(harness: Harness) -> None:
    bridge = harness.open(["healthy"], attempts_max_rows=100)
    for size in range(10, 50):
        await bridge.see(png(size, size))
    bridge.attempts.trim()
    assert bridge.attempts.count() <= 100


async def test_auto_detected_image_models_join_the_order(
    loopback: LoopbackVisionServer, request: pytest.FixtureRequest
) -> None:
    tag = request.node.name
    settings = Settings.model_validate({
        "vision": {"auto_detect": True},
        "llm": {
            "base_url": loopback.url(f"healthy~{tag}"),
            "api_key": None,
            "models": [
                {"id": "text-only-model", "input": ["text"]},
                {"id": "vision-1", "input": ["text", "image"]},
            ],
        },
    })
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        assert bridge.router.order() == ["llm/vision-1"]
        result = await bridge.see(png(16, 16))
        await bridge.aclose()
    assert result.route == "llm/vision-1"
    assert loopback.calls[f"healthy~{tag}"] == 2  # probe, then evidence


def test_auto_detection_is_off_by_default() -> None:
    settings = Settings.model_validate(
        {"llm": {"models": [{"id": "vision-1", "input": ["text", "image"]}]}}
    )
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        assert bridge.router.order() == ["local"]


def test_status_lists_routes_in_order(tmp_path: Path) -> None:
    settings = Settings()
    with DataHome.open(settings) as home:
        bridge = VisionBridge(settings, home)
        (local,) = bridge.router.status()
    assert local["name"] == "local"
    assert local["order"] == 1
    assert local["probe"] == "exempt"


async def test_a_failed_probe_is_retried_after_the_cooldown_not_the_probe_ttl(
    harness: Harness,
) -> None:
    bridge = harness.open(
        ["misprobe_once", "healthy"], failure_cooldown=60, probe_ttl=86400
    )
    first = await bridge.see(png(10, 10))
    assert first.route == "healthy"
    assert ("misprobe_once", "probe", "fail") in phases(first.attempts)
    assert harness.calls("misprobe_once") == 1

    harness.clock.advance(30)  # within the cooldown: the verdict stands
    second = await bridge.see(png(11, 11))
    assert ("misprobe_once", "probe", "ineligible") in phases(second.attempts)
    assert harness.calls("misprobe_once") == 1
    status = {r["name"]: r for r in bridge.router.status()}
    assert status["misprobe_once"]["probe"] == "failed"

    harness.clock.advance(31)  # cooldown over, a day not: probed afresh, and now it passes
    status = {r["name"]: r for r in bridge.router.status()}
    assert status["misprobe_once"]["probe"] == "expired"
    third = await bridge.see(png(12, 12))
    assert third.route == "misprobe_once"
    assert ("misprobe_once", "probe", "pass") in phases(third.attempts)
    assert harness.calls("misprobe_once") == 3  # the second probe, then the evidence


async def test_a_passed_probe_is_trusted_for_the_probe_ttl(harness: Harness) -> None:
    bridge = harness.open(["healthy"], failure_cooldown=60, probe_ttl=3600)
    await bridge.see(png(10, 10))
    assert harness.calls("healthy") == 2  # probe + evidence
    harness.clock.advance(3000)  # far past the cooldown, within the probe TTL
    again = await bridge.see(png(11, 11))
    assert ("healthy", "probe", "cached") in phases(again.attempts)
    assert harness.calls("healthy") == 3
    harness.clock.advance(601)
    later = await bridge.see(png(12, 12))
    assert ("healthy", "probe", "pass") in phases(later.attempts)


async def test_a_route_that_keeps_misreading_is_reprobed_once_per_cooldown(
    harness: Harness,
) -> None:
    bridge = harness.open(["textonly", "healthy"], failure_cooldown=60)
    await bridge.see(png(10, 10))
    await bridge.see(png(11, 11))
    assert harness.calls("textonly") == 1
    harness.clock.advance(61)
    result = await bridge.see(png(12, 12))
    assert result.route == "healthy"
    assert ("textonly", "probe", "fail") in phases(result.attempts)
    assert harness.calls("textonly") == 2


async def _see_with(harness: Harness, **route: Any) -> Any:
    """One ``see`` of the same image on a fresh bridge whose route ``healthy`` has ``route``
    settings, over the same data directory."""
    await harness.close()
    bridge = harness.open(["healthy"], healthy_route=dict(route))
    return await bridge.see(png(24, 16))


async def test_the_cache_is_keyed_by_what_the_route_is_not_its_name(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = harness.loopback.url(f"healthy~{harness.tag}-elsewhere")
    first = await _see_with(harness)
    assert not first.cached
    assert (await _see_with(harness)).cached  # nothing changed: a hit

    moved = await _see_with(harness, base_url=other)
    assert not moved.cached  # same name, another endpoint
    assert harness.loopback.calls[f"healthy~{harness.tag}-elsewhere"] == 2  # probe + call
    assert not (await _see_with(harness, model="vision-2", health_check="none")).cached
    assert not (await _see_with(harness, temperature=0.7)).cached
    assert not (await _see_with(harness, json_mode=True)).cached
    assert (await _see_with(harness, base_url=other)).cached  # each identity keeps its own

    monkeypatch.setattr(
        "deepseek_eyes.vision.routing.router.prompt_fingerprint", lambda: "prompt-v2"
    )
    assert not (await _see_with(harness)).cached  # a new prompt or schema version misses


async def test_a_secret_is_not_part_of_the_cache_key(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPBACK_VISION_KEY", "sk-one")
    first = await _see_with(harness, api_key={"env": "LOOPBACK_VISION_KEY"})
    assert not first.cached
    monkeypatch.setenv("LOOPBACK_VISION_KEY", "sk-two")
    assert (await _see_with(harness, api_key={"env": "LOOPBACK_VISION_KEY"})).cached
    key = first.record.key
    assert key.fingerprint is not None
    assert "sk-one" not in key.text


async def test_records_cached_before_fingerprints_still_read_but_are_not_served(
    harness: Harness,
) -> None:
    from deepseek_eyes.vision.evidence.cache import EvidenceKey, EvidenceRecord
    from deepseek_eyes.vision.types import Variant

    bridge = harness.open(["healthy"])
    image = png(24, 16)
    fresh = await bridge.see(image)
    # A row exactly as the code before fingerprints wrote it: no fingerprint in key or body.
    legacy_key = EvidenceKey(fresh.record.key.pixel_sha256, "healthy", Variant.EVIDENCE)
    legacy = EvidenceRecord.build(
        legacy_key, image_sha256=fresh.image.sha256, model="vision-1",
        evidence={**fresh.record.evidence, "summary": "An answer from some old endpoint."},
        created_at=1.0,
    )
    assert "fingerprint" not in legacy.body()["key"]
    assert legacy_key.text.count("|") == 3
    bridge.cache.put(legacy)
    bridge.cache.forget_memory()

    stored = bridge.cache.get(legacy_key)
    assert stored is not None  # readable, not "tampered"
    assert stored.verify()
    again = await bridge.see(image)
    assert again.cached
    assert again.record == fresh.record  # the fingerprinted record, not the legacy one
    assert "tampered" not in [a["outcome"] for a in again.attempts]
