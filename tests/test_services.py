"""The throwaway engines themselves start and answer (tests/services.py)."""
from __future__ import annotations

import subprocess

from services import PostgresCluster, RedisServer


def test_postgres_database_answers(postgres_cluster: PostgresCluster, postgres_url: str) -> None:
    name = postgres_url.rsplit("/", 1)[1]
    assert postgres_cluster.psql("SELECT 1 + 1", database=name) == "2"

def test_redis_answers(redis_server: RedisServer, redis_url: str) -> None:
    db = redis_url.rsplit("/", 1)[1]
    out = subprocess.run(["redis-cli", "-p", str(redis_server.port), "-n", db, "PING"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PONG"
