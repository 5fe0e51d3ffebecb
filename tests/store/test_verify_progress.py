"""The verifier tells its own progress: entries checked so far out of the chain's length,
after each batch, the last count the whole chain (what the web console's bar shows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.verify import verify_database, verify_path
from deepseek_eyes.home import DataHome
from deepseek_eyes.store.db import Database


def _home(root: Path, rows: int) -> None:
    home = DataHome(root)
    for i in range(rows):
        home.audit.write("mcp.call", f"srv.tool{i}", outcome="ok", ms=i)
    home.seal()
    home.close()


def test_progress_counts_each_batch_up_to_the_whole_chain(tmp_path: Path) -> None:
    root = tmp_path / "home"
    _home(root, 10)
    keyring = AuditKeyring.read_only(audit_directory(root))
    seen: list[tuple[int, int]] = []
    db = Database.open_read_only(root / "eyes.db")
    try:
        report = verify_database(db, keyring, progress=lambda d, t: seen.append((d, t)),
                                 batch=4)
    finally:
        db.close()
    assert report.ok, report.as_json()
    total = report.entries
    assert total >= 10
    assert [d for d, _ in seen] == [*range(4, total, 4), total]  # one count a batch
    assert {t for _, t in seen} == {total}
    # verify_path passes it on (one batch here: the default is 2,000 entries).
    again: list[tuple[int, int]] = []
    assert verify_path(root / "eyes.db", keyring, progress=lambda d, t: again.append((d, t))).ok
    assert again == [(total, total)]


@pytest.mark.sqlite_only  # tampers with SQLite's file directly
def test_a_broken_chain_stops_the_count_where_the_problem_is(tmp_path: Path) -> None:
    import sqlite3

    root = tmp_path / "home"
    _home(root, 10)
    conn = sqlite3.connect(root / "eyes.db", isolation_level=None)
    conn.execute("DROP TRIGGER IF EXISTS chain_no_update")
    conn.execute("UPDATE chain SET hash = 'x' WHERE seq = 6")
    conn.close()
    seen: list[int] = []
    db = Database.open_read_only(root / "eyes.db")
    try:
        report = verify_database(db, AuditKeyring.read_only(audit_directory(root)),
                                 progress=lambda d, _t: seen.append(d), batch=4)
    finally:
        db.close()
    assert report.problem is not None
    assert seen == [4]  # the batch holding entry 6 never reported itself checked
