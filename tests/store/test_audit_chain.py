"""The audit chain: every audited record is chained, and every kind of tampering is found.

Tampering is done the way an attacker with the database file would: raw SQL through a
separate sqlite3 connection, dropping the append-only triggers first.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepseek_eyes.audit.checkpoints import Checkpoint, sign_checkpoint, stored_checkpoints
from deepseek_eyes.audit.export import export_chain
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.show import show
from deepseek_eyes.audit.verify import Report, verify_database, verify_file
from deepseek_eyes.errors import AuditError, EvidenceIntegrityError
from deepseek_eyes.home import DataHome
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import MIGRATIONS, Database
from deepseek_eyes.store.events import SessionStore, TurnRecord
from deepseek_eyes.usage import ProviderUsage, UsageCategory
from deepseek_eyes.vision.evidence.cache import (
    EvidenceCache,
    EvidenceKey,
    EvidenceRecord,
    ImageMeta,
)
from deepseek_eyes.vision.routing.attempts import AttemptLog
from deepseek_eyes.vision.types import Variant
from helpers import fresh_database, named_records, raw_store, rewritten_body

TRIGGERS = ("chain_no_update", "chain_no_delete", "evidence_no_update", "events_no_update",
            "events_no_delete")


def _fill(home: DataHome, n: int = 3) -> None:
    """A few records of every audited kind, written by the real stores."""
    cache = EvidenceCache(home.db)
    attempts = AttemptLog(home.db)
    sessions = SessionStore(home.db)
    for i in range(n):
        sha = f"{i:064x}"
        cache.remember_image(ImageMeta(sha, sha, 10 + i, 10, "image/png", 100 + i))
        op = attempts.operation("see")
        op.record("cache", "miss", image_sha256=sha)
        op.record("route", "ok", route="local", latency_ms=3.5)
        key = EvidenceKey(sha, "local", Variant.EVIDENCE, None, "fp")
        cache.put(EvidenceRecord.build(key, image_sha256=sha, model="m",
                                       evidence={"schema": "x", "text": f"secret {i}"},
                                       created_at=1.0 + i))
        home.audit.append("mcp.call", f"srv.tool{i}", outcome="ok", ms=i)
        home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10, 2), source="t",
                                model="m")
        sid = f"s{i}"
        sessions.append(sid, [{"role": "user", "content": f"hello {i}"}], create="test",
                        turn=TurnRecord(id=f"turn-{i}", session_id=sid, started_at=1.0,
                                        ended_at=2.0, model="m", path="text", outcome="ok",
                                        code=None, details={"evidence": []}))
    home.db.flush()
    home.seal()  # a chain with entries and no checkpoint does not verify


@pytest.fixture
def home(tmp_path: Path) -> Iterator[DataHome]:
    h = DataHome(tmp_path / "home")
    _fill(h)
    yield h
    h.db.close()


def _raw(home: DataHome) -> sqlite3.Connection:
    home.db.flush()
    return raw_store(home.db.path, tamper=True)


def _verify(home: DataHome, pinned: Checkpoint | None = None) -> Report:
    return verify_database(home.db, home.audit_keys(), pinned=pinned)


def _problem(report: Report) -> tuple[str, int | None]:
    assert report.problem is not None, report.as_json()
    return report.problem.code, report.problem.seq


def _seq_of(home: DataHome, table: str, rowid: int) -> int:
    """The entry that names the record: its single entry, or its transaction's batch."""
    with home.db.reading() as conn:
        entry = chain.entry_of(conn, table, rowid)
    assert entry is not None
    return entry[0]


def test_every_audited_record_is_chained_and_the_chain_verifies(home: DataHome) -> None:
    report = _verify(home)
    assert report.ok, report.as_json()
    total = sum(int(home.db.query_one(f"SELECT COUNT(*) n FROM {t}")["n"])  # noqa: S608
                for t in chain.CHAINED_TABLES)
    assert report.records == total
    # A transaction's records share one entry (store/chain.py): fewer entries than records.
    assert report.entries < total
    assert {"vision.attempt", "vision.evidence", "vision.image", "mcp.call", "usage",
            "session", "session.event", "turn"} <= set(report.kinds)


