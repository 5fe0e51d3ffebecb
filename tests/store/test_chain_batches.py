"""Batch entries: many log rows written together under one chain entry, with the same tamper
evidence as one entry each.

One data home is built through the real stores (audit rows, usage, attempts with a real
trim, a session in a transaction of its own: single entries beside batch ones) and copied
for each example; the attacker works on the copy with raw SQL, dropping the append-only
triggers first, as in tests/security/test_audit_tamper.py.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deepseek_eyes.audit.checkpoints import Checkpoint, sign_checkpoint, stored_checkpoints
from deepseek_eyes.audit.export import export_chain
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.show import show
from deepseek_eyes.audit.verify import Report, verify_file, verify_path
from deepseek_eyes.home import DataHome
from deepseek_eyes.store import chain
from deepseek_eyes.store.events import SessionStore, TurnRecord
from deepseek_eyes.usage import ProviderUsage, UsageCategory
from deepseek_eyes.vision.routing.attempts import AttemptLog
from helpers import clone_store, fresh_database, named_records, raw_store

TRIGGERS = ("chain_no_update", "chain_no_delete", "evidence_no_update", "events_no_update",
            "events_no_delete")
ROUNDS = 3  # batches of 3 * 8 = 24 appended rows each
SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(frozen=True)
class Template:
    root: Path
    trimmed: int  # attempts rows the real trim removed
    database: str | None = None  # its PostgreSQL database (tests on PostgreSQL)


def _build(root: Path) -> Template:
    home = DataHome(root)
    sessions = SessionStore(home.db)
    attempts = AttemptLog(home.db, max_rows=10)
    for r in range(ROUNDS):
        for i in range(8):
            home.audit.append("mcp.call", f"srv.tool{r}.{i}", outcome="ok", ms=i)
            home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10 + i, 2),
                                    source="t", model="m")
            attempts.operation("see").record("cache", "miss", image_sha256=f"{i:064x}")
        home.db.flush()  # one batch of 24 rows
        sid = f"s{r}"
        sessions.append(sid, [{"role": "user", "content": f"hello {r}"}], create="test",
                        turn=TurnRecord(id=f"turn-{r}", session_id=sid, started_at=1.0,
                                        ended_at=2.0, model="m", path="text", outcome="ok",
                                        code=None, details={}))
        home.seal()
    before = attempts.count()
    attempts.trim()
    trimmed = before - attempts.count()
    home.seal()
    home.close()
    return Template(root, trimmed)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    with fresh_database() as database:
        built = _build(tmp_path_factory.mktemp("batches") / "home")
    return dataclasses.replace(built, database=database)


def _copied(template: Template, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(template.root, copy)
    clone_store(template.database)
    return copy


@pytest.fixture
def root(template: Template, tmp_path: Path) -> Path:
    return _copied(template, tmp_path)


@pytest.fixture(scope="module")
def template_v2(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """The same home written with version 2 batch bodies (hex digests, every kind spelled),
    as databases from before version 3 hold them."""
    with pytest.MonkeyPatch.context() as patch, fresh_database() as database:
        patch.setattr(chain, "BATCH_VERSION", 2)
        built = _build(tmp_path_factory.mktemp("batches-v2") / "home")
    return dataclasses.replace(built, database=database)


@pytest.fixture
def v2_root(template_v2: Template, tmp_path: Path) -> Path:
    return _copied(template_v2, tmp_path)


def _raw(root: Path) -> sqlite3.Connection:
    return raw_store(root / "eyes.db", tamper=True)


def _verify(root: Path) -> Report:
    return verify_path(root / "eyes.db", AuditKeyring.read_only(audit_directory(root)))


def _problem(report: Report) -> tuple[str, int | None, str]:
    assert report.problem is not None, report.as_json()
    return report.problem.code, report.problem.seq, report.problem.reason


def _batches(conn: sqlite3.Connection) -> list[tuple[int, list[tuple[str, int, str, str]]]]:
    return [(int(seq), chain.batch_members(body)) for seq, body in conn.execute(
        "SELECT seq, body FROM chain WHERE kind = ? ORDER BY seq", (chain.BATCH,))]


def _log_batches(conn: sqlite3.Connection) -> list[tuple[int, list[tuple[str, int, str, str]]]]:
    """The batches of the appended log rows (24 each), not the sessions' transactions'."""
    return [(seq, members) for seq, members in _batches(conn) if len(members) == 24]


def _batch_of(conn: sqlite3.Connection, table: str, rowid: int) -> int:
    return next(seq for seq, members in _batches(conn)
                if any((t, r) == (table, rowid) for t, r, _k, _d in members))


def test_batches_verify_and_count_record_by_record(template: Template, root: Path) -> None:
    conn = _raw(root)
    batches = _log_batches(conn)
    assert len(batches) == ROUNDS
    for _seq, members in batches:  # in the order written: audit, usage, attempt, ...
        assert [m[0] for m in members[:3]] == ["audit", "usage", "attempts"]
        assert [m[2] for m in members[:3]] == ["mcp.call", "usage", "vision.attempt"]
    # Each session's transaction (the session, its message, its turn) is one entry too.
    sessions = [members for _seq, members in _batches(conn) if len(members) != 24]
    assert [[(m[0], m[2]) for m in members] for members in sessions] == [
        [("sessions", "session"), ("events", "session.event"), ("turns", "turn")]] * ROUNDS
    body = conn.execute("SELECT body FROM chain WHERE kind = ?", (chain.BATCH,)).fetchone()[0]
    assert body.encode() == chain.canonical_bytes(json.loads(body))
    rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]  # noqa: S608
               for t in chain.CHAINED_TABLES)
    entries = conn.execute("SELECT COUNT(*) FROM chain").fetchone()[0]
    conn.close()
    report = _verify(root)
    assert report.ok, report.as_json()
    assert report.entries == entries < rows
    assert report.records == rows
    assert report.retained == template.trimmed > 0
    assert report.kinds["mcp.call"] == report.kinds["usage"] == 8 * ROUNDS
    assert report.kinds["vision.attempt"] == 8 * ROUNDS
    assert chain.BATCH not in report.kinds
    # Checkpoints count a batch's records under their tables, as verify does.
    newest = stored_checkpoints_of(root)[-1]
    assert newest.counts is not None
    assert newest.counts["audit"] == newest.counts["usage"] == 8 * ROUNDS


def stored_checkpoints_of(root: Path) -> list[Checkpoint]:
    with DataHome(root) as home:
        return stored_checkpoints(home.db)


@pytest.mark.parametrize(("table", "column", "value"), [
    ("audit", "subject", "forged"), ("usage", "prompt_tokens", 99),
    ("attempts", "outcome", "hit")])
def test_a_changed_record_under_a_batch_entry_is_named(
    root: Path, table: str, column: str, value: object
) -> None:
    conn = _raw(root)
    rowid = conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0]  # noqa: S608
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?",  # noqa: S608
                 (value, rowid))
    seq = _batch_of(conn, table, rowid)
    conn.close()
    code, at, reason = _problem(_verify(root))
    assert (code, at) == ("AUDIT_RECORD_TAMPERED", seq)
    assert reason.startswith(f"{table}:{rowid} no longer matches")


def test_audit_show_finds_a_records_batch_entry(root: Path) -> None:
    conn = _raw(root)
    rowid, operation = conn.execute(
        "SELECT rowid, operation_id FROM attempts ORDER BY rowid DESC LIMIT 1").fetchone()
    seq = _batch_of(conn, "attempts", rowid)
    with DataHome(root) as home:
        (item,) = show(home.db, operation)["attempts"]
        assert item["chain"] is not None
        assert (item["chain"]["seq"], item["chain"]["kind"]) == (seq, chain.BATCH)
        assert item["chain"]["intact"]
        conn.execute("UPDATE attempts SET outcome = 'hit' WHERE rowid = ?", (rowid,))
        (item,) = show(home.db, operation)["attempts"]
        assert item["chain"] is not None
        assert item["chain"]["intact"] is False
    conn.close()


def test_a_body_entry_is_stored_without_its_digest_and_read_whole(root: Path) -> None:
    """A body entry's digest is its body's SHA-256: stored empty, read back whole (verify,
    ``audit show SEQ``, the export); one stored whole, as older databases hold it, reads
    the same, and a wrong one is still found."""
    conn = _raw(root)
    rows = conn.execute("SELECT seq, body, digest FROM chain WHERE body IS NOT NULL"
                        " ORDER BY seq").fetchall()
    assert rows
    assert all(digest == "" for _seq, _body, digest in rows)
    seq, body, _ = rows[0]
    whole = hashlib.sha256(body.encode()).hexdigest()
    with DataHome(root) as home:
        assert show(home.db, str(seq))["entry"]["digest"] == whole
    assert [e["digest"] for e in chain.iter_entries(conn) if e["seq"] == seq] == [whole]
    assert _verify(root).ok
    for s, b, _ in rows:  # stored whole, as before
        conn.execute("UPDATE chain SET digest = ? WHERE seq = ?",
                     (hashlib.sha256(b.encode()).hexdigest(), s))
    assert _verify(root).ok
    conn.execute("UPDATE chain SET digest = ? WHERE seq = ?", ("0" * 64, seq))
    assert _problem(_verify(root))[:2] == ("AUDIT_ENTRY_TAMPERED", seq)
    conn.close()


def test_an_edited_batch_entry_is_found(v2_root: Path) -> None:
    root = v2_root  # the body edited as text: version 2's spelling (version 3's below)
    conn = _raw(root)
    seq, members = _log_batches(conn)[1]
    body = conn.execute("SELECT body FROM chain WHERE seq = ?", (seq,)).fetchone()[0]
    # One record dropped from the body (its row deleted too), the body's digest made to
    # match: the entry's own hash no longer does.
    table, rowid, _kind, digest = members[0]
    edited = body.replace(f'["{table}","mcp.call",{rowid},"{digest}"],', "")
    assert edited != body
    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    conn.execute("UPDATE chain SET body = ?, digest = ? WHERE seq = ?",
                 (edited, hashlib.sha256(edited.encode()).hexdigest(), seq))
    assert _problem(_verify(root))[:2] == ("AUDIT_ENTRY_TAMPERED", seq)
    # The body alone edited: it no longer hashes to the digest.
    conn.execute("UPDATE chain SET body = ? WHERE seq = ?", (edited + " ", seq))
    assert _problem(_verify(root))[:2] == ("AUDIT_ENTRY_TAMPERED", seq)
    conn.close()


def _rehash_from(conn: Any, seq: int, edit: Callable[[str], str]) -> None:
    """The attacker's rewrite: entry ``seq``'s body edited by ``edit``, then its digest and
    every entry's hash from it on made again, so the chain is whole."""
    before = conn.execute("SELECT hash FROM chain WHERE seq = ?", (seq - 1,)).fetchone()
    prev = before[0] if before is not None else chain.GENESIS  # entries store its digits
    for s, ts, k, ref_table, ref_id, body in conn.execute(
            "SELECT seq, ts, kind, ref_table, ref_id, body FROM chain WHERE seq >= ?"
            " ORDER BY seq", (seq,)).fetchall():
        if s == seq:
            body = edit(body)
        new_digest = (hashlib.sha256(body.encode()).hexdigest() if ref_table is None else
                      chain.record_digest(chain.read_record(conn, ref_table, ref_id) or {}))
        value = chain.entry_hash(s, ts, k, chain.ref_text(ref_table, ref_id), new_digest, prev)
        conn.execute("UPDATE chain SET body = ?, digest = ?, prev = ?, hash = ? WHERE seq = ?",
                     (body, new_digest, prev, value, s))
        prev = value


