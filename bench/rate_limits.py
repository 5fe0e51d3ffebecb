"""What an exact rate limit across replicas costs a request: one check, local vs Redis.

    .venv/bin/python bench/rate_limits.py [--checks N] [--concurrency C]

Starts its own redis-server (Debian's) on a free loopback port. Measures the security
layer's limiter check as a request pays it: this process's token buckets (the local
backend, ``RateLimiter``) against the Redis limiter (one Lua script round trip on loopback,
awaited), checks for 64 client keys in turn, interleaved in rounds so load hits both alike.
``--concurrency`` also runs C checks at once against Redis (a loaded gateway), reported as
checks per second. Ratio = Redis µs / local µs per check.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from deepseek_eyes.settings.store import parse_state_url
from deepseek_eyes.store.state import RedisConnection, RedisRateLimiter, TokenBuckets

KEYS = [f"token:{i:02d}" for i in range(64)]


@contextlib.contextmanager
def redis_server() -> Iterator[int]:
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            if time.monotonic() > deadline:
                sys.exit("redis-server did not start")
            time.sleep(0.02)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


async def measure(port: int, checks: int, rounds: int, concurrency: int) -> None:
    connection = RedisConnection(parse_state_url(f"redis://127.0.0.1:{port}/0"),
                                 password=None, timeout=2.0)
    # A huge allowance: every check passes, so both sides do the same (full) work.
    shared = RedisRateLimiter(connection, 10**9, namespace="bench", unavailable="fail_closed")
    local = TokenBuckets(10**9)
    await shared.allow("warm-up")
    per_round = max(1, checks // rounds)
    ours: list[float] = []
    baseline: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(per_round):
            local.allow(KEYS[i % 64])
        baseline.append((time.perf_counter() - started) / per_round * 1e6)
        started = time.perf_counter()
        for i in range(per_round):
            await shared.allow(KEYS[i % 64])
        ours.append((time.perf_counter() - started) / per_round * 1e6)
    ours_us, base_us = statistics.median(ours), statistics.median(baseline)
    print(f"rate_limit_check_us: ours(redis)={ours_us:.1f} baseline(local)={base_us:.2f} "
          f"ratio={ours_us / base_us:.0f}")
    started = time.perf_counter()
    total = per_round * 4
    pending = [shared.allow(KEYS[i % 64]) for i in range(total)]
    for start in range(0, total, concurrency):
        await asyncio.gather(*pending[start:start + concurrency])
    rate = total / (time.perf_counter() - started)
    print(f"rate_limit_checks_per_s_redis_concurrency_{concurrency}: ours={rate:.0f}")
    await connection.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with redis_server() as port:
        asyncio.run(measure(port, args.checks, args.rounds, args.concurrency))


if __name__ == "__main__":
    main()