def _text_column(conn: sqlite3.Connection, table: str) -> tuple[int, str, str]:
    """(rowid, column, value) of the last non-empty text value in ``table`` (not a key)."""
    cur = conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid LIMIT 1")  # noqa: S608
    row = cur.fetchone()
    names = [d[0] for d in cur.description]
    for name, value in reversed(list(zip(names[1:], row[1:], strict=True))):
        if isinstance(value, str) and value:
            return int(row[0]), name, value
    raise AssertionError(f"no text in {table}")


@pytest.mark.parametrize("table", [t for t in chain.CHAINED_TABLES if t != "evidence_quarantine"])
def test_one_changed_byte_in_any_record_is_found(home: DataHome, table: str) -> None:
    conn = _raw(home)
    rowid, column, value = _text_column(conn, table)
    i = len(value) // 2
    flipped = value[:i] + chr(ord(value[i]) ^ 1) + value[i + 1:]
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?",  # noqa: S608
                 (flipped, rowid))
    assert _problem(_verify(home)) == ("AUDIT_RECORD_TAMPERED", _seq_of(home, table, rowid))


def test_a_changed_number_or_an_edited_entry_is_found(home: DataHome) -> None:
    conn = _raw(home)
    conn.execute("UPDATE usage SET prompt_tokens = prompt_tokens + 1 WHERE rowid = 2")
    assert _problem(_verify(home)) == ("AUDIT_RECORD_TAMPERED", _seq_of(home, "usage", 2))
    conn.execute("UPDATE usage SET prompt_tokens = prompt_tokens - 1 WHERE rowid = 2")
    assert _verify(home).ok
    conn.execute("UPDATE chain SET kind = 'vision.attempt ' WHERE seq = 4")
    assert _problem(_verify(home)) == ("AUDIT_ENTRY_TAMPERED", 4)


def test_removed_records_and_entries_are_found(home: DataHome) -> None:
    conn = _raw(home)
    conn.execute("DELETE FROM attempts WHERE rowid = 3")
    assert _problem(_verify(home)) == ("AUDIT_RECORD_MISSING", _seq_of(home, "attempts", 3))
    conn.execute("DELETE FROM chain WHERE seq = 5")
    assert _problem(_verify(home)) == ("AUDIT_CHAIN_BROKEN", 6)


def test_swapped_records_and_swapped_entries_are_found(home: DataHome) -> None:
    conn = _raw(home)
    a = conn.execute("SELECT details FROM audit WHERE rowid = 1").fetchone()[0]
    b = conn.execute("SELECT details FROM audit WHERE rowid = 2").fetchone()[0]
    conn.execute("UPDATE audit SET details = ? WHERE rowid = 1", (b,))
    conn.execute("UPDATE audit SET details = ? WHERE rowid = 2", (a,))
    assert _problem(_verify(home)) == ("AUDIT_RECORD_TAMPERED", _seq_of(home, "audit", 1))
    conn.execute("UPDATE audit SET details = ? WHERE rowid = 1", (a,))
    conn.execute("UPDATE audit SET details = ? WHERE rowid = 2", (b,))
    # swap two whole entries (their seqs exchanged)
    conn.execute("UPDATE chain SET seq = -1 WHERE seq = 7")
    conn.execute("UPDATE chain SET seq = 7 WHERE seq = 8")
    conn.execute("UPDATE chain SET seq = 8 WHERE seq = -1")
    assert _problem(_verify(home)) == ("AUDIT_CHAIN_BROKEN", 7)


