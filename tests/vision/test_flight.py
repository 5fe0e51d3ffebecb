"""Single-flight acquisition: concurrent identical work runs once and every caller shares it.

The routes here are in-process fakes that count their calls and hold each call until the
test releases it, so "concurrent" is arranged with events, never with sleeps.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from PIL import Image

from deepseek_eyes.errors import RouteError, StoreError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import Settings
from deepseek_eyes.usage import ProviderUsage
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision.routes.layout import build_evidence, build_target
from deepseek_eyes.vision.routing.flight import SingleFlight, copy_error
from deepseek_eyes.vision.routing.guard import RouteEntry
from deepseek_eyes.vision.routing.router import Acquisition
from deepseek_eyes.vision.types import RouteAnswer, Variant, VisionRequest

pytestmark = pytest.mark.anyio

REMOTE_USAGE = ProviderUsage(120, 30)


class HeldRoute:
    """A probe-exempt route that counts calls and holds each one until ``release``;
    ``entered`` is set once ``expect`` calls have arrived."""

    probe_exempt = True
    box_convention = "xywh-normalized"

    def __init__(
        self, name: str = "fake", *, kind: str = "fake", fail: bool = False,
        usage: ProviderUsage = REMOTE_USAGE, expect: int = 1,
    ) -> None:
        self.expect = expect
        self._name = name
        self.kind = kind
        self.fail = fail
        self.usage = usage
        self.calls: list[VisionRequest] = []
        self.cancelled = 0
        self.gone = anyio.Event()
        self.entered = anyio.Event()
        self.release = anyio.Event()

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return "fake-1"

    @property
    def fingerprint(self) -> str:
        return f"fingerprint-{self._name}"

    @property
    def answer_fingerprint(self) -> str:
        return f"answers-{self._name}"

    async def check_health(self) -> None:
        pass

    async def call(self, request: VisionRequest) -> RouteAnswer:
        self.calls.append(request)
        if len(self.calls) >= self.expect:
            self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            self.gone.set()
            raise
        if self.fail:
            raise RouteError(
                "upstream said no", code="VISION_ROUTE_HTTP_ERROR", details={"status": 503}
            )
        if request.variant is Variant.TARGET and request.question:
            value = build_target([], request.width, request.height, request.question)
        else:
            value = build_evidence([], request.width, request.height, min_confidence=0.5)
        return RouteAnswer(value=dict(value), usage=self.usage, model="fake-1")

    async def aclose(self) -> None:
        pass


def png(width: int = 40, height: int = 30, rgb: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
async def home() -> AsyncIterator[DataHome]:
    with DataHome.open(Settings()) as opened:
        yield opened


def bridge_over(home: DataHome, *routes: HeldRoute) -> VisionBridge:
    return VisionBridge(
        Settings(), home, routes={r.name: RouteEntry(r) for r in routes},
        auto_routes=[r.name for r in routes],
    )


async def gather(*calls: Any) -> list[Any]:
    """Run the calls concurrently; each result is the value or the exception it raised."""
    results: list[Any] = [None] * len(calls)

    async def one(index: int) -> None:
        try:
            results[index] = await calls[index]()
        except Exception as exc:  # collected for the assertions
            results[index] = exc

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(one, index)
    return results


async def release_when_all_wait(*routes: HeldRoute) -> None:
    for route in routes:
        await route.entered.wait()
    await anyio.wait_all_tasks_blocked()
    for route in routes:
        route.release.set()


async def test_ten_concurrent_acquires_of_a_new_image_call_the_route_once(
    home: DataHome,
) -> None:
    route = HeldRoute()
    bridge = bridge_over(home, route)
    data = png()

    async def releaser() -> None:
        await release_when_all_wait(route)

    *results, _ = await gather(*[lambda: bridge.see(data)] * 10, releaser)
    assert len(route.calls) == 1
    assert all(r.record == results[0].record for r in results)
    leaders = [r for r in results if not r.joined]
    waiters = [r for r in results if r.joined]
    assert len(leaders) == 1
    assert len(waiters) == 9
    (leader,) = leaders
    assert not leader.cached
    assert ("fake", "call", "ok") in [(a["route"], a["phase"], a["outcome"]) for a in
                                      leader.attempts]
    assert len({r.operation_id for r in results}) == 10
    for waiter in waiters:
        assert waiter.cached
        (row,) = waiter.attempts
        assert (row["route"], row["phase"], row["outcome"]) == ("fake", "flight", "joined")
        assert row["details"]["joined_operation_id"] == leader.operation_id
        assert bridge.attempts.rows(waiter.operation_id)[0]["phase"] == "flight"
    outcomes = [row["details"]["outcome"] for row in home.audit.recent()]
    assert sorted(outcomes) == ["joined"] * 9 + ["ok"]
    summary = home.usage.summary()
    assert summary["exact"]["vision"]["calls"] == 1
    # Each waiter avoided a call that would have sent the same tokens again.
    assert summary["estimated"]["avoided_replay"] == {"events": 9, "estimated_tokens": 9 * 150}

    again = await bridge.see(data)  # the flight is over: the cache answers now
    assert again.cached
    assert not again.joined
    assert [a["phase"] for a in again.attempts] == ["cache"]
    await bridge.aclose()


async def test_different_questions_variants_and_routes_are_not_merged(home: DataHome) -> None:
    # Nothing is released before every expected call has arrived: evidence finished early
    # would be found in the cache by the others (rightly), which is not what this tests.
    fake, other = HeldRoute("fake", expect=3), HeldRoute("other")
    bridge = bridge_over(home, fake, other)
    data = png()

    async def releaser() -> None:
        await fake.entered.wait()
        await other.entered.wait()
        await anyio.wait_all_tasks_blocked()
        fake.release.set()
        other.release.set()

    results = await gather(
        lambda: bridge.see(data),
        lambda: bridge.see(data),
        lambda: bridge.reread(data, "what is the total?"),
        lambda: bridge.reread(data, "  what is the total?  "),  # the same question digest
        lambda: bridge.reread(data, "who is the seller?"),
        lambda: bridge.see(data, route="other"),
        releaser,
    )
    evidence, evidence_again, total, total_again, seller, from_other, _ = results
    assert sorted((r.purpose, (r.question or "").strip()) for r in fake.calls) == [
        ("evidence", ""), ("target", "what is the total?"), ("target", "who is the seller?"),
    ]
    assert len(other.calls) == 1
    assert evidence_again.record == evidence.record
    assert total_again.record == total.record
    assert total.record != seller.record
    assert total.record.key.variant is Variant.TARGET
    assert evidence.record.key.variant is Variant.EVIDENCE
    assert from_other.route == "other"
    assert not from_other.joined
    assert [evidence.joined, evidence_again.joined].count(True) == 1
    assert [total.joined, total_again.joined].count(True) == 1
    await bridge.aclose()


async def test_a_failure_reaches_every_waiter_each_with_its_own_details(
    home: DataHome,
) -> None:
    route = HeldRoute(fail=True)
    bridge = bridge_over(home, route)
    data = png()

    async def releaser() -> None:
        await release_when_all_wait(route)

    *errors, _ = await gather(*[lambda: bridge.see(data)] * 5, releaser)
    assert len(route.calls) == 1
    assert all(isinstance(e, RouteError) for e in errors)
    assert {e.code for e in errors} == {"VISION_ROUTE_HTTP_ERROR"}
    assert len({id(e) for e in errors}) == 5
    assert len({id(e.details) for e in errors}) == 5
    assert len({id(e.details["attempts"]) for e in errors}) == 5
    (leader,) = [e for e in errors if "joined_operation_id" not in e.details]
    waiters = [e for e in errors if "joined_operation_id" in e.details]
    assert len(waiters) == 4
    for waiter in waiters:
        assert waiter.details["joined_operation_id"] == leader.details["operation_id"]
        assert waiter.details["operation_id"] != leader.details["operation_id"]
        # The shared failure's own story: the route call that failed.
        assert ("fake", "call", "fail") in [
            (a["route"], a["phase"], a["outcome"]) for a in waiter.details["attempts"]
        ]
        (row,) = bridge.attempts.rows(waiter.details["operation_id"])
        assert (row["phase"], row["outcome"], row["code"]) == (
            "flight", "joined", "VISION_ROUTE_HTTP_ERROR",
        )
    errors[0].details["mine"] = True
    errors[0].details["attempts"].clear()
    assert all("mine" not in e.details for e in errors[1:])
    assert all(e.details["attempts"] for e in errors[1:])
    assert all(e.operational for e in errors)
    await bridge.aclose()


async def test_cancelling_the_first_caller_does_not_fail_the_others(home: DataHome) -> None:
    route = HeldRoute()
    bridge = bridge_over(home, route)
    data = png()
    first_scope = anyio.CancelScope()
    first: list[Acquisition] = []
    others: list[Acquisition] = []

    async def first_caller() -> None:
        with first_scope:
            first.append(await bridge.see(data))

    async def other_caller() -> None:
        others.append(await bridge.see(data))

    async with anyio.create_task_group() as group:
        group.start_soon(first_caller)
        await route.entered.wait()  # the first caller's work is in the route now
        for _ in range(3):
            group.start_soon(other_caller)
        await anyio.wait_all_tasks_blocked()
        first_scope.cancel()
        await anyio.wait_all_tasks_blocked()
        assert route.cancelled == 0  # three callers still wait: the work goes on
        route.release.set()
    assert first_scope.cancel_called
    assert first == []
    assert len(others) == 3
    assert all(o.joined for o in others)
    assert len(route.calls) == 1
    assert route.cancelled == 0
    await bridge.aclose()


async def test_the_work_stops_when_every_caller_has_gone(home: DataHome) -> None:
    route = HeldRoute()
    bridge = bridge_over(home, route)
    data = png()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(bridge.see, data)
            group.start_soon(bridge.see, data)
            await route.entered.wait()
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    # The route call nobody waits for was cancelled, not left to spend a provider call...
    with anyio.fail_after(5):
        await route.gone.wait()
    assert route.cancelled == 1
    # ...and the next caller starts afresh instead of joining a cancelled flight.
    route.release.set()
    result = await bridge.see(data)
    assert not result.cached
    assert not result.joined
    assert len(route.calls) == 2
    await bridge.aclose()


async def test_a_local_engine_that_is_joined_counts_no_avoided_tokens(
    home: DataHome,
) -> None:
    route = HeldRoute("local", kind="local", usage=ProviderUsage())
    bridge = bridge_over(home, route)
    data = png()

    async def releaser() -> None:
        await release_when_all_wait(route)

    *results, _ = await gather(*[lambda: bridge.see(data)] * 3, releaser)
    assert [r.joined for r in results].count(True) == 2
    summary = home.usage.summary()
    assert summary["exact"] == {}
    assert summary["estimated"] == {"local_ocr": {"events": 1, "estimated_tokens": 0}}
    await bridge.aclose()


async def test_single_flight_shares_values_and_forgets_finished_work() -> None:
    flight: SingleFlight[str, int] = SingleFlight()
    runs = 0
    gate = anyio.Event()

    async def work() -> int:
        nonlocal runs
        runs += 1
        await gate.wait()
        return 42

    async def caller() -> tuple[int, bool]:
        outcome = await flight.run("k", work)
        return outcome.result(), outcome.joined

    async def opener() -> None:
        await anyio.wait_all_tasks_blocked()
        gate.set()

    *outcomes, _ = await gather(caller, caller, caller, opener)
    assert runs == 1
    assert sorted(outcomes) == [(42, False), (42, True), (42, True)]
    assert (await flight.run("k", work)).joined is False  # nothing is kept once it ends
    assert runs == 2


def test_copy_error_keeps_class_code_cause_and_traceback() -> None:
    try:
        try:
            raise OSError("disk full")
        except OSError as cause:
            raise StoreError(
                "could not store", code="STORE_WRITE_FAILED",
                details={"path": "x", "nested": {"n": [1]}},
            ) from cause
    except StoreError as exc:
        original = exc
    clone = copy_error(original)
    assert isinstance(clone, StoreError)
    assert clone is not original
    assert (clone.code, clone.message) == (original.code, original.message)
    assert clone.details == original.details
    assert clone.details["nested"] is not original.details["nested"]
    assert clone.__cause__ is original.__cause__
    assert clone.__traceback__ is original.__traceback__

    route_error = RouteError("x", code="VISION_ROUTE_ENGINE_FAILED", operational=False)
    route_clone = copy_error(route_error)
    assert isinstance(route_clone, RouteError)
    assert route_clone.operational is False
    assert route_clone.code == "VISION_ROUTE_ENGINE_FAILED"
