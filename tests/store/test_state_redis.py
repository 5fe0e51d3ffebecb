"""Shared state on a real redis-server: exact rate limits, leases, outages with their codes.

Every "replica" here is an independent client (its own connection, its own limiter or
lease object, and once its own process) on the session's redis-server; outages stop and
start that server for real (``redis_server.stop()`` / ``.start()``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from deepseek_eyes.errors import StoreError
from deepseek_eyes.gateway.app import GATEWAY_REFUSALS
from deepseek_eyes.gateway.readiness import SharedStateCheck
from deepseek_eyes.serving.readiness import CachedCheck, Readiness
from deepseek_eyes.serving.security import SecurityMiddleware
from deepseek_eyes.settings.store import StateUnavailable, parse_state_url
from deepseek_eyes.store.state import (
    RedisConnection,
    RedisLeases,
    RedisRateLimiter,
    SharedState,
    TokenBuckets,
)
from services import RedisServer

pytestmark = pytest.mark.anyio

SRC = Path(__file__).resolve().parents[2] / "src"
_OPEN: list[RedisConnection] = []


@pytest.fixture(autouse=True)
async def _close_connections() -> AsyncIterator[None]:
    """Every connection a test opened is closed in its loop (an unclosed socket is a
    warning, and warnings are errors)."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def connect(url: str, *, password: str | None = None, username: str | None = None,
            retry_after: float = 0.0, clock: list[float] | None = None) -> RedisConnection:
    target = parse_state_url(url)
    if username is not None:
        target = type(target)(target.kind, target.host, target.port, target.db, username)
    now = clock if clock is not None else [0.0]
    connection = RedisConnection(target, password=password, timeout=0.5,
                                 retry_after=retry_after, clock=lambda: now[0])
    _OPEN.append(connection)
    return connection


def limiter(url: str, per_minute: int, unavailable: StateUnavailable = "fail_closed",
            namespace: str = "gateway-key") -> RedisRateLimiter:
    return RedisRateLimiter(connect(url), per_minute, namespace=namespace,
                            unavailable=unavailable)


@pytest.fixture
def stopped(redis_server: RedisServer) -> Iterator[RedisServer]:
    """The session's server, stopped for the test and started again after it."""
    redis_server.stop()
    try:
        yield redis_server
    finally:
        redis_server.start()


# rate limits -----------------------------------------------------------------------------
async def test_a_limit_is_exact_across_independent_clients(redis_url: str) -> None:
    # 6 a minute: a burst of 10, then one every 10 s; the test's own duration refills
    # a fraction of a token at most, so exactly 10 of 30 pass whoever asks.
    replicas = [limiter(redis_url, 6) for _ in range(3)]
    waits = await asyncio.gather(*(replicas[i % 3].allow("token:abc") for i in range(30)))
    assert sum(1 for w in waits if w == 0) == 10
    refused = [w for w in waits if w > 0]
    assert len(refused) == 20
    assert all(0 < w <= 10.0 for w in refused)


async def test_a_limit_is_exact_across_processes(redis_url: str) -> None:
    script = (
        "import asyncio, json, sys\n"
        "from deepseek_eyes.settings.store import parse_state_url\n"
        "from deepseek_eyes.store.state import RedisConnection, RedisRateLimiter\n"
        "async def main():\n"
        "    c = RedisConnection(parse_state_url(sys.argv[1]), password=None, timeout=5)\n"
        "    lim = RedisRateLimiter(c, 6, namespace='p', unavailable='fail_closed')\n"
        "    waits = [await lim.allow('token:shared') for _ in range(8)]\n"
        "    print(json.dumps(waits))\n"
        "asyncio.run(main())\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    processes = [subprocess.Popen(  # noqa: S603 - our interpreter, our script
        [sys.executable, "-c", script, redis_url], env=env, stdout=subprocess.PIPE,
        text=True) for _ in range(3)]
    waits: list[float] = []
    for process in processes:
        out, _ = await anyio.to_thread.run_sync(process.communicate)
        assert process.returncode == 0
        waits += json.loads(out)
    assert len(waits) == 24
    assert sum(1 for w in waits if w == 0) == 10  # 10 in total, not 10 per process