def test_an_entrys_stored_prev_digits_must_be_the_hash_before_it(home: DataHome) -> None:
    """A row stores its prev's first PREV_KEPT digits (the row before holds it whole): read
    back whole when they are that hash's; other digits, none, or a whole wrong hash are a
    broken link, and a whole right one (a row written before) verifies as it always did."""
    conn = _raw(home)
    stored, before = conn.execute(
        "SELECT prev, (SELECT hash FROM chain WHERE seq = 4) FROM chain WHERE seq = 5"
    ).fetchone()
    assert stored == before[:chain.PREV_KEPT]
    for edited in ("f" * chain.PREV_KEPT if not before.startswith("f") else "0" * 8, "",
                   "a" * 64, before[:chain.PREV_KEPT - 1]):
        conn.execute("UPDATE chain SET prev = ? WHERE seq = 5", (edited,))
        assert _problem(_verify(home)) == ("AUDIT_CHAIN_BROKEN", 5), edited
    conn.execute("UPDATE chain SET prev = ? WHERE seq = 5", (before,))  # whole: as before
    assert _verify(home).ok
    conn.execute("UPDATE chain SET prev = ? WHERE seq = 5", (stored,))
    assert _verify(home).ok
    conn.close()


def test_a_record_written_behind_the_chains_back_is_found(home: DataHome) -> None:
    conn = _raw(home)
    conn.execute("INSERT INTO audit (ts, kind, subject, details) VALUES (1, 'x', 'y', '{}')")
    code, _ = _problem(_verify(home))
    assert code == "AUDIT_RECORD_UNCHAINED"


def test_a_cut_tail_passes_alone_and_fails_against_a_pinned_checkpoint(home: DataHome) -> None:
    kept = stored_checkpoints(home.db)[-1]  # the fixture's seal
    home.audit.append("mcp.call", "pinned", outcome="ok")
    home.db.flush()  # its own entry (a transaction's records share one)
    home.audit.append("mcp.call", "pinned too", outcome="ok")
    pinned = sign_checkpoint(home.db, home.audit_keys())
    home.audit.append("mcp.call", "later", outcome="ok")
    sign_checkpoint(home.db, home.audit_keys())
    assert _verify(home, pinned).ok
    conn = _raw(home)
    # The attacker cuts the newest entries, their records and every checkpoint after the
    # cut, which is just after a checkpoint they keep, so the stored ones still agree.
    cut = kept.seq + 1
    after = [int(r[0]) for r in conn.execute("SELECT seq FROM chain WHERE seq > ?", (cut,))]
    for table, rowid in [named for seq in after for named in named_records(conn, seq)]:
        conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    conn.execute("DELETE FROM chain WHERE seq > ?", (cut,))
    conn.execute("DELETE FROM chain_checkpoints WHERE seq > ?", (cut,))
    assert _verify(home).ok  # what the database alone cannot tell
    code, seq = _problem(_verify(home, pinned))
    assert (code, seq) == ("AUDIT_CHAIN_BROKEN", cut + 1)
    assert "cut" in _verify(home, pinned).problem.reason  # type: ignore[union-attr]
    # Cutting every checkpoint with it is refused by the database alone.
    conn.execute("DELETE FROM chain_checkpoints")
    assert _problem(_verify(home)) == ("AUDIT_CHECKPOINT_MISSING", None)


def test_a_consistently_rewritten_chain_fails_its_signed_checkpoint(home: DataHome) -> None:
    sign_checkpoint(home.db, home.audit_keys())
    conn = _raw(home)
    # The attacker edits a record and recomputes every digest and hash after it.
    conn.execute("UPDATE usage SET completion_tokens = 0 WHERE rowid = 1")
    prev = chain.GENESIS
    rows = conn.execute("SELECT seq, ts, kind, ref_table, ref_id, body FROM chain"
                        " ORDER BY seq").fetchall()
    for seq, ts, kind, table, rowid, body in rows:
        body = rewritten_body(conn, kind, body)  # a batch's record digests too
        digest = (chain.record_digest(chain.read_record(conn, table, rowid) or {})
                  if table else chain._sha256(body.encode()))
        value = chain.entry_hash(seq, ts, kind, chain.ref_text(table, rowid), digest, prev)
        conn.execute("UPDATE chain SET body = ?, digest = ?, prev = ?, hash = ? WHERE seq = ?",
                     (body, digest, prev, value, seq))
        prev = value
    code, _ = _problem(_verify(home))
    assert code == "AUDIT_CHECKPOINT_INVALID"


