"""Single flight across replicas, and route verdicts shared through the database.

Three "replicas" are three bridges, each with its own data-directory handle (its own
SQLite connection to one directory), its own in-process flight and its own Redis client:
they share what separate processes would share, the database and Redis. One route object
counts the calls all three make. Concurrency is arranged with events (the route holds its
call until every caller waits), never with sleeps.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image

from deepseek_eyes.errors import ImageError, RouteError, StoreError, VisionError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.settings.store import parse_state_url
from deepseek_eyes.store.state import Lease, RedisConnection, RedisLeases, SharedState, lease_key
from deepseek_eyes.store.state.limits import KEY_PREFIX
from deepseek_eyes.usage import ProviderUsage
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.routes.layout import build_evidence
from deepseek_eyes.vision.routing.attempts import Attempt
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.routing.pipeline.job import Acquisition
from deepseek_eyes.vision.routing.shared_flight import remote_failure
from deepseek_eyes.vision.types import RouteAnswer, Variant, VisionRequest
from services import RedisServer
from vision.loopback import probe_cells

pytestmark = pytest.mark.anyio


class CountingRoute:
    """A probe-exempt route shared by every replica: counts calls, holds each until
    ``release`` (set at once when ``held`` is False), fails when ``fail``."""

    probe_exempt = True
    box_convention = "xywh-normalized"
    kind = "fake"
    name = "fake"
    model = "fake-1"
    fingerprint = "fingerprint-fake"
    answer_fingerprint = "answers-fake"

    def __init__(self, *, held: bool = True, fail: bool = False, expect: int = 1) -> None:
        self.calls = 0
        self.expect = expect
        self.fail = fail
        self.entered = anyio.Event()
        self.release = anyio.Event()
        if not held:
            self.release.set()

    async def check_health(self) -> None:
        pass

    async def call(self, request: VisionRequest) -> RouteAnswer:
        self.calls += 1
        if self.calls >= self.expect:
            self.entered.set()
        await self.release.wait()
        if self.fail:
            raise RouteError("upstream said no", code="VISION_ROUTE_HTTP_ERROR",
                             details={"status": 503})
        value = build_evidence([], request.width, request.height, min_confidence=0.5)
        return RouteAnswer(value=dict(value), usage=ProviderUsage(120, 30), model="fake-1")

    async def aclose(self) -> None:
        pass


def png(rgb: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), rgb).save(buffer, format="PNG")
    return buffer.getvalue()


class WatchedLeases(RedisLeases):
    """Redis leases that say when this replica first waited on another's lease."""

    def __init__(self, connection: RedisConnection, *, ttl: float,
                 first_wait: Callable[[], None]) -> None:
        super().__init__(connection, ttl=ttl)
        self.waited = False
        self._first_wait = first_wait

    async def held(self, key: str) -> bool:
        answer = await super().held(key)
        if answer and not self.waited:
            self.waited = True
            self._first_wait()
        return answer


