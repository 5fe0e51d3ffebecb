"""The replica tests of test_replicas.py on the other supported topology: several ``serve``
processes on one machine sharing one SQLite data directory (docs/how-to/scale-out.md), with
no PostgreSQL or Redis. The tests are the same functions; only what the replicas share
differs (tests/scale/conftest.py reads this module's ``BACKENDS``)."""

from __future__ import annotations

from test_replicas import (  # noqa: F401 - collected here, on this module's backends
    ROUTES,
    test_a_conversation_continues_on_every_replica,
    test_a_route_that_failed_on_one_replica_is_skipped_by_the_others,
    test_concurrent_load_on_all_replicas_leaves_one_verified_chain,
    test_kill_9_mid_turn_the_resent_turn_continues_the_session_on_a_live_replica,
    test_one_new_image_from_ten_clients_is_acquired_at_most_once_per_replica,
    test_sigterm_drains_one_replica_under_load_and_no_request_is_lost,
)

BACKENDS = "sqlite"
SETTINGS = ROUTES