def test_rotated_keys_keep_old_checkpoints_valid_and_unknown_keys_fail(home: DataHome) -> None:
    keyring = home.audit_keys()
    first = sign_checkpoint(home.db, keyring)
    old_id = keyring.active_id
    new_id = keyring.rotate()
    home.audit.append("mcp.call", "after-rotation", outcome="ok")
    second = sign_checkpoint(home.db, keyring)
    assert (first.key_id, second.key_id) == (old_id, new_id)
    assert _verify(home).ok
    reloaded = AuditKeyring.load_or_create(audit_directory(home.root))
    assert reloaded.ids() == [new_id, old_id]
    assert verify_database(home.db, reloaded).ok
    only_new = AuditKeyring([reloaded.keys[0]])
    report = verify_database(home.db, only_new)
    assert _problem(report) == ("AUDIT_KEY_UNKNOWN", first.seq)
    forged = Checkpoint(second.seq, second.hash, second.ts, new_id, "0" * 64)
    assert _problem(_verify(home, forged)) == ("AUDIT_CHECKPOINT_INVALID", second.seq)


def test_a_checkpoint_row_stores_hash_and_mac_as_base64_and_reads_them_as_hex(
    home: DataHome,
) -> None:
    """Stored: 44 base64 characters each, not 64 hex; read (verify, the export, the console)
    as the hex that was signed. A row in hex, as older databases hold it, reads the same; a
    changed byte of either, base64 or not, fails the checkpoint."""
    from deepseek_eyes.console.views.audit import audit_head

    signed = sign_checkpoint(home.db, home.audit_keys())
    conn = _raw(home)
    row_id, stored_hash, stored_mac = conn.execute(
        "SELECT id, hash, mac FROM chain_checkpoints ORDER BY id DESC LIMIT 1").fetchone()
    assert (len(stored_hash), len(stored_mac)) == (44, 44)
    assert base64.b64decode(stored_hash).hex() == signed.hash
    assert base64.b64decode(stored_mac).hex() == signed.mac
    assert stored_checkpoints(home.db)[-1] == signed
    assert audit_head(home.db)["checkpoints"][0]["hash"] == signed.hash
    assert _verify(home).ok
    exported = home.root / "chain.jsonl"
    export_chain(home.db, exported, home.audit_keys())
    assert signed.mac in exported.read_text(encoding="utf-8")
    assert verify_file(exported, home.audit_keys()).ok
    conn.execute("UPDATE chain_checkpoints SET hash = ?, mac = ? WHERE id = ?",
                 (signed.hash, signed.mac, row_id))  # hex, as before
    assert stored_checkpoints(home.db)[-1] == signed
    assert _verify(home).ok
    other = base64.b64encode(bytes(32)).decode()
    for edited in ((stored_hash, other), (other, stored_mac),
                   (stored_hash, "!" + stored_mac[1:]), (stored_hash[:-2] + "B=", stored_mac)):
        conn.execute("UPDATE chain_checkpoints SET hash = ?, mac = ? WHERE id = ?",
                     (*edited, row_id))
        assert _problem(_verify(home)) == ("AUDIT_CHECKPOINT_INVALID", signed.seq), edited
    conn.close()