async def test_redis_buckets_count_as_local_ones_do(redis_url: str) -> None:
    shared, local = limiter(redis_url, 60), TokenBuckets(60)
    ours = [await shared.allow("ip:192.0.2.1") for _ in range(11)]
    theirs = [local.allow("ip:192.0.2.1") for _ in range(11)]
    assert [w == 0 for w in ours] == [w == 0 for w in theirs] == [True] * 10 + [False]
    # The same Retry-After a client sees: ceil of the wait, one token at one a second.
    assert math.ceil(ours[-1]) == math.ceil(theirs[-1]) == 1
    assert (shared.rate, shared.capacity) == (local.rate, local.capacity)


async def test_keys_and_namespaces_have_buckets_of_their_own(redis_url: str) -> None:
    keyed = limiter(redis_url, 6)
    for _ in range(10):
        assert await keyed.allow("token:a") == 0
    assert await keyed.allow("token:a") > 0
    assert await keyed.allow("token:b") == 0
    assert await limiter(redis_url, 6, namespace="gateway-address").allow("token:a") == 0


async def test_redis_down_fails_closed_with_its_code(redis_url: str,
                                                     stopped: RedisServer) -> None:
    closed = limiter(redis_url, 60, "fail_closed")
    with anyio.fail_after(5):  # refused at once, not after retries
        with pytest.raises(StoreError) as caught:
            await closed.allow("token:a")
    assert caught.value.code == "STORE_STATE_UNAVAILABLE"
    assert caught.value.details["state"].startswith("redis://127.0.0.1:")
    stopped.start()
    assert await closed.allow("token:a") == 0  # counted in Redis again
    stopped.stop()


async def test_redis_down_counts_per_replica_under_local(redis_url: str,
                                                         stopped: RedisServer) -> None:
    fallback = limiter(redis_url, 60, "local")
    waits = [await fallback.allow("token:a") for _ in range(11)]
    assert [w == 0 for w in waits] == [True] * 10 + [False]  # this replica's own bucket
    stopped.start()
    assert await fallback.allow("token:a") == 0  # Redis's bucket: fresh after the restart
    stopped.stop()


async def test_after_a_failure_commands_pause_then_try_again(redis_url: str,
                                                             stopped: RedisServer) -> None:
    clock = [100.0]
    connection = connect(redis_url, retry_after=1.0, clock=clock)
    with pytest.raises(StoreError):
        await connection.ping()
    stopped.start()
    with pytest.raises(StoreError) as caught:  # within the pause: not even tried
        await connection.ping()
    assert caught.value.code == "STORE_STATE_UNAVAILABLE"
    clock[0] += 1.0
    await connection.ping()
    assert not connection.down
    stopped.stop()


async def test_a_refused_password_has_its_own_code(redis_server: RedisServer,
                                                   redis_url: str) -> None:
    import redis

    admin = redis.Redis(port=redis_server.port)
    admin.execute_command("ACL", "SETUSER", "eyes", "on", ">right-one", "~*", "+@all")
    try:
        wrong = connect(redis_url, username="eyes", password="wrong-one")
        with pytest.raises(StoreError) as caught:
            await wrong.ping()
        assert caught.value.code == "STORE_STATE_AUTH_FAILED"
        assert "wrong-one" not in str(caught.value.to_dict())
        await connect(redis_url, username="eyes", password="right-one").ping()
    finally:
        admin.execute_command("ACL", "DELUSER", "eyes")
        admin.close()