def test_a_consistent_rewrite_of_a_batch_fails_its_checkpoint(v2_root: Path) -> None:
    """The attacker drops a record from a batch and recomputes every hash after it: the
    chain is whole again, and the signed checkpoints (counts, hash) say it was rewritten."""
    root = v2_root  # the body edited as text: version 2's spelling (version 3's below)
    conn = _raw(root)
    seq, members = _log_batches(conn)[0]
    table, rowid, kind, digest = members[0]
    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    _rehash_from(conn, seq, lambda body: body.replace(
        f'["{table}","{kind}",{rowid},"{digest}"],', ""))
    conn.close()
    assert _problem(_verify(root))[0] == "AUDIT_CHECKPOINT_INVALID"


def test_removed_swapped_and_missing_are_found(root: Path) -> None:
    conn = _raw(root)
    seq = _log_batches(conn)[1][0]
    conn.execute("UPDATE chain SET seq = -1 WHERE seq = ?", (seq,))
    conn.execute("UPDATE chain SET seq = ? WHERE seq = ?", (seq, seq + 1))
    conn.execute("UPDATE chain SET seq = ? WHERE seq = -1", (seq + 1,))
    assert _problem(_verify(root))[:2] == ("AUDIT_CHAIN_BROKEN", seq)  # swapped
    conn.execute("UPDATE chain SET seq = -1 WHERE seq = ?", (seq + 1,))
    conn.execute("UPDATE chain SET seq = ? WHERE seq = ?", (seq + 1, seq))
    conn.execute("UPDATE chain SET seq = ? WHERE seq = -1", (seq,))
    assert _verify(root).ok
    # A record a batch names deleted (no retention cut covers it).
    rowid = conn.execute("SELECT MAX(rowid) FROM usage").fetchone()[0]
    saved = conn.execute("SELECT * FROM usage WHERE rowid = ?", (rowid,)).fetchone()
    conn.execute("DELETE FROM usage WHERE rowid = ?", (rowid,))
    code, at, reason = _problem(_verify(root))
    assert (code, at) == ("AUDIT_RECORD_MISSING", _batch_of(conn, "usage", rowid))
    assert f"usage:{rowid}" in reason
    conn.execute(f"INSERT INTO usage VALUES ({','.join('?' * len(saved))})",  # noqa: S608
                 saved)
    assert _verify(root).ok
    # A record added behind the chain's back, in a table batches cover.
    conn.execute("INSERT INTO usage (ts, category, exact, calls, prompt_tokens,"
                 " completion_tokens, reasoning_tokens, cache_hit_tokens, cache_miss_tokens,"
                 " estimated_tokens) VALUES (1, 'final', 1, 1, 1, 1, 0, 0, 0, 0)")
    assert _problem(_verify(root))[0] == "AUDIT_RECORD_UNCHAINED"
    # The batch entry removed.
    conn.execute("DELETE FROM usage WHERE rowid = (SELECT MAX(rowid) FROM usage)")
    conn.execute("DELETE FROM chain WHERE seq = ?", (seq,))
    assert _problem(_verify(root))[:2] == ("AUDIT_CHAIN_BROKEN", seq + 1)
    conn.close()


