"""The readiness registry: bounded, cached, one run at a time, and a body of names and codes."""

from __future__ import annotations

import asyncio

import pytest

from deepseek_eyes.errors import StoreError
from deepseek_eyes.serving.readiness import CachedCheck, Readiness

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Scripted:
    """A check that fails with the queued codes in turn (None: passes), counting its runs;
    ``gate`` holds each run until set."""

    def __init__(self, name: str, *outcomes: str | None) -> None:
        self.name = name
        self.outcomes = list(outcomes)
        self.runs = 0
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> None:
        self.runs += 1
        if self.gate is not None:
            await self.gate.wait()
        code = self.outcomes.pop(0) if self.outcomes else None
        if code is not None:
            raise StoreError("/srv/secret/eyes.db is read-only", code=code)


async def test_concurrent_probes_share_one_run_and_its_verdict_is_reused_for_the_ttl() -> None:
    clock = Clock()
    check = Scripted("database")
    check.gate = asyncio.Event()
    cached = CachedCheck(check, ttl=10, timeout=5, clock=clock)
    waits = [asyncio.ensure_future(cached.verdict()) for _ in range(20)]
    await asyncio.sleep(0)  # every probe is waiting on the one run
    check.gate.set()
    verdicts = await asyncio.gather(*waits)
    assert check.runs == 1
    assert all(v.ok for v in verdicts)
    clock.now += 9.9
    assert (await cached.verdict()).ok
    assert check.runs == 1
    clock.now += 0.2
    await cached.verdict()
    assert check.runs == 2


async def test_a_failed_verdict_is_checked_again_sooner_than_a_good_one() -> None:
    clock = Clock()
    check = Scripted("database", "STORE_READ_ONLY", None)
    cached = CachedCheck(check, ttl=30, timeout=5, failed_ttl=2, clock=clock)
    first = await cached.verdict()
    assert (first.ok, first.code) == (False, "STORE_READ_ONLY")
    clock.now += 1
    assert (await cached.verdict()).code == "STORE_READ_ONLY"
    assert check.runs == 1
    clock.now += 1.5
    assert (await cached.verdict()).ok
    assert check.runs == 2


async def test_a_check_that_does_not_answer_in_time_fails_with_a_timeout_code() -> None:
    check = Scripted("upstream")
    check.gate = asyncio.Event()  # never set: the check hangs
    cached = CachedCheck(check, ttl=10, timeout=0.05)
    verdict = await cached.verdict()
    assert (verdict.ok, verdict.code) == (False, "GATEWAY_CHECK_TIMEOUT")
    check.gate.set()  # the run it started ends, and its verdict is kept
    assert (await cached.verdict()).ok
    assert check.runs == 1


async def test_the_report_names_checks_and_codes_never_messages() -> None:
    readiness = Readiness([
        CachedCheck(Scripted("database", "STORE_READ_ONLY"), ttl=1, timeout=1,
                    detail="sqlite"),
        CachedCheck(Scripted("upstream"), ttl=1, timeout=1),
    ])
    report = await readiness.report()
    assert report["status"] == "not_ready"
    assert report["code"] == "STORE_READ_ONLY"
    assert [(c["name"], c["status"], c.get("code"), c.get("backend"))
            for c in report["checks"]] == [("database", "failed", "STORE_READ_ONLY", "sqlite"),
                                           ("upstream", "ok", None, None)]
    assert "/srv/secret" not in repr(report)


async def test_a_later_backend_replaces_a_check_by_its_name() -> None:
    readiness = Readiness([CachedCheck(Scripted("database", "STORE_FULL"), ttl=1, timeout=1)])
    readiness.add(CachedCheck(Scripted("database"), ttl=1, timeout=1, detail="postgresql"))
    readiness.add(CachedCheck(Scripted("shared_state"), ttl=1, timeout=1, detail="redis"))
    report = await readiness.report()
    assert report == {"status": "ready", "checks": [
        {"name": "database", "status": "ok", "age_s": report["checks"][0]["age_s"],
         "backend": "postgresql"},
        {"name": "shared_state", "status": "ok", "age_s": report["checks"][1]["age_s"],
         "backend": "redis"}]}
    with pytest.raises(ValueError, match="needs a name"):
        readiness.add(CachedCheck(Scripted(""), ttl=1, timeout=1))


async def test_an_unexpected_failure_is_not_a_verdict() -> None:
    """Only our errors are verdicts: a bug in a check propagates (the app answers 500)."""

    class Broken:
        name = "database"

        async def __call__(self) -> None:
            raise KeyError("a bug")

    with pytest.raises(KeyError):
        await CachedCheck(Broken(), ttl=1, timeout=1).verdict()
