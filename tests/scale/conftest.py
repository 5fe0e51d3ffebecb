"""The scale-out tests' fixtures: one replica topology per test file (tests/scale/topology.py).

Starting HAProxy and three ``serve`` processes costs seconds on the CI machine, so
``topology`` is module-scoped: a file's tests share it, and each test begins with every
replica back in the rotation (``ensure_all_up``), whatever the test before it killed.

Which backends the replicas share is the module's ``BACKENDS`` attribute:

* ``"sqlite"`` (the default): one SQLite data directory, what works on one machine today.
* ``"shared"``: a fresh database of the session's PostgreSQL cluster and a flushed Redis
  database (``postgres_cluster``, ``redis_server`` in tests/conftest.py), handed to every
  replica as ``DEEPSEEK_EYES_DATABASE_URL`` and ``DEEPSEEK_EYES_STATE_URL``, with blobs in
  that database (``DEEPSEEK_EYES_BLOBS_URL=database``). The engines are started only for a
  module that asks for them.

A module may also set ``SETTINGS``: TOML appended to the replicas' settings file, in which
``{upstream}`` stands for the loopback upstream's base URL; ``GATEWAY``, keys of its
``[gateway]`` table (``rate_limit_per_minute``); and ``CHECK_INTER``, HAProxy's
health-check interval (default ``250ms``; a module with a low rate limit probes less often:
the probes count against the per-address limit of callers without the key).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.upstream import LoopbackUpstream
from topology import Topology, start_topology

BACKENDS = ("sqlite", "shared")


@pytest.fixture(scope="module")
def backend_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """What every replica gets in its environment to reach the shared backends: nothing for
    the SQLite data directory, the PostgreSQL and Redis URLs for ``"shared"``."""
    kind = getattr(request.module, "BACKENDS", "sqlite")
    assert kind in BACKENDS, f"BACKENDS must be one of {BACKENDS}, not {kind!r}"
    if kind == "sqlite":
        return {}
    cluster = request.getfixturevalue("postgres_cluster")
    redis = request.getfixturevalue("redis_server")
    return {"DEEPSEEK_EYES_DATABASE_URL": cluster.new_database("scale"),
            "DEEPSEEK_EYES_STATE_URL": redis.url(),
            # Blobs in PostgreSQL too (eyes_blobs): the replicas write and read them there.
            "DEEPSEEK_EYES_BLOBS_URL": "database"}


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    """The replicas' one DeepSeek (loopback): what reached the model is counted here."""
    with LoopbackUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def topology(request: pytest.FixtureRequest, upstream: LoopbackUpstream,
             backend_env: dict[str, str],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    """HAProxy in front of three ``serve`` replicas, started once for the test file."""
    root: Path = tmp_path_factory.mktemp("topology")
    with start_topology(root, upstream.base_url, backend_env=backend_env,
                        settings=getattr(request.module, "SETTINGS", "").replace(
                            "{upstream}", upstream.base_url),
                        gateway=getattr(request.module, "GATEWAY", None),
                        check_inter=getattr(request.module, "CHECK_INTER", "250ms")) as started:
        yield started


@pytest.fixture
def replicas(topology: Topology) -> Topology:
    """The module's topology with every replica running and ``UP`` in HAProxy."""
    topology.ensure_all_up()
    return topology