def test_the_export_carries_a_batchs_records_and_is_checked(root: Path) -> None:
    out = root.parent / "audit.jsonl"
    with DataHome(root) as home:
        pinned = sign_checkpoint(home.db, home.audit_keys())
        export_chain(home.db, out, home.audit_keys())
    keyring = AuditKeyring.read_only(audit_directory(root))
    assert verify_file(out, keyring, pinned=pinned).ok
    lines = out.read_text().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if f'"kind":"{chain.BATCH}"' in line)
    item = json.loads(lines[index])
    assert len(item["records"]) == 24
    assert item["records"][0]["subject"].startswith("srv.tool")

    def check(edited: dict[str, object], code: str) -> None:
        bad = root.parent / "bad.jsonl"
        bad.write_text("".join([*lines[:index], json.dumps(edited) + "\n",
                                *lines[index + 1:]]))
        report = verify_file(bad, keyring, pinned=pinned)
        assert report.problem is not None, report.as_json()
        assert (report.problem.code, report.problem.seq) == (code, item["seq"])

    changed = json.loads(lines[index])
    changed["records"][4]["ts"] += 1e-6  # a usage row (attempts may be trimmed: null)
    check(changed, "AUDIT_RECORD_TAMPERED")
    short = json.loads(lines[index])
    short["records"] = short["records"][1:]
    check(short, "AUDIT_RECORD_MISSING")
    gone = json.loads(lines[index])
    gone["records"][3] = None  # no retention cut covers it
    check(gone, "AUDIT_RECORD_MISSING")