def test_the_export_verifies_alone_and_tampering_in_it_is_found(
    home: DataHome, tmp_path: Path
) -> None:
    pinned = sign_checkpoint(home.db, home.audit_keys())
    out = tmp_path / "audit.jsonl"
    summary = export_chain(home.db, out, home.audit_keys())
    assert summary["entries"] == pinned.seq
    text = out.read_text()
    assert "hello 0" not in text  # hashes, not content
    assert "secret 0" not in text
    keyring = home.audit_keys()
    assert verify_file(out, keyring, pinned=pinned).ok
    lines = text.splitlines(keepends=True)

    def check(new_lines: list[str], code: str) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_text("".join(new_lines))
        report = verify_file(bad, keyring, pinned=pinned)
        assert report.problem is not None, report.as_json()
        assert report.problem.code == code, report.as_json()

    # The first entry line with a record that has a time (its own, or one of its batch's:
    # a transaction's records share one entry).
    def timed(line: str) -> dict[str, object] | None:
        item = json.loads(line)
        records = [item.get("record"), *(item.get("records") or ())]
        return next((r for r in records if isinstance(r, dict) and "ts" in r), None)

    at = next(n for n, line in enumerate(lines) if n and timed(line) is not None)
    entry = json.loads(lines[at])
    record = next(r for r in [entry.get("record"), *(entry.get("records") or ())]
                  if isinstance(r, dict) and "ts" in r)
    record["ts"] = record["ts"] + 1e-6
    check([*lines[:at], json.dumps(entry) + "\n", *lines[at + 1:]], "AUDIT_RECORD_TAMPERED")
    check([*lines[:3], *lines[4:]], "AUDIT_CHAIN_BROKEN")  # removed
    check([*lines[:3], lines[4], lines[3], *lines[5:]], "AUDIT_CHAIN_BROKEN")  # swapped
    entries = [line for line in lines if '"type":"entry"' in line]
    check([lines[0], *entries[:5]], "AUDIT_CHECKPOINT_MISSING")  # cut, checkpoints gone too
    checkpoint_lines = [line for line in lines if '"type":"checkpoint"' in line]
    check([lines[0], *entries[:5], *checkpoint_lines], "AUDIT_EXPORT_MISMATCH")  # cut tail
    with pytest.raises(AuditError) as err:
        verify_file(tmp_path / "nope.jsonl", keyring)
    assert err.value.code == "AUDIT_EXPORT_INVALID"


def test_retention_cuts_are_chained_and_only_they_excuse_missing_rows(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "home")
    log = AttemptLog(home.db, max_rows=10)
    for _ in range(30):
        log.operation("see").record("cache", "miss")
    log.trim()
    report = _verify(home)
    assert report.ok, report.as_json()
    assert report.retained == 20
    assert log.count() == 10
    conn = _raw(home)
    conn.execute("DELETE FROM attempts WHERE rowid = (SELECT MAX(rowid) FROM attempts)")
    assert _problem(_verify(home))[0] == "AUDIT_RECORD_MISSING"
    home.db.close()


def test_quarantined_evidence_stays_accounted_for(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "home")
    cache = EvidenceCache(home.db)
    key = EvidenceKey("a" * 64, "local", Variant.EVIDENCE, None, "fp")
    cache.put(EvidenceRecord.build(key, image_sha256="a" * 64, model="m",
                                   evidence={"text": "x"}, created_at=1.0))
    home.seal()
    conn = _raw(home)
    conn.execute("UPDATE evidence SET record = replace(record, '\"x\"', '\"y\"')")
    assert _problem(_verify(home))[0] == "AUDIT_RECORD_TAMPERED"
    fresh = EvidenceCache(home.db)
    with pytest.raises(EvidenceIntegrityError) as err:
        fresh.get(key)
    assert err.value.code == "EVIDENCE_CACHE_TAMPERED"
    report = _verify(home)  # the removal is a retention entry; the quarantine is chained
    assert report.ok, report.as_json()
    assert report.kinds.get("vision.quarantine") == 1
    assert report.retained == 1
    home.db.close()


