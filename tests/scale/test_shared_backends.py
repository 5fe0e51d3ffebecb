"""What only PostgreSQL and Redis make true of three replicas behind HAProxy (issue 43).

The replicas of tests/scale/test_replicas.py already share sessions, the audit chain, route
circuits and the evidence cache through one SQLite data directory. What a data directory
cannot give them is here, on the ``"shared"`` backends (tests/scale/conftest.py: a fresh
database of the session's PostgreSQL cluster as ``DEEPSEEK_EYES_DATABASE_URL``, a flushed
Redis database as ``DEEPSEEK_EYES_STATE_URL``):

* single flight across replicas: ten concurrent requests for one new image on three
  replicas make ONE vision acquisition (a lease in the shared state);
* exact rate limits: N allowed in total, not N per replica;
* PostgreSQL restarted under load: requests fail with a code while it is down, succeed after
  it is back, and nothing that was answered is lost;
* Redis down: rate limits fail closed (``STORE_STATE_UNAVAILABLE``), or fall back to each
  replica's own, per ``[store] state_unavailable``;
* blobs in PostgreSQL (``blobs_url = "database"``): an image's blob is a row there.
"""

from __future__ import annotations

import math
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from drive import acquisitions, image, see, until, verify
from helpers import require_module
from runtime.upstream import LoopbackUpstream
from services import PostgresCluster, RedisServer
from topology import MODEL, Topology

openai = require_module("openai")


BACKENDS = "shared"
PER_MINUTE = 600  # a bucket of max(10, 600 / 6) = 100 requests, refilled at 10 a second
BURST = max(10, PER_MINUTE // 6)
RATE_PER_S = PER_MINUTE / 60
# HAProxy's probes come from one address without the key: three replicas probed every 2 s
# stay far below the per-address limit they count against.
CHECK_INTER = "2s"
GATEWAY = {"rate_limit_per_minute": PER_MINUTE}


def test_one_new_image_from_ten_clients_is_acquired_once_across_replicas(
        replicas: Topology, upstream: LoopbackUpstream,
        postgres_cluster: PostgresCluster) -> None:
    url, digest = image(70)
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda i: see(replicas, url, f"seen {i}"), range(10)))
    assert [a.text for a in answers] == [f"seen {i}" for i in range(10)]
    assert {a.replica for a in answers} == {"eyes1", "eyes2", "eyes3"}
    assert acquisitions(upstream, digest) == 1
    # The image's blob is a row of the shared database (blobs_url = "database"), written by
    # the replica that acquired it and read there by the others; not a file of one replica.
    database = httpx.URL(replicas.backend_env["DEEPSEEK_EYES_DATABASE_URL"]).path.strip("/")
    assert postgres_cluster.psql(
        f"SELECT count(*) FROM eyes_blobs WHERE sha256 = '{digest}'",  # noqa: S608 - our hex
        database) == "1"
    assert not list((replicas.home / "blobs").rglob(f"{digest}*"))