def test_single_entries_from_before_and_batches_after_share_one_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database written before batch entries existed (one entry a record, as FOLD_AT out of
    reach makes it) goes on with batch entries, and verifies whole: nothing to migrate."""
    home = DataHome(tmp_path / "home")
    with monkeypatch.context() as patch:
        patch.setattr(chain, "FOLD_AT", 10**9)
        for i in range(20):
            home.audit.append("mcp.call", f"old{i}", outcome="ok")
        home.db.flush()
        home.seal()
    assert home.db.query_one("SELECT COUNT(*) n FROM chain")["n"] == 20
    for i in range(20):
        home.audit.append("mcp.call", f"new{i}", outcome="ok")
    home.db.flush()
    home.seal()
    kinds = [r["kind"] for r in home.db.query("SELECT kind FROM chain ORDER BY seq")]
    assert kinds == ["mcp.call"] * 20 + [chain.BATCH]
    home.close()
    report = _verify(tmp_path / "home")
    assert report.ok, report.as_json()
    assert (report.entries, report.records, report.kinds) == (21, 40, {"mcp.call": 40})


def test_processes_extend_one_chain_with_batches(tmp_path: Path) -> None:
    home_dir = tmp_path / "home"
    DataHome(home_dir).close()
    script = textwrap.dedent(f"""
        from pathlib import Path
        from deepseek_eyes.home import DataHome
        home = DataHome(Path({str(home_dir)!r}))
        for i in range(60):
            home.audit.append("mcp.call", "p", i=i)
            if i % 20 == 19:
                home.db.flush()
        home.close()
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env)  # noqa: S603
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    report = _verify(home_dir)
    assert report.ok, report.as_json()
    assert report.kinds == {"mcp.call": 120}
    assert report.entries == 6