@pytest.mark.parametrize("count", [1, 3, 4, 5, 63, 64, 65, 87, 150])
def test_a_transactions_entries_are_written_whole_and_in_order(
    tmp_path: Path, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries written one a record (as before batch entries, FOLD_AT out of reach) go
    many to a statement (64, 16, 4, then one by one): every count leaves one unbroken
    chain, each entry naming its own row, and a second transaction goes on from the
    first's head."""
    monkeypatch.setattr(chain, "FOLD_AT", 10**9)
    db = Database(tmp_path / "eyes.db")
    sql = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"
    for _ in range(2):
        with db.transaction() as conn:
            for i in range(count):
                chain.insert(conn, "mcp.call", sql, (1.5 + i, "mcp.call", f"s{i}", "{}"), 7.25)
    rows = db.query("SELECT seq, ref_table, ref_id, prev, hash FROM chain ORDER BY seq")
    assert [r["seq"] for r in rows] == list(range(1, 2 * count + 1))
    assert [r["ref_id"] for r in rows] == list(range(1, 2 * count + 1))
    assert all(r["ref_table"] == "audit" for r in rows)
    # Stored as its first digits (the row before holds it whole), read back whole.
    assert [r["prev"] for r in rows] == \
        [h[:chain.PREV_KEPT] for h in [chain.GENESIS] + [r["hash"] for r in rows[:-1]]]
    with db.reading() as conn:
        entries = list(chain.iter_entries(conn))
        assert [e["prev"] for e in entries] == [chain.GENESIS] + [r["hash"] for r in rows[:-1]]
        assert [chain.entry_at(conn, r["seq"])["prev"] for r in rows] == \
            [e["prev"] for e in entries]  # type: ignore[index]
    keys = AuditKeyring.load_or_create(tmp_path / "keys")
    sign_checkpoint(db, keys)
    report = verify_database(db, keys)
    assert report.ok, report.as_json()
    assert report.entries == 2 * count
    db.close()


@pytest.mark.parametrize("count", [1, 2, 3, 150])
def test_a_transactions_records_share_one_entry(tmp_path: Path, count: int) -> None:
    """Every record a write transaction chains, whatever their number and tables, is named
    by one entry (one record: a single entry), in the order written; the next transaction
    goes on from its hash, and verify checks each record."""
    db = Database(tmp_path / "eyes.db")
    sql = "INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)"
    usage = ("INSERT INTO usage (ts, category, exact, calls, prompt_tokens, completion_tokens,"
             " reasoning_tokens, cache_hit_tokens, cache_miss_tokens, estimated_tokens)"
             " VALUES (?,?,?,?,?,?,?,?,?,?)")
    for _ in range(2):
        with db.transaction() as conn:
            for i in range(count):
                chain.insert(conn, "mcp.call", sql, (1.5 + i, "mcp.call", f"s{i}", "{}"), 7.25)
            chain.insert(conn, "usage", usage, (2.5, "final", 1, 1, 10, 2, 0, 0, 10, 0), 7.5)
    rows = db.query("SELECT seq, kind, ref_table, body, prev, hash FROM chain ORDER BY seq")
    assert [r["seq"] for r in rows] == [1, 2]
    with db.reading() as conn:
        assert [e["prev"] for e in chain.iter_entries(conn)] == [chain.GENESIS, rows[0]["hash"]]
    for n, row in enumerate(rows):
        assert (row["kind"], row["ref_table"]) == (chain.BATCH, None)
        named = [(t, r, k) for t, r, k, _d in chain.batch_members(row["body"])]
        assert named == [*(("audit", n * count + i + 1, "mcp.call") for i in range(count)),
                         ("usage", n + 1, "usage")]
    keys = AuditKeyring.load_or_create(tmp_path / "keys")
    sign_checkpoint(db, keys)
    report = verify_database(db, keys)
    assert report.ok, report.as_json()
    assert (report.entries, report.records) == (2, 2 * count + 2)
    with db.reading() as conn:  # each record found under its entry
        assert chain.entry_of(conn, "audit", count + 1)[0] == 2  # type: ignore[index]
        assert chain.entry_of(conn, "usage", 1)[0] == 1  # type: ignore[index]
        assert chain.entry_of(conn, "usage", 3) is None
    db.close()


@pytest.mark.sqlite_only
def test_a_database_from_before_the_chain_adopts_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "eyes.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version, script in enumerate(MIGRATIONS[:3], start=1):
        conn.executescript(f"BEGIN;{script}\nPRAGMA user_version = {version};COMMIT;")
    conn.execute("INSERT INTO audit (ts, kind, subject, details) VALUES (1, 'old', NULL, '{}')")
    conn.close()
    db = Database(path)
    keys = AuditKeyring.load_or_create(tmp_path / "keys")
    sign_checkpoint(db, keys)
    report = verify_database(db, keys)
    assert report.ok
    assert report.kinds == {"adopted.audit": 1}
    db.close()


def test_processes_sharing_one_database_extend_one_chain(tmp_path: Path) -> None:
    home_dir = tmp_path / "home"
    DataHome(home_dir).close()
    script = textwrap.dedent(f"""
        from pathlib import Path
        from deepseek_eyes.home import DataHome
        home = DataHome(Path({str(home_dir)!r}))
        for i in range(150):
            home.audit.append("mcp.call", "p", i=i)
            if i % 10 == 0:
                home.db.flush()
        home.close()
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env)  # noqa: S603
             for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    home = DataHome(home_dir)
    report = _verify(home)
    assert report.ok, report.as_json()
    assert report.kinds["mcp.call"] == 450
    assert report.checkpoints >= 3
    home.db.close()


def test_the_audit_keyring_is_private_and_an_exposed_one_is_refused(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "home")
    keyring = home.audit_keys()
    assert keyring.path is not None
    assert keyring.path.stat().st_mode & 0o777 == 0o600
    assert keyring.path.parent.stat().st_mode & 0o777 == 0o700
    home.db.close()
    os.chmod(keyring.path, 0o644)
    with pytest.raises(AuditError) as err:
        AuditKeyring.load_or_create(keyring.path.parent)
    assert err.value.code == "AUDIT_KEYRING_EXPOSED"


def test_show_resolves_records_with_their_entries(home: DataHome) -> None:
    turn = show(home.db, "turn-1")
    assert turn["kind"] == "turn"
    assert turn["turn"][0]["chain"]["intact"]
    entry = show(home.db, "3")
    assert entry["entry"]["seq"] == 3
    assert entry["record"]["chain"]["seq"] == 3
    image = show(home.db, f"{1:064x}")
    assert image["kind"] == "image"
    assert image["image"][0]["chain"]["intact"]
    conn = _raw(home)
    conn.execute("UPDATE turns SET outcome = 'failed' WHERE id = 'turn-1'")
    assert show(home.db, "turn-1")["turn"][0]["chain"]["intact"] is False
    with pytest.raises(AuditError) as err:
        show(home.db, "nothing-like-this")
    assert err.value.code == "AUDIT_NOT_FOUND"


@settings(max_examples=300, deadline=None)
@given(
    seq=st.integers(min_value=1, max_value=2**53),
    ts=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 2**40)),
    kind=st.text(max_size=40),
    ref=st.one_of(st.none(), st.text(max_size=40)),
    digest=st.one_of(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
                     st.text(max_size=70)),
)
def test_the_fast_entry_hash_is_the_canonical_one(
    seq: int, ts: float, kind: str, ref: str | None, digest: str
) -> None:
    prev = chain.GENESIS
    canonical = chain._sha256(chain.canonical_bytes({
        "v": 1, "seq": seq, "ts": ts, "kind": kind, "ref": ref, "digest": digest,
        "prev": prev}))
    assert chain.entry_hash(seq, ts, kind, ref, digest, prev) == canonical


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(st.tuples(
        st.text(max_size=30),  # kind: any text, escaped as JSON
        st.sampled_from(sorted(chain.CHAINED_TABLES)),
        st.integers(min_value=1, max_value=2**62),
        st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
        st.booleans(),  # the time of the entry before (one object), or a new one
        st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 2**40)),
    ), min_size=1, max_size=8),
)
def test_a_writers_entries_hash_as_entry_hash_says(
    entries: list[tuple[str, str, int, str, bool, float]],
) -> None:
    """The writer spells an entry's canonical bytes itself (a batch's time made once, the
    kind's and the table's JSON kept): each entry it makes must carry ``entry_hash`` of
    its own fields and link to the one before."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE chain (seq INTEGER PRIMARY KEY, hash TEXT)")
    writer = chain.ChainWriter(conn, buffered=True)
    ts: float = 0.5
    for kind, table, rowid, digest, same_time, new_ts in entries:
        ts = ts if same_time else new_ts
        writer._add(kind, table, rowid, None, digest, ts)
    writer._add("retention", None, None, "{}", "0" * 64, ts)  # a body entry, the other path
    prev = chain.GENESIS
    for row in writer._rows:
        # A body entry is stored without its digest, and every entry with its prev's
        # first digits: read whole, its body's digest is what it was made with, and its
        # prev the hash of the entry before it, which its own hash covers.
        assert row[7] == prev[:chain.PREV_KEPT]
        entry = chain.whole_entry(row, prev)
        seq, ts_, kind, table, rowid, value = (entry["seq"], entry["ts"], entry["kind"],
                                               entry["ref_table"], entry["ref_id"],
                                               entry["hash"])
        assert entry["prev"] == prev
        if table is None:  # its digest is not its body's hash: kept as it was made
            assert row[6] == entry["digest"] == "0" * 64
        assert value == chain.entry_hash(seq, ts_, kind, chain.ref_text(table, rowid),
                                         entry["digest"], prev)
        prev = value
    assert [row[0] for row in writer._rows] == list(range(1, len(entries) + 2))
    conn.close()