# the security layer --------------------------------------------------------------------
def _replica(url: str, unavailable: StateUnavailable) -> SecurityMiddleware:
    async def hello(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    state = SharedState(unavailable=unavailable, connection=connect(url))
    return SecurityMiddleware(
        Starlette(routes=[Route("/v1/models", hello)]), token="k" * 40,
        allowed_hosts=["testserver"], allowed_origins=[],
        limiter=state.rate_limiter(6, namespace="gateway-key"),
        anonymous_limiter=state.rate_limiter(6, namespace="gateway-address"),
        max_body_bytes=1024, codes=GATEWAY_REFUSALS)


async def _get(app: SecurityMiddleware, key: str = "k" * 40) -> httpx.Response:
    transport = httpx.ASGITransport(app, client=("192.0.2.9", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        return await client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})


async def test_two_gateway_replicas_share_one_limit(redis_url: str) -> None:
    replicas = [_replica(redis_url, "fail_closed") for _ in range(2)]
    answers = [await _get(replicas[i % 2]) for i in range(14)]
    assert [a.status_code for a in answers].count(200) == 10
    refused = answers[-1]
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "GATEWAY_RATE_LIMITED"
    assert 1 <= int(refused.headers["retry-after"]) <= 10
    # Bad keys count per address, in a namespace of their own.
    assert (await _get(replicas[0], key="x" * 40)).status_code == 401


async def test_a_replica_refuses_with_503_while_redis_is_down_when_fail_closed(
        redis_url: str, stopped: RedisServer) -> None:
    answer = await _get(_replica(redis_url, "fail_closed"))
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "STORE_STATE_UNAVAILABLE"
    assert answer.json()["error"]["type"] == "server_error"
    assert answer.headers["retry-after"] == "1"
    assert (await _get(_replica(redis_url, "local"))).status_code == 200


# readiness ---------------------------------------------------------------------------
def _readiness(url: str, unavailable: StateUnavailable) -> Readiness:
    state = SharedState(unavailable=unavailable, connection=connect(url))
    return Readiness([CachedCheck(SharedStateCheck(state), ttl=0.0, timeout=2.0,
                                  detail=state.backend,
                                  required=unavailable == "fail_closed")])


async def test_readiness_pings_the_shared_state(redis_url: str) -> None:
    report = await _readiness(redis_url, "fail_closed").report()
    assert report["status"] == "ready"
    assert report["checks"][0]["backend"] == "redis"
    assert report["checks"][0]["status"] == "ok"


async def test_readiness_fails_with_the_code_and_is_advisory_under_local(
        redis_url: str, stopped: RedisServer) -> None:
    closed = await _readiness(redis_url, "fail_closed").report()
    assert (closed["status"], closed.get("code")) == ("not_ready", "STORE_STATE_UNAVAILABLE")
    local = await _readiness(redis_url, "local").report()
    assert local["status"] == "ready"
    assert (local["checks"][0]["status"], local["checks"][0]["code"]) == (
        "failed", "STORE_STATE_UNAVAILABLE")


# leases ------------------------------------------------------------------------------
async def test_a_lease_is_exclusive_fenced_renewed_and_released(redis_url: str) -> None:
    one, two = (RedisLeases(connect(redis_url), ttl=5.0) for _ in range(2))
    first = await one.acquire("work")
    assert first is not None
    assert await two.acquire("work") is None
    assert await two.held("work")
    assert await one.renew(first)
    forged = type(first)("work", first.fence, f"{first.fence} someone-else")
    assert not await two.renew(forged)
    await two.release(forged, failure="VISION_ROUTE_HTTP_ERROR")  # not the holder: nothing
    assert await two.held("work")
    assert await two.failure("work") is None
    await one.release(first, failure="VISION_ROUTE_HTTP_ERROR")
    assert not await two.held("work")
    assert await two.failure("work") == "VISION_ROUTE_HTTP_ERROR"
    second = await two.acquire("work")
    assert second is not None
    assert second.fence > first.fence  # fencing: a later holder has a larger token
    assert await two.failure("work") is None  # a new holder clears the old failure
    assert not await one.renew(first)


async def test_a_lease_nobody_renews_lapses(redis_url: str) -> None:
    leases = RedisLeases(connect(redis_url), ttl=0.2)
    assert await leases.acquire("work") is not None
    with anyio.fail_after(5):
        while await leases.held("work"):
            await asyncio.sleep(0.02)  # Redis's own expiry has no event to wait on
    assert await leases.acquire("work") is not None


async def test_leases_without_redis_fail_with_the_code(redis_url: str,
                                                      stopped: RedisServer) -> None:
    with pytest.raises(StoreError) as caught:
        await RedisLeases(connect(redis_url), ttl=1.0).acquire("work")
    assert caught.value.code == "STORE_STATE_UNAVAILABLE"