def test_a_batch_body_is_runs_that_expand_to_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consecutive rowids of one table and kind share a run; anything else starts one."""
    monkeypatch.setattr(chain, "BATCH_VERSION", 2)  # version 3's form: the test below
    digests = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(6)]
    members = [("mcp.call", "audit", 4, digests[0]), ("mcp.call", "audit", 5, digests[1]),
               ("usage", "usage", 6, digests[2]), ("mcp.call", "audit", 7, digests[3]),
               ("other", "audit", 8, digests[4]), ("other", "audit", 10, digests[5])]
    with DataHome(tmp_path / "home") as home, home.db.transaction() as conn:
        writer = chain.ChainWriter.of(conn)
        seq = writer.add_batch(members, 1.0)
        writer.write()
        body = conn.execute("SELECT body FROM chain WHERE seq = ?", (seq,)).fetchone()[0]
    runs = json.loads(body)["records"]
    assert [(t, k, first, len(d) // 64) for t, k, first, d in runs] == [
        ("audit", "mcp.call", 4, 2), ("usage", "usage", 6, 1), ("audit", "mcp.call", 7, 1),
        ("audit", "other", 8, 1), ("audit", "other", 10, 1)]
    assert body.encode() == chain.canonical_bytes(json.loads(body))
    assert chain.batch_members(body) == [(t, r, k, d) for k, t, r, d in members]


def test_a_version_3_body_is_compact_runs_that_expand_to_its_records(tmp_path: Path) -> None:
    """Version 3 (what is written now): a run's digests are the base64 of their bytes, one
    after another, and a table's usual kind is written "" (another kind, an adopted row's,
    as itself); it names the same records, digests and kinds as version 2 would."""
    digests = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(7)]
    members = [("mcp.call", "audit", 4, digests[0]), ("mcp.call", "audit", 5, digests[1]),
               ("usage", "usage", 6, digests[2]), ("usage", "usage", 7, digests[3]),
               ("usage", "usage", 8, digests[4]), ("adopted.usage", "usage", 9, digests[5]),
               ("turn", "turns", 3, digests[6])]
    with DataHome(tmp_path / "home") as home, home.db.transaction() as conn:
        writer = chain.ChainWriter.of(conn)
        seq = writer.add_batch(members, 1.0)
        writer.write()
        body = conn.execute("SELECT body FROM chain WHERE seq = ?", (seq,)).fetchone()[0]
    parsed = json.loads(body)
    assert parsed["v"] == 3
    assert parsed["records"] == [
        ["audit", "mcp.call", 4, base64.b64encode(bytes.fromhex(digests[0] + digests[1])
                                                  ).decode()],
        ["usage", "", 6, base64.b64encode(bytes.fromhex("".join(digests[2:5]))).decode()],
        ["usage", "adopted.usage", 9, base64.b64encode(bytes.fromhex(digests[5])).decode()],
        ["turns", "", 3, base64.b64encode(bytes.fromhex(digests[6])).decode()]]
    assert body.encode() == chain.canonical_bytes(parsed)
    assert chain.batch_members(body) == [(t, r, k, d) for k, t, r, d in members]
    assert len(body) < len(chain.canonical_bytes({"records": [
        [t, k, r, d] for k, t, r, d in members], "v": 2}))


def test_a_record_of_an_empty_kind_keeps_its_batch_at_version_2(tmp_path: Path) -> None:
    """An empty kind would read back as the table's usual one from a version 3 body: such
    an entry is written as version 2, every kind spelled."""
    digest = "ab" * 32
    with DataHome(tmp_path / "home") as home, home.db.transaction() as conn:
        writer = chain.ChainWriter.of(conn)
        seq = writer.add_batch([("", "usage", 1, digest), ("usage", "usage", 2, digest)], 1.0)
        writer.write()
        body = conn.execute("SELECT body FROM chain WHERE seq = ?", (seq,)).fetchone()[0]
    assert json.loads(body)["v"] == 2
    assert chain.batch_members(body) == [("usage", 1, "", digest), ("usage", 2, "usage", digest)]


def test_a_version_3_body_is_read_only_as_written() -> None:
    """Each field of a version 3 run is checked: what the writer never makes is no body."""
    one = base64.b64encode(bytes(32)).decode()
    good = '{"records":[["usage","",1,"' + one + '"]],"v":3}'
    assert chain.batch_members(good) == [("usage", 1, "usage", "00" * 32)]
    for run in (f'["audit","",1,"{one}"]',  # the audit table has no usual kind
                '["usage","",1,"' + base64.b64encode(bytes(31)).decode() + '"]',  # 31 bytes
                '["usage","",1,"' + one.rstrip("=") + '"]',  # padding dropped
                '["usage","",1,"' + one[:-2] + 'B="]',  # stray bits: another spelling
                '["usage","",1,"' + one.replace("A", "-", 1) + '"]',  # not base64
                '["usage","",1,"' + "00" * 32 + '"]',  # hex
                '["usage","",1,""]', '["usage",null,1,"' + one + '"]',
                '["usage","","1","' + one + '"]'):
        with pytest.raises(ValueError, match="not a batch entry"):
            chain.batch_members('{"records":[' + run + '],"v":3}')
    with pytest.raises(ValueError, match="not a batch entry"):
        chain.batch_members('{"records":[["usage","",1,"' + one + '"]],"v":4}')


def test_an_edited_version_3_batch_entry_is_found(root: Path) -> None:
    """A version 3 body's new fields edited (a run dropped, a usual kind spelled out or
    another kind made usual, a digest's base64 changed): its entry's hash fails."""
    conn = _raw(root)
    seq, _members = _log_batches(conn)[1]
    body = conn.execute("SELECT body FROM chain WHERE seq = ?", (seq,)).fetchone()[0]
    runs = json.loads(body)["records"]
    assert json.loads(body)["v"] == 3
    assert {k for t, k, _f, _d in runs if t == "usage"} == {""}
    table, kind, _first, digests = runs[0]
    flipped = ("B" if digests[0] == "A" else "A") + digests[1:]
    edits = [body.replace(json.dumps(runs[0], separators=(",", ":")) + ",", ""),
             body.replace('["usage","",', '["usage","usage",'),
             body.replace(f'["{table}","{kind}",', f'["{table}","",'),
             body.replace(digests, flipped)]
    for edited in edits:
        assert edited != body
        conn.execute("UPDATE chain SET body = ?, digest = ? WHERE seq = ?",
                     (edited, hashlib.sha256(edited.encode()).hexdigest(), seq))
        assert _problem(_verify(root))[:2] == ("AUDIT_ENTRY_TAMPERED", seq)
        conn.execute("UPDATE chain SET body = ?, digest = '' WHERE seq = ?", (edited, seq))
        assert _problem(_verify(root))[:2] == ("AUDIT_ENTRY_TAMPERED", seq)
    conn.close()


def test_a_consistent_rewrite_of_a_version_3_batch_fails_its_checkpoint(root: Path) -> None:
    """As for version 2: a record dropped from a version 3 batch and every hash after it
    made again; the signed checkpoints say it was rewritten."""
    conn = _raw(root)
    seq, members = _log_batches(conn)[0]
    table, rowid, _kind, _digest = members[0]
    conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608

    def dropped(body: str) -> str:
        parsed = json.loads(body)
        assert parsed["v"] == 3
        run = parsed["records"][0]
        assert (run[0], run[2]) == (table, rowid)
        rest = base64.b64decode(run[3])[32:]  # the first record dropped from its run
        if rest:
            run[2], run[3] = rowid + 1, base64.b64encode(rest).decode()
        else:
            del parsed["records"][0]
        return chain.canonical_bytes(parsed).decode()

    _rehash_from(conn, seq, dropped)
    conn.close()
    assert _problem(_verify(root))[0] == "AUDIT_CHECKPOINT_INVALID"


def test_version_2_and_3_batches_share_one_chain_and_are_counted_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches written before version 3 and after, on one chain: verify, the checkpoints'
    counts taken in SQL (a fresh connection counts the chain again) and the search for a
    record's batch entry in SQL all read both."""
    root = tmp_path / "home"
    for version in (2, 3, 2, 3):
        monkeypatch.setattr(chain, "BATCH_VERSION", version)
        with DataHome(root) as home:  # each time a connection with no counts kept
            for i in range(5):
                home.audit.append("mcp.call", f"v{version}.{i}", outcome="ok")
                home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(1, 1), source="t",
                                        model="m")
            home.db.flush()
            home.seal()
    report = _verify(root)
    assert report.ok, report.as_json()
    assert (report.entries, report.records) == (4, 40)
    assert stored_checkpoints_counts(root)[-1] == {"audit": 20, "usage": 20}
    conn = _raw(root)
    versions = [json.loads(b)["v"] for (b,) in conn.execute(
        "SELECT body FROM chain ORDER BY seq")]
    assert versions == [2, 3, 2, 3]
    for table in ("audit", "usage"):
        for rowid in range(1, 21):
            hit = conn.execute(chain._BATCH_NAMING, (chain.BATCH, table, rowid)).fetchone()
            assert hit is not None
            assert int(hit[0]) == (rowid - 1) // 5 + 1
    assert conn.execute(chain._BATCH_NAMING, (chain.BATCH, "usage", 21)).fetchone() is None
    conn.close()