def test_the_rate_limit_is_exact_in_total_not_per_replica(replicas: Topology) -> None:
    """Keyed requests spend one bucket whichever replica serves them: a burst of three
    buckets' worth is allowed one bucket plus what refilled meanwhile."""
    statuses: list[int] = []
    retry_after: list[str] = []
    lock = threading.Lock()

    def burst(count: int) -> None:
        with httpx.Client(timeout=30, headers=replicas.headers) as http:
            for _ in range(count):
                response = http.get(f"{replicas.base_url}/models")
                with lock:
                    statuses.append(response.status_code)
                    if response.status_code == 429:
                        assert response.json()["error"]["code"] == "GATEWAY_RATE_LIMITED"
                        retry_after.append(response.headers.get("retry-after", ""))

    _fresh_buckets(replicas)  # the earlier tests' requests took from the key's bucket
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(burst, [BURST // 2] * 6))
        elapsed = time.monotonic() - started
    finally:
        _fresh_buckets(replicas)  # the next test starts with the key's whole bucket
    allowed = statuses.count(200)
    assert set(statuses) <= {200, 429}, statuses
    assert allowed >= BURST
    assert allowed <= BURST + math.ceil(elapsed * RATE_PER_S) + 1, (allowed, elapsed)
    assert retry_after
    assert all(value.isdigit() for value in retry_after)


def test_postgresql_restarted_under_load_fails_with_a_code_then_serves_and_loses_nothing(
        replicas: Topology, postgres_cluster: PostgresCluster) -> None:
    stop = threading.Event()
    answered: list[str] = []  # sessions of the turns answered 200
    refused: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def load(index: int) -> None:
        with httpx.Client(timeout=60, headers=replicas.headers) as http:
            turn = 0
            while not stop.is_set():
                turn += 1
                response = http.post(f"{replicas.base_url}/chat/completions", json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": f"pg {index}.{turn}"}]})
                with lock:
                    if response.status_code == 200:
                        answered.append(response.headers["x-deepseekeyes-session"])
                    else:
                        refused.append((response.status_code, _code(response)))
                # About 8 turns a second from the three clients: within the key's limit
                # (PER_MINUTE), so every refusal is the database's, not the limiter's.
                stop.wait(0.35)

    with ThreadPoolExecutor(3) as pool:
        running = [pool.submit(load, i) for i in range(3)]
        try:
            until(lambda: len(answered) >= 8, "turns before the stop")
            postgres_cluster.stop("fast")
            until(lambda: len(refused) >= 4, "refusals while PostgreSQL is down")
            for replica in replicas.replicas:
                replicas.wait_state(replica.name, "DOWN")  # /readyz says the database failed
            postgres_cluster.start()
            for replica in replicas.replicas:
                replicas.wait_up(replica.name)
            back = len(answered)
            until(lambda: len(answered) >= back + 8, "turns after the restart")
        finally:
            stop.set()
            for future in running:
                future.result(timeout=60)
    # While it was down each refusal was a server-side status with our code: a replica's
    # STORE_ code, or none only from HAProxy once every replica had left the rotation.
    assert all(status in (500, 503) for status, _ in refused), [
        r for r in refused if r[0] not in (500, 503)]
    assert any(code is not None and code.startswith("STORE_") for _, code in refused), refused
    # Nothing answered is lost: every answered turn is in the store, the chain verifies.
    for session in set(answered):
        shown = replicas.cli("sessions", "show", session, "--json")
        assert shown.returncode == 0, shown.stderr
    verify(replicas)


@pytest.mark.parametrize("mode", ["fail_closed", "local"])
def test_redis_down_fails_closed_or_limits_per_replica_per_the_setting(
        replicas: Topology, redis_server: RedisServer, mode: str) -> None:
    replicas.write_settings(f'[store]\nstate_unavailable = "{mode}"\n')
    replicas.restart_all()
    redis_server.stop()
    try:
        with httpx.Client(timeout=30, headers=replicas.headers) as http:
            responses = [http.get(f"{replicas.base_url}/models") for _ in range(6)]
    finally:
        redis_server.start()
    if mode == "fail_closed":
        # The replicas' own refusal, with its code (not HAProxy's, nor any other 503).
        assert [(r.status_code, _code(r)) for r in responses] == [
            (503, "STORE_STATE_UNAVAILABLE")] * len(responses)
    else:
        assert all(r.status_code == 200 for r in responses), [r.status_code for r in responses]
    replicas.write_settings()
    replicas.restart_all()


def _fresh_buckets(replicas: Topology) -> None:
    """Empty the replicas' Redis database: every bucket starts full again."""
    url = httpx.URL(replicas.backend_env["DEEPSEEK_EYES_STATE_URL"])
    subprocess.run(["redis-cli", "-h", str(url.host), "-p", str(url.port), "-n",
                    url.path.strip("/") or "0", "FLUSHDB"], check=True, capture_output=True,
                   timeout=30)


def _code(response: httpx.Response) -> str | None:
    try:
        body: Any = response.json()
    except ValueError:
        return None  # HAProxy's own 503: no replica in the rotation
    code = (body.get("error") or {}).get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None