def test_an_unsignable_checkpoint_never_loses_the_work(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "home")
    home.audit.append("mcp.call", "a", outcome="ok")
    assert home.seal() is not None
    keyring_path = audit_directory(home.root) / "keyring.json"
    home.db.close()
    os.chmod(keyring_path, 0o644)
    again = DataHome(tmp_path / "home")
    again.audit.append("mcp.call", "b", outcome="ok")
    sealed = again.seal()
    assert sealed is not None
    assert sealed["checkpoint_error"] == "AUDIT_KEYRING_EXPOSED"
    assert "checkpoint" not in sealed
    again.close()  # logs, does not raise
    os.chmod(keyring_path, 0o600)
    with DataHome(tmp_path / "home") as last:
        assert _verify(last).ok


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(line=st.integers(min_value=1, max_value=20),
       field=st.sampled_from(["seq", "ts", "kind", "ref", "digest", "prev", "hash", "record",
                              "body", "type", "key_id", "mac"]),
       value=_JSON)
def test_an_edited_export_is_refused_with_a_code_never_a_crash(
    line: int, field: str, value: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("fuzz")
    with fresh_database():
        home = DataHome(directory / "home")
    _fill(home, 2)
    sign_checkpoint(home.db, home.audit_keys())
    out = directory / "audit.jsonl"
    export_chain(home.db, out, home.audit_keys())
    lines = out.read_text().splitlines()
    index = min(line, len(lines) - 1)
    item = json.loads(lines[index])
    kind = item.get("type")
    if item.get(field, object()) == value and type(item.get(field)) is type(value):
        home.db.close()
        return  # no edit
    carried = field in item
    item[field] = value
    lines[index] = json.dumps(item)
    out.write_text("\n".join(lines) + "\n")
    refused: str | None = None
    try:
        report = verify_file(out, home.audit_keys())
    except AuditError as exc:
        refused = exc.code
    if refused is not None:
        assert refused == "AUDIT_EXPORT_INVALID"
    else:
        # Whatever an entry or a checkpoint commits to must not pass changed; a field it
        # does not carry (an extra body on a row entry, a kind on a checkpoint) may.
        if kind == "entry":
            committed = {"seq", "ts", "kind", "ref", "digest", "prev", "hash", "type"}
            committed |= {"record", "body"} if carried else set()
        else:
            committed = {"seq", "hash", "ts", "key_id", "mac"}
        if field in committed:
            assert report.problem is not None, (kind, field, value)
    home.db.close()