def test_verify_reads_each_batch_body_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records a batch body names are read for the query of its records and checked
    from that one reading (a body read costs about as much as its records' digests)."""
    conn = _raw(root)
    batches = len(_batches(conn))
    conn.close()
    read = chain.batch_members
    calls: list[object] = []

    def counted(body: object) -> list[tuple[str, int, str, str]]:
        calls.append(body)
        return read(body)

    monkeypatch.setattr(chain, "batch_members", counted)
    assert _verify(root).ok
    assert len(calls) == batches


def stored_checkpoints_counts(root: Path) -> list[dict[str, int] | None]:
    with DataHome(root) as home:
        return [c.counts for c in stored_checkpoints(home.db)]


def test_a_batch_names_only_records(tmp_path: Path) -> None:
    with DataHome(Path(tempfile.mkdtemp(dir=tmp_path)) / "home") as home:
        with pytest.raises(ValueError, match=chain.BATCH):
            home.db.append("INSERT INTO audit (ts, kind, subject, details) VALUES (?,?,?,?)",
                           (1.0, "x", None, "{}"), chain=chain.BATCH)
        with home.db.transaction() as conn, pytest.raises(ValueError, match="not a record"):
            chain.ChainWriter.of(conn).add_batch([("k", "nope", 1, "0" * 64)], 1.0)
    for body in ("{}", '{"records":[["audit","k","1","' + "0" * 64 + '"]],"v":2}', "[]", "x",
                 '{"records":[["nope","k",1,"' + "0" * 64 + '"]],"v":2}',
                 '{"records":[["audit","k",1,"00"]],"v":2}',
                 '{"records":[["audit","k",1,""]],"v":2}', '{"records":[],"v":1}'):
        with pytest.raises(ValueError, match="not a batch entry"):
            chain.batch_members(body)


def test_a_tail_another_process_moved_is_read_again(tmp_path: Path) -> None:
    """Each connection starts its next transaction from the tail its last commit left; when
    another one extended the chain meanwhile, the first entry's seq is taken, so the
    entries are made again after the real tail: one unbroken chain, and checkpoints whose
    counts (kept from the last commit, or counted again) match the chain."""
    root = tmp_path / "home"
    first, second = DataHome(root), DataHome(root)
    try:
        for i in range(3):
            for home in (first, second, first):
                home.audit.append("mcp.call", f"p{i}", outcome="ok")
                home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10, 2),
                                        source="t", model="m")
                home.seal()  # its transaction: the two rows, their entry, a checkpoint
    finally:
        first.close()
        second.close()
    report = _verify(root)
    assert report.ok, report.as_json()
    assert (report.entries, report.records) == (9, 18)
    assert report.checkpoints == 9


