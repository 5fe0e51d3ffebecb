"""Shared short-lived state: what several gateway replicas must agree on right now.

Rate limits (exact across replicas) and single-flight leases (one acquisition of an image
however many replicas are asked for it), each behind a small interface with a local
implementation (this process and its database: the single-process behaviour) and one on
Redis, chosen by ``[store] state_url`` or ``DEEPSEEK_EYES_STATE_URL``. The ``redis``
package is imported only when a Redis URL is configured. See docs/deployment.md,
"Shared state".
"""

from deepseek_eyes.store.state.buckets import MAX_CLIENTS, TokenBuckets, bucket_capacity
from deepseek_eyes.store.state.connection import RedisConnection, require_redis
from deepseek_eyes.store.state.leases import (
    FlightLeases,
    Lease,
    LocalLeases,
    RedisLeases,
    lease_key,
)
from deepseek_eyes.store.state.limits import Limiter, RedisRateLimiter
from deepseek_eyes.store.state.shared import SharedState, open_shared_state, state_target

__all__ = [
    "MAX_CLIENTS",
    "FlightLeases",
    "Lease",
    "Limiter",
    "LocalLeases",
    "RedisConnection",
    "RedisLeases",
    "RedisRateLimiter",
    "SharedState",
    "TokenBuckets",
    "bucket_capacity",
    "lease_key",
    "open_shared_state",
    "require_redis",
    "state_target",
]