class Replicas:
    """Bridges on one data directory, each with its own state (Redis, or local)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.homes: list[DataHome] = []
        self.bridges: list[VisionBridge] = []
        self.leases: list[WatchedLeases] = []
        self.waiters = 0
        self.all_but_one_wait = anyio.Event()  # set when all replicas but the holder wait

    async def open(self, route: CountingRoute, count: int, url: str | None,
                   lease_ttl: float = 5.0) -> list[VisionBridge]:
        for _ in range(count):
            home = DataHome(self.root)
            state = SharedState()
            if url is not None:
                connection = RedisConnection(parse_state_url(url), password=None, timeout=2.0)
                await connection.ping()  # connected before the race starts
                state = SharedState(connection=connection, lease_ttl=lease_ttl)
                state.leases = WatchedLeases(connection, ttl=lease_ttl,
                                             first_wait=lambda: self._waited(count))
                self.leases.append(state.leases)
            bridge = VisionBridge(Settings(), home, routes={"fake": RouteEntry(route)},
                                  auto_routes=["fake"], state=state)
            self.homes.append(home)
            self.bridges.append(bridge)
        return self.bridges

    def _waited(self, count: int) -> None:
        self.waiters += 1
        if self.waiters >= count - 1:
            self.all_but_one_wait.set()

    async def close(self) -> None:
        for bridge in self.bridges:
            await bridge.aclose()
        for home in self.homes:
            home.close()


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[Replicas]:
    opened = Replicas(tmp_path / "shared-home")
    try:
        yield opened
    finally:
        await opened.close()


async def race(bridges: list[VisionBridge], data: bytes, route: CountingRoute,
               waiting: anyio.Event | None, requests: int = 10) -> list[Any]:
    """``requests`` acquisitions of ``data`` spread over ``bridges``; the route's call is
    released once the expected calls arrived and ``waiting`` is set (every replica but the
    holder waits on its lease) (results: values or exceptions)."""
    results: list[Any] = [None] * requests

    async def one(index: int) -> None:
        try:
            results[index] = await bridges[index % len(bridges)].see(data)
        except Exception as exc:  # collected for the assertions
            results[index] = exc

    async def releaser() -> None:
        await route.entered.wait()
        if waiting is not None:
            await waiting.wait()
        route.release.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for index in range(requests):
                group.start_soon(one, index)
            group.start_soon(releaser)
    return results


def leased(bridges: list[VisionBridge]) -> list[int]:
    """The fencing tokens of every ``flight leased`` row the replicas wrote."""
    db = bridges[0].home.db
    rows = db.query("SELECT details FROM attempts WHERE phase = 'flight' AND outcome = 'leased'")
    return sorted(json.loads(r["details"])["fence"] for r in rows)


async def test_ten_requests_on_three_replicas_make_one_acquisition(
        replicas: Replicas, redis_url: str) -> None:
    route = CountingRoute()
    bridges = await replicas.open(route, 3, redis_url)
    results = await race(bridges, png((200, 10, 10)), route, replicas.all_but_one_wait)
    assert route.calls == 1
    assert not [r for r in results if isinstance(r, Exception)]
    assert len({r.record.record_sha256 for r in results}) == 1
    assert sum(1 for r in results if not r.cached) == 1  # the one that called
    assert len(leased(bridges)) == 1  # one grant (its token: at least Redis's clock, in ms)


async def test_without_shared_state_each_replica_acquires(replicas: Replicas) -> None:
    """The control: the same race on the local backend calls once per replica."""
    route = CountingRoute(expect=3)
    bridges = await replicas.open(route, 3, None)
    results = await race(bridges, png((10, 200, 10)), route, None)
    assert route.calls == 3
    assert not [r for r in results if isinstance(r, Exception)]


async def test_a_failure_reaches_the_waiting_replicas_with_its_code(
        replicas: Replicas, redis_url: str) -> None:
    route = CountingRoute(fail=True)
    bridges = await replicas.open(route, 3, redis_url)
    results = await race(bridges, png((10, 10, 200)), route, replicas.all_but_one_wait,
                         requests=6)
    assert route.calls == 1
    assert {r.code for r in results} == {"VISION_ROUTE_HTTP_ERROR"}
    remote = [r for r in results if r.details.get("flight") == "remote"]
    assert remote  # the other replicas got the holder's code, not a call of their own
    assert all(r.details["attempts"][-1]["outcome"] == "remote_failed" for r in remote)


async def test_a_dead_holders_lease_lapses_and_the_work_is_done_once(
        replicas: Replicas, redis_url: str) -> None:
    route = CountingRoute(held=False)
    (bridge,) = await replicas.open(route, 1, redis_url, lease_ttl=0.3)
    data = png((50, 60, 70))
    # A holder that took the lease and died: nobody renews it.
    dead = RedisLeases(RedisConnection(parse_state_url(redis_url), password=None,
                                       timeout=2.0), ttl=0.3)
    key = lease_key(hashlib.sha256(data).hexdigest(), Variant.EVIDENCE.value, None,
                    ("fake",))
    taken = await dead.acquire(key)
    assert taken is not None
    with anyio.fail_after(10):
        result = await bridge.see(data)
    assert route.calls == 1
    assert not result.cached
    (fence,) = leased([bridge])
    assert fence > taken.fence  # a larger fencing token took over
    assert not await dead.held(key)  # released by the one that did the work
    await dead._connection.aclose()


async def test_redis_down_acquires_per_replica(replicas: Replicas, redis_url: str,
                                               redis_server: RedisServer) -> None:
    route = CountingRoute(held=False)
    (bridge,) = await replicas.open(route, 1, redis_url)
    redis_server.stop()
    try:
        result = await bridge.see(png((90, 90, 10)))
    finally:
        redis_server.start()
    assert route.calls == 1
    assert not result.cached
    assert leased([bridge]) == []  # no lease: this process's flight alone


async def test_a_route_that_fails_on_one_replica_is_skipped_by_another(
        replicas: Replicas) -> None:
    """Route verdicts live in the shared database, read afresh on every decision: a
    circuit one replica opens is seen by the next acquisition anywhere."""
    route = CountingRoute(held=False, fail=True)
    one, two = await replicas.open(route, 2, None)
    with pytest.raises(RouteError):
        await one.see(png((1, 2, 3)))
    (status,) = two.router.status()
    assert status["circuit"] == "open"
    assert status["last_code"] == "VISION_ROUTE_HTTP_ERROR"
    op = two.attempts.operation("see")
    screening = two.router.guard.screen(op, ["fake"])
    assert screening.eligible == ("fake",)  # the only route: tried half-open, not blind
    assert [(a["phase"], a["outcome"]) for a in op.entries] == [
        ("circuit", "skip"), ("circuit", "half_open")]
    route.fail = False
    await two.see(png((4, 5, 6)))  # a success on the second replica closes it...
    (status,) = one.router.status()
    assert status["circuit"] == "closed"  # ...for the first one too


@pytest.mark.parametrize(("code", "kind", "expected"), [
    ("VISION_ROUTE_HTTP_ERROR", VisionError, "VISION_ROUTE_HTTP_ERROR"),
    ("IMAGE_TRUNCATED", ImageError, "IMAGE_TRUNCATED"),
    ("STORE_FULL", StoreError, "STORE_FULL"),
    ("NOT_A_CODE_WE_KNOW", VisionError, "VISION_FAILOVER_EXHAUSTED"),  # a newer replica's
])
def test_a_remote_failure_keeps_its_code_and_family(
        code: str, kind: type[Exception], expected: str) -> None:
    error = remote_failure(code)
    assert isinstance(error, kind)
    assert (error.code, error.details) == (expected, {"flight": "remote"})


class ProbedRoute(CountingRoute):
    """A route that must pass the pixel probe: it names the grid's colours (or, ``blind``,
    always the same ones), holding each probe until ``release`` like an evidence call."""

    probe_exempt = False

    def __init__(self, *, blind: bool = False, expect: int = 1) -> None:
        super().__init__(held=False, expect=10**6)
        self.blind = blind
        self.probes = 0
        self.expect_probes = expect
        self.probe_release = anyio.Event()
        self.probing = anyio.Event()

    async def call(self, request: VisionRequest) -> RouteAnswer:
        if request.purpose != "probe":
            return await super().call(request)
        self.probes += 1
        if self.probes >= self.expect_probes:
            self.probing.set()
        await self.probe_release.wait()
        cells = [["red"] * 3] * 3 if self.blind else probe_cells(
            Image.open(io.BytesIO(request.image_bytes)).convert("RGB"))
        return RouteAnswer(text=json.dumps({"cells": cells}), usage=ProviderUsage(50, 10),
                           model="fake-1")


@pytest.mark.parametrize(("blind", "shared"), [(False, True), (True, True), (False, False)])
async def test_a_route_is_probed_once_across_replicas_and_its_verdict_used_by_the_others(
        replicas: Replicas, redis_url: str, blind: bool, shared: bool) -> None:
    """Two replicas each get a new image for a route nobody has probed: the one that takes
    the probe lease probes, the other waits for its verdict in the shared store and uses it
    (pass or fail) instead of probing. Without shared state (the control) each probes."""
    route = ProbedRoute(blind=blind, expect=1 if shared else 2)
    bridges = await replicas.open(route, 2, redis_url if shared else None)
    results: list[Any] = [None, None]

    async def one(index: int) -> None:
        try:
            results[index] = await bridges[index].see(png((index * 90, 30, 60)))
        except VisionError as exc:
            results[index] = exc

    async def releaser() -> None:
        await route.probing.wait()
        if shared:
            await replicas.all_but_one_wait.wait()  # the other replica waits on the lease
        route.probe_release.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(one, 0)
            group.start_soon(one, 1)
            group.start_soon(releaser)
    assert route.probes == (1 if shared else 2)
    probed = sorted(next(a["outcome"] for a in attempts(result) if a["phase"] == "probe")
                    for result in results)
    verdict = "fail" if blind else "pass"
    assert probed == (sorted([verdict, "shared"]) if shared else [verdict, verdict])
    if blind:
        assert [r.code for r in results] == ["VISION_PROBE_FAILED"] * 2, results
    else:
        assert not [r for r in results if isinstance(r, Exception)], results
        assert route.calls == 2  # each image still read once, by its own replica


def attempts(result: Acquisition | VisionError) -> list[Attempt]:
    """The attempts of an acquisition, or of the failure that ended it."""
    if isinstance(result, VisionError):
        return list(result.details["attempts"])
    return list(result.attempts)


class TakeoverRoute(CountingRoute):
    """The first call (the first holder's) waits for ``first_go`` and notes a cancel;
    later calls (the next holder's) answer at once."""

    def __init__(self) -> None:
        super().__init__(held=False)
        self.first_go = anyio.Event()
        self.first_cancelled = anyio.Event()

    async def call(self, request: VisionRequest) -> RouteAnswer:
        if self.calls == 0:
            self.calls += 1
            self.entered.set()
            try:
                await self.first_go.wait()
            except BaseException:
                self.first_cancelled.set()
                raise
            value = build_evidence([], request.width, request.height, min_confidence=0.5)
            return RouteAnswer(value=dict(value), usage=ProviderUsage(120, 30),
                               model="fake-1")
        return await super().call(request)


class PausedLeases(WatchedLeases):
    """A holder whose renewals hang: a process paused (or cut off) past its lease."""

    async def renew(self, lease: Lease) -> bool:
        await anyio.Event().wait()
        return False


async def lapsed(leases: RedisLeases, key: str) -> None:
    """Returns once nobody holds ``key`` (the paused holder's lease expired in Redis)."""
    with anyio.fail_after(10):
        while await leases.held(key):
            await anyio.sleep(0.02)


def outcomes(result: Acquisition) -> list[tuple[str, str]]:
    return [(a["phase"], a["outcome"]) for a in result.attempts]


async def test_a_holder_paused_past_its_lease_does_not_publish_after_the_new_holder(
        replicas: Replicas, redis_url: str) -> None:
    """Replica A holds the lease and its renewals hang (paused); its lease expires, B takes
    the work over (a larger fencing token) and publishes. When A resumes with its own
    answer, the database refuses A's stale token in A's write: B's record is the one stored
    and the one A answers with (attempt ``flight lease_lost``)."""
    route = TakeoverRoute()
    one, two = await replicas.open(route, 2, redis_url, lease_ttl=0.3)
    paused = PausedLeases(replicas.leases[0]._connection, ttl=0.3, first_wait=lambda: None)
    one.router._shared._leases = paused
    data = png((120, 130, 140))
    key = lease_key(hashlib.sha256(data).hexdigest(), Variant.EVIDENCE.value, None,
                    ("fake",))
    result_a: list[Acquisition] = []

    async def holder_a() -> None:
        result_a.append(await one.see(data))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(holder_a)
            await route.entered.wait()
            await lapsed(replicas.leases[1], key)
            result_b = await two.see(data)  # B: the next holder, answered at once
            route.first_go.set()  # A resumes with an answer of its own
    (a,) = result_a
    assert route.calls == 2
    assert not result_b.cached
    stored = one.home.db.query("SELECT record_sha256 FROM evidence")
    assert [r["record_sha256"] for r in stored] == [result_b.record.record_sha256]
    assert a.record.record_sha256 == result_b.record.record_sha256  # B's result is used
    assert ("flight", "lease_lost") in outcomes(a)
    lost = next(x for x in a.attempts if x["outcome"] == "lease_lost")
    assert lost["code"] == "VISION_FLIGHT_LEASE_LOST"
    fences = leased([one])
    assert len(fences) == 2
    assert fences[0] < fences[1]


async def test_a_holder_whose_renewal_finds_another_holder_stops_its_work(
        replicas: Replicas, redis_url: str) -> None:
    """The lease vanishes under a working holder and another takes it: the holder's next
    renewal finds the other's value, cancels its route call, and the work is retried
    once the other lets go, by the one process, never twice at once."""
    route = TakeoverRoute()
    (bridge,) = await replicas.open(route, 1, redis_url, lease_ttl=0.3)
    data = png((140, 10, 200))
    key = lease_key(hashlib.sha256(data).hexdigest(), Variant.EVIDENCE.value, None,
                    ("fake",))
    other = RedisLeases(RedisConnection(parse_state_url(redis_url), password=None,
                                        timeout=2.0), ttl=5.0)
    results: list[Acquisition] = []

    async def holder() -> None:
        results.append(await bridge.see(data))

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(holder)
                await route.entered.wait()
                name = f"{KEY_PREFIX}lease:{key}"
                await other._connection.run(lambda redis: redis.delete(name))
                taken = await other.acquire(key)  # another replica holds it now
                assert taken is not None
                await route.first_cancelled.wait()  # the first holder stopped its call
                assert route.calls == 1
                await other.release(taken)
    finally:
        await other._connection.aclose()
    (result,) = results
    assert route.calls == 2
    assert not result.cached
    assert [o for p, o in outcomes(result) if p == "flight"] == [
        "leased", "lease_lost", "leased"]  # lost, then retried under a new grant
    lost = next(x for x in result.attempts if x["outcome"] == "lease_lost")
    assert lost["details"]["reason"] == "another holder has it"