def test_a_turn_records_details_are_stored_without_repeats_and_read_back_whole() -> None:
    from deepseek_eyes.store.events import read_details, stored_details

    whole = {"model_calls": 1, "rereads": 0, "tool_calls": [], "evidence": [],
             "omitted_messages": 0, "forced_final": False, "requests": ["a" * 64], "base": 4,
             "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19,
                       "prompt_cache_hit_tokens": 5, "prompt_cache_miss_tokens": 7,
                       "prompt_tokens_details": {"cached_tokens": 5},
                       "completion_tokens_details": {"reasoning_tokens": 3}}}
    stored = stored_details(whole)
    # The five counts every call reports, as their list (store/events.py USAGE_LIST).
    assert stored == {"model_calls": 1, "requests": ["a" * 64], "base": 4,
                      "usage": [12, 7, 3, 5, 7]}
    assert read_details(json.loads(json.dumps(stored))) == whole
    # Keys in the order the usage is answered in (runtime/turn/ledger.py usage_json).
    assert list(read_details(json.loads(json.dumps(stored)))["usage"]) == list(whole["usage"])
    # A usage with more than those (a provider's image tokens) keeps its keys.
    imaged = {**whole, "usage": {**whole["usage"], "completion_tokens_details": {  # type: ignore[dict-item]
        "reasoning_tokens": 3, "image_tokens": 2}}}
    assert isinstance(stored_details(imaged)["usage"], dict)
    assert read_details(json.loads(json.dumps(stored_details(imaged)))) == imaged
    # A list that is not five integers (an edited row) is read as stored.
    assert read_details({"model_calls": 1, "usage": [1, 2]})["usage"] == [1, 2]
    assert read_details({"model_calls": 1, "usage": [1, 2, 3, 4, "5"]})["usage"] == \
        [1, 2, 3, 4, "5"]
    # What is not a default, or not derived, is kept as it is.
    odd = {**whole, "rereads": 2, "forced_final": True, "evidence": [{"sha256": "x"}],
           "usage": {**whole["usage"], "total_tokens": 20,  # type: ignore[dict-item]
                     "prompt_tokens_details": {"cached_tokens": 5, "image_tokens": 9}}}
    assert stored_details(odd) == {k: v for k, v in odd.items()
                                   if k not in ("tool_calls", "omitted_messages")}
    assert read_details(json.loads(json.dumps(stored_details(odd)))) == odd
    # A record that is not a turn of the loop (a recovered one) is read as stored.
    assert read_details({"stage": "recovery", "base": 3}) == {"stage": "recovery", "base": 3}


