"""Two gateway replicas on one Redis, served for real: one rate limit between them, and
``/readyz``'s ``shared_state`` check on Redis (names and codes only), Redis up and down."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from helpers import GATEWAY_KEY
from inprocess_gateway import InProcessGateway, serve_in_process
from runtime.upstream import LoopbackUpstream
from services import RedisServer

AUTH = {"Authorization": f"Bearer {GATEWAY_KEY}"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture
def replicas(upstream: LoopbackUpstream, redis_url: str, tmp_path_factory: pytest.TempPathFactory,
             ) -> Iterator[list[InProcessGateway]]:
    home = tmp_path_factory.mktemp("replicas")
    more = {"store": {"state_url": redis_url, "state_unavailable": "fail_closed"}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPSEEK_EYES_HOME", str(home))
        llm = {"base_url": upstream.base_url, "model": "deepseek-v4-pro"}
        gateway = {"rate_limit_per_minute": 6, "readiness_upstream_ttl": 0}
        with serve_in_process(llm, gateway=gateway, key=GATEWAY_KEY, more=more) as one, \
                serve_in_process(llm, gateway=gateway, key=GATEWAY_KEY, more=more) as two:
            yield [one, two]


def test_two_replicas_share_one_limit_and_ping_redis_when_ready(
        replicas: list[InProcessGateway], redis_server: RedisServer) -> None:
    ready = replicas[0].http.get("/readyz")
    assert ready.status_code == 200, ready.text
    (shared,) = [c for c in ready.json()["checks"] if c["name"] == "shared_state"]
    assert (shared["status"], shared["backend"]) == ("ok", "redis")
    assert str(redis_server.port) not in ready.text  # the body names no address

    answers: list[httpx.Response] = [
        replicas[i % 2].http.get("/v1/models", headers=AUTH) for i in range(12)]
    statuses = [a.status_code for a in answers]
    assert statuses.count(429) == 2, statuses  # a burst of 10 for the gateway, not each
    assert answers[-1].json()["error"]["code"] == "GATEWAY_RATE_LIMITED"
    assert int(answers[-1].headers["retry-after"]) >= 1

    redis_server.stop()
    try:
        # A probe is rate-limited like any caller without the key: failing closed, the
        # security layer answers it first, with the same status and code.
        down = replicas[1].http.get("/readyz")
        assert down.status_code == 503
        assert down.json()["error"]["code"] == "STORE_STATE_UNAVAILABLE"
        refused = replicas[1].http.get("/v1/models", headers=AUTH)
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "STORE_STATE_UNAVAILABLE"
    finally:
        redis_server.start()
