"""Fencing tokens checked by the database (store/fences.py): a claim by a newer holder
makes an older holder's publish refuse, in the publish's own transaction, on both engines
(this file is in the PostgreSQL subset, tests/store/test_on_postgresql.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.errors import VisionError
from deepseek_eyes.home import DataHome
from deepseek_eyes.store.fences import LEASE_LOST, FlightFences


def test_a_newer_claim_refuses_the_older_holders_publish_and_its_row(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "home")
    try:
        db = home.db
        fences = FlightFences(db)
        assert fences.claim("work", 10)
        assert fences.claim("work", 20)  # the lease passed on: the newer token replaces
        assert not fences.claim("work", 10)  # a stale holder's late claim fails
        db.execute("CREATE TABLE published (who INTEGER)")

        def stale_publish() -> None:
            with db.transaction() as conn:
                conn.execute("INSERT INTO published (who) VALUES (10)")
                fences.publish(conn, "work", 10)

        with pytest.raises(VisionError) as refused:
            stale_publish()
        assert refused.value.code == LEASE_LOST
        assert refused.value.details["fence"] == 10
        with db.transaction() as conn:
            fences.publish(conn, "work", 20)
            conn.execute("INSERT INTO published (who) VALUES (20)")
        assert [r["who"] for r in db.query("SELECT who FROM published")] == [20]
        # Published: the row is gone; the next holder's claim inserts its own.
        assert db.query("SELECT * FROM flight_fences") == []
        assert fences.claim("work", 30)
    finally:
        home.close()