def test_entry_of_finds_each_records_entry_among_many(tmp_path: Path) -> None:
    """``chain.entry_of`` finds the entry naming each record: a single entry by its ref, a
    batch entry by a binary search over seq (tables written in every transaction and in
    some), and says None for a record no entry names."""
    with DataHome(tmp_path / "home") as home:
        expected: dict[tuple[str, int], int] = {}
        for n in range(40):
            home.audit.append("mcp.call", f"t{n}", outcome="ok")
            if n % 3 == 0:  # usage in some transactions only
                home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(1, 1), source="t",
                                        model="m")
            home.db.flush()
        with home.db.reading() as conn:
            for seq in range(1, 41):
                for table, rowid in named_records(conn, seq):
                    expected[(table, rowid)] = seq
            found = {key: chain.entry_of(conn, *key) for key in expected}
            assert {key: entry[0] for key, entry in found.items() if entry} == expected
            single = found[("audit", 2)]  # n = 1: one record, a single entry
            assert single is not None
            assert single[1] == "mcp.call"
            batch = found[("audit", 4)]  # n = 3: with a usage row, a batch entry
            assert batch is not None
            assert batch[1] == chain.BATCH
            record = chain.read_record(conn, "audit", 4)
            assert record is not None
            assert batch[2] == chain.record_digest(record)
            assert chain.entry_of(conn, "audit", 41) is None
            assert chain.entry_of(conn, "usage", 99) is None
