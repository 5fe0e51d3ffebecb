"""Red team: tampering with the audit chain, as someone who can write the database file,
the keyring file or an export, but does not hold the audit key (unless stated).

One data home is built through the real stores (evidence, attempts with a real trim,
audit rows, usage, sessions, a key rotation, several seals) and copied for each example;
the attacker works on the copy with raw SQL, dropping the append-only triggers first.
Every attack must be refused with its code, and the untouched copy must verify, so each
test can fail. ``verify_path`` is what ``audit verify`` runs (read-only open, read-only
keyring).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepseek_eyes.audit.checkpoints import Checkpoint, sign_checkpoint, stored_checkpoints
from deepseek_eyes.audit.export import export_chain
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.verify import Report, verify_file, verify_path
from deepseek_eyes.home import DataHome
from deepseek_eyes.store import chain
from deepseek_eyes.store.db import Database
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
from helpers import clone_store, fresh_database, named_records, raw_store, rewritten_body

TRIGGERS = ("chain_no_update", "chain_no_delete", "evidence_no_update", "events_no_update",
            "events_no_delete")
EXAMPLES = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(frozen=True)
class Template:
    root: Path
    pin: Checkpoint  # the newest checkpoint, as an operator would have pinned it
    retention_seq: int
    database: str | None = None  # its PostgreSQL database (tests on PostgreSQL)


def _build(root: Path) -> Template:
    home = DataHome(root)
    cache = EvidenceCache(home.db)
    attempts = AttemptLog(home.db, max_rows=2)
    sessions = SessionStore(home.db)
    for i in range(4):
        sha = f"{i:064x}"
        cache.remember_image(ImageMeta(sha, sha, 10 + i, 10, "image/png", 100 + i))
        op = attempts.operation("see")
        op.record("cache", "miss", image_sha256=sha)
        op.record("route", "ok", route="local", latency_ms=3.5)
        cache.put(EvidenceRecord.build(EvidenceKey(sha, "local", Variant.EVIDENCE, None, "fp"),
                                       image_sha256=sha, model="m",
                                       evidence={"text": f"secret {i}"}, created_at=1.0 + i))
        home.audit.append("mcp.call", f"srv.tool{i}", outcome="ok", ms=i)
        home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10, 2), source="t",
                                model="m")
        sessions.append(f"s{i}", [{"role": "user", "content": f"hello {i}"}], create="test",
                        turn=TurnRecord(id=f"turn-{i}", session_id=f"s{i}", started_at=1.0,
                                        ended_at=2.0, model="m", path="text", outcome="ok",
                                        code=None, details={}))
        if i == 1:
            attempts.trim()  # the legitimate cut: a retention entry and its checkpoint
        if i == 2:
            home.audit.append("audit.key_rotated", home.audit_keys().rotate())
        home.seal()
    retention = home.db.query_one("SELECT seq FROM chain WHERE kind = 'retention'")
    assert retention is not None
    pin = stored_checkpoints(home.db)[-1]
    home.close()
    return Template(root, pin, int(retention["seq"]))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    with fresh_database() as database:
        built = _build(tmp_path_factory.mktemp("template") / "home")
    return dataclasses.replace(built, database=database)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("copies")


def _copy(template: Template, scratch: Path) -> Path:
    root = Path(tempfile.mkdtemp(dir=scratch)) / "home"
    shutil.copytree(template.root, root)
    clone_store(template.database)
    return root


def _raw(root: Path) -> sqlite3.Connection:
    return raw_store(root / "eyes.db", tamper=True)


def _verify(root: Path, pinned: Checkpoint | None = None) -> Report:
    return verify_path(root / "eyes.db", AuditKeyring.read_only(audit_directory(root)),
                       pinned=pinned)


def _code(report: Report) -> str | None:
    return None if report.problem is None else report.problem.code


def _entries(conn: sqlite3.Connection) -> list[tuple[int, str | None, int | None]]:
    return [(int(r[0]), r[1], r[2]) for r in
            conn.execute("SELECT seq, ref_table, ref_id FROM chain ORDER BY seq")]


def test_the_untampered_copy_and_its_export_verify(template: Template, scratch: Path) -> None:
    root = _copy(template, scratch)
    report = _verify(root, template.pin)
    assert report.ok, report.as_json()
    assert report.retained == 2  # the legitimate trim
    assert report.checkpoints == 4  # seals of rounds 0, 2, 3 and the trim's (round 1 sealed by it)
    out = root.parent / "audit.jsonl"
    with DataHome(root) as home:
        export_chain(home.db, out, home.audit_keys())
    keyring = AuditKeyring.read_only(audit_directory(root))
    assert verify_file(out, keyring, pinned=template.pin).ok


# -- delete records under a forged retention entry -----------------------------------------

_DELETABLE = ("images", "evidence", "attempts", "audit", "usage", "sessions", "events",
              "turns")


@EXAMPLES
@given(table=st.sampled_from(_DELETABLE), data=st.data(), through=st.booleans(),
       forge_checkpoint=st.booleans(), pinned=st.booleans())
def test_deletions_under_a_forged_retention_entry_are_missing_records(
    template: Template, scratch: Path, table: str, data: st.DataObject, through: bool,
    forge_checkpoint: bool, pinned: bool,
) -> None:
    root = _copy(template, scratch)
    conn = _raw(root)
    rowids = [int(r[0]) for r in conn.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]  # noqa: S608
    chosen = sorted(data.draw(st.lists(st.sampled_from(rowids), min_size=1, unique=True)))
    if through:  # "everything up to" covers the rows in between too: delete them all
        chosen = [r for r in rowids if r <= chosen[-1]]
    body = ({"table": table, "through_rowid": chosen[-1], "reason": "max_rows"} if through
            else {"table": table, "rowids": chosen, "reason": "quarantined"})
    conn.execute("BEGIN IMMEDIATE")
    chain.ChainWriter(conn).add_body("retention", body, time.time())  # a well-hashed entry
    for rowid in chosen:  # one by one: the same SQL on both engines
        conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    if forge_checkpoint:  # a checkpoint row naming the forged entry, without the key
        tip = conn.execute("SELECT seq, hash FROM chain ORDER BY seq DESC LIMIT 1").fetchone()
        conn.execute("INSERT INTO chain_checkpoints (seq, hash, ts, key_id, mac, counts,"
                     " ordinal) SELECT ?, ?, ts, key_id, mac, counts, ordinal + 1 FROM"
                     " chain_checkpoints ORDER BY id DESC LIMIT 1", tip)
    conn.execute("COMMIT")
    first = min(seq for seq, _t, _r in _entries(conn)  # the first entry naming one
                if any(t == table and r in chosen for t, r in named_records(conn, seq)))
    conn.close()
    report = _verify(root, template.pin if pinned else None)
    if forge_checkpoint:
        assert _code(report) == "AUDIT_CHECKPOINT_INVALID", report.as_json()
    else:
        assert report.problem is not None, report.as_json()
        assert (report.problem.code, report.problem.seq) == ("AUDIT_RECORD_MISSING", first)


# -- checkpoints removed -------------------------------------------------------------------

@EXAMPLES
@given(data=st.data())
def test_removed_checkpoints_are_found(
    template: Template, scratch: Path, data: st.DataObject
) -> None:
    root = _copy(template, scratch)
    conn = _raw(root)
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM chain_checkpoints ORDER BY id")]
    removed = set(data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True)))
    kept = [i for i in ids if i not in removed]
    # A removed checkpoint with a kept one after it, or none kept at all; removing only the
    # newest ones is indistinguishable from not having sealed yet (see the next test).
    if kept and all(i > max(kept) for i in removed):
        removed.add(kept.pop(0))
    for checkpoint_id in sorted(removed):
        conn.execute("DELETE FROM chain_checkpoints WHERE id = ?", (checkpoint_id,))
    conn.close()
    assert _code(_verify(root)) == "AUDIT_CHECKPOINT_MISSING"
    assert _code(_verify(root, template.pin)) == "AUDIT_CHECKPOINT_MISSING"


def test_removing_only_the_newest_checkpoints_changes_nothing_a_pin_vouches_for(
    template: Template, scratch: Path
) -> None:
    """The limit, pinned down: the entries are intact, so this passes; what it enables (a
    rewrite of the now unsealed tail) is refused against a pin in the rewrite test."""
    root = _copy(template, scratch)
    conn = _raw(root)
    conn.execute("DELETE FROM chain_checkpoints WHERE id = (SELECT MAX(id) FROM"
                 " chain_checkpoints)")
    conn.close()
    report = _verify(root, template.pin)
    assert report.ok, report.as_json()
    assert report.unsigned > 0


# -- the keyring removed or replaced ------------------------------------------------------

def _tree_state(directory: Path) -> dict[str, tuple[int, str]]:
    return {str(p.relative_to(directory)): (p.stat().st_mtime_ns,
                                            hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(directory.rglob("*")) if p.is_file()}


@EXAMPLES
@given(action=st.sampled_from(["delete_file", "delete_directory", "fresh_key",
                               "older_ring", "fresh_key_kept_old"]),
       pinned=st.booleans())
def test_a_removed_or_replaced_keyring_is_refused_and_never_recreated(
    template: Template, scratch: Path, action: str, pinned: bool
) -> None:
    root = _copy(template, scratch)
    directory = audit_directory(root)
    ring = AuditKeyring.read_only(directory)
    assert ring is not None
    if action == "delete_file":
        (directory / "keyring.json").unlink()
    elif action == "delete_directory":
        shutil.rmtree(directory)
    else:
        keys = {"fresh_key": [secrets.token_bytes(32)],
                "older_ring": ring.keys[1:],  # the ring as it was before the rotation
                "fresh_key_kept_old": [secrets.token_bytes(32), ring.keys[1]]}[action]
        AuditKeyring(keys, directory / "keyring.json").save()
    before = _tree_state(root)
    report = _verify(root, template.pin if pinned else None)
    expected = "AUDIT_KEY_MISSING" if action.startswith("delete") else "AUDIT_KEY_REPLACED"
    assert _code(report) == expected, report.as_json()
    assert _tree_state(root) == before  # no key made, nothing written
    assert directory.exists() == (action != "delete_directory")


def test_a_writer_of_both_database_and_keyring_is_caught_only_by_a_pin(
    template: Template, scratch: Path
) -> None:
    """Replace the key, drop every checkpoint, sign new ones: the data home alone cannot
    tell (docs/audit.md says so); the pin, signed with the real key, can."""
    root = _copy(template, scratch)
    conn = _raw(root)
    conn.execute("DELETE FROM chain_checkpoints")
    conn.execute("UPDATE audit SET subject = 'forged' WHERE rowid = 1")
    prev = chain.GENESIS
    for seq, ts, kind, table, rowid, body, digest in conn.execute(
            "SELECT seq, ts, kind, ref_table, ref_id, body, digest FROM chain ORDER BY seq"
    ).fetchall():
        record = chain.read_record(conn, table, rowid) if table else None
        body = rewritten_body(conn, kind, body)  # a batch's record digests too
        digest = (chain.record_digest(record) if record is not None else
                  hashlib.sha256(body.encode()).hexdigest() if table is None else digest)
        value = chain.entry_hash(seq, ts, kind, chain.ref_text(table, rowid), digest, prev)
        conn.execute("UPDATE chain SET body = ?, digest = ?, prev = ?, hash = ? WHERE seq = ?",
                     (body, digest, prev, value, seq))
        prev = value
    conn.close()
    forged = AuditKeyring([secrets.token_bytes(32)], audit_directory(root) / "keyring.json")
    forged.save()
    db = Database(root / "eyes.db")
    sign_checkpoint(db, forged)
    db.close()
    assert _verify(root).ok  # what only the key holder can do, and no one can see alone
    assert _code(_verify(root, template.pin)) == "AUDIT_KEY_REPLACED"


# -- a consistent rewrite of the tail -----------------------------------------------------

def _rewrite_from(conn: sqlite3.Connection, k: int) -> None:
    """Recompute every digest and hash from entry ``k`` on, as an attacker without the key
    can; a gone record keeps the digest its entry had."""
    prev = chain.GENESIS if k == 1 else conn.execute(
        "SELECT hash FROM chain WHERE seq = ?", (k - 1,)).fetchone()[0]
    for seq, ts, kind, table, rowid, body, digest in conn.execute(
            "SELECT seq, ts, kind, ref_table, ref_id, body, digest FROM chain WHERE seq >= ?"
            " ORDER BY seq", (k,)).fetchall():
        if table is None:
            body = rewritten_body(conn, kind, body)  # a batch's record digests too
            digest = hashlib.sha256(body.encode()).hexdigest()
        else:
            record = chain.read_record(conn, table, rowid)
            digest = chain.record_digest(record) if record is not None else digest
        value = chain.entry_hash(seq, ts, kind, chain.ref_text(table, rowid), digest, prev)
        conn.execute("UPDATE chain SET body = ?, digest = ?, prev = ?, hash = ? WHERE seq = ?",
                     (body, digest, prev, value, seq))
        prev = value


@EXAMPLES
@given(data=st.data(), drop=st.booleans(), hide=st.booleans())
def test_a_consistent_rewrite_of_the_tail_is_refused_against_a_pin(
    template: Template, scratch: Path, data: st.DataObject, drop: bool, hide: bool
) -> None:
    root = _copy(template, scratch)
    conn = _raw(root)
    entries = _entries(conn)
    head = entries[-1][0]
    k = data.draw(st.integers(min_value=1, max_value=head), label="k")
    # Entries naming records, with the records they name (a batch entry names its
    # transaction's records: they go with it).
    rows = [(seq, named) for seq, _t, _r in entries if seq >= k
            and (named := named_records(conn, seq))
            and all(chain.read_record(conn, t, r) is not None for t, r in named)]
    if drop and rows:  # remove one entry with its records, renumbering what follows
        seq, named = data.draw(st.sampled_from(rows), label="dropped")
        changed = seq
        for table, rowid in named:
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
        conn.execute("DELETE FROM chain WHERE seq = ?", (seq,))
        conn.execute("UPDATE chain SET seq = -(seq - 1) WHERE seq > ?", (seq,))
        conn.execute("UPDATE chain SET seq = -seq WHERE seq < 0")
    else:  # change when entry e happened
        drop = False
        changed = data.draw(st.integers(min_value=k, max_value=head), label="edited")
        conn.execute("UPDATE chain SET ts = ts + 1.0 WHERE seq = ?", (changed,))
    _rewrite_from(conn, k)
    if hide:  # the checkpoints that would notice go too
        conn.execute("DELETE FROM chain_checkpoints WHERE seq >= ?", (k,))
    checkpoints = [(int(r[0])) for r in conn.execute(
        "SELECT seq FROM chain_checkpoints ORDER BY id")]
    conn.close()
    if not checkpoints:
        expected = {"AUDIT_CHECKPOINT_MISSING"}
    elif hide:  # the stored ones agree; only the pin (at the old head) can tell
        expected = {"AUDIT_CHAIN_BROKEN"} if drop else {"AUDIT_CHECKPOINT_INVALID"}
    else:  # the first stored checkpoint at or after the change no longer matches
        first = min(s for s in checkpoints if s >= changed)
        expected = ({"AUDIT_CHAIN_BROKEN"} if drop and first == head
                    else {"AUDIT_CHECKPOINT_INVALID"})
    report = _verify(root, template.pin)
    assert _code(report) in expected, (k, drop, hide, report.as_json())
    if not hide:
        assert _code(_verify(root)) in expected | {"AUDIT_CHAIN_BROKEN"}


# -- an export whose header lies ---------------------------------------------------------

@pytest.fixture(scope="module")
def export_lines(template: Template, scratch: Path) -> list[str]:
    root = _copy(template, scratch)
    out = root.parent / "audit.jsonl"
    with DataHome(root) as home:
        export_chain(home.db, out, home.audit_keys())
    return out.read_text(encoding="utf-8").splitlines(keepends=True)


@EXAMPLES
@given(lie=st.sampled_from(["entries", "head_seq", "head_hash", "checkpoints",
                            "cut_tail", "header_only", "consistent_cut",
                            "last_checkpoint_line"]),
       number=st.integers(min_value=1, max_value=40), data=st.data())
def test_an_export_whose_header_does_not_match_its_lines_is_refused(
    template: Template, scratch: Path, export_lines: list[str], lie: str, number: int,
    data: st.DataObject,
) -> None:
    header = json.loads(export_lines[0])
    entries = [line for line in export_lines if '"type":"entry"' in line]
    checkpoints = [line for line in export_lines if '"type":"checkpoint"' in line]
    assert header["entries"] == len(entries)
    assert header["checkpoints"] == len(checkpoints)
    body = [*entries, *checkpoints]
    cut = 1 + number % (len(entries) - template.retention_seq)  # the retention cut stays
    if lie == "entries":
        header["entries"] = data.draw(st.integers(0, 10**6).filter(lambda n: n != len(entries)))
    elif lie == "head_seq":
        header["head"]["seq"] += number
    elif lie == "head_hash":
        header["head"]["hash"] = hashlib.sha256(str(number).encode()).hexdigest()
    elif lie == "checkpoints":
        header["checkpoints"] = data.draw(
            st.integers(0, 100).filter(lambda n: n != len(checkpoints)))
    elif lie == "cut_tail":  # the newest entries dropped, the header kept
        body = [*entries[:-cut], *checkpoints]
    elif lie == "header_only":  # the attack that got through: a header claiming entries
        header["entries"] = number
        body = []
    elif lie == "consistent_cut":  # the header rewritten to match a cut: its MAC breaks
        kept = entries[:-cut]
        last = json.loads(kept[-1])
        kept_checkpoints = [c for c in checkpoints if json.loads(c)["seq"] <= last["seq"]]
        header.update(entries=len(kept), head={"seq": last["seq"], "hash": last["hash"]},
                      checkpoints=len(kept_checkpoints))
        body = [*kept, *kept_checkpoints]
    elif lie == "last_checkpoint_line":
        body = [*entries, *checkpoints[:-1]]
    path = Path(tempfile.mkdtemp(dir=scratch)) / "lying.jsonl"
    path.write_text(json.dumps(header) + "\n" + "".join(body), encoding="utf-8")
    keyring = AuditKeyring.read_only(audit_directory(template.root))
    report = verify_file(path, keyring)
    assert _code(report) == "AUDIT_EXPORT_MISMATCH", (lie, report.as_json())
    assert report.problem is not None
    assert "header" in report.problem.reason


# -- verify writes nothing ---------------------------------------------------------------

def test_verify_writes_nothing_to_a_read_only_data_directory(
    template: Template, scratch: Path
) -> None:
    """Tests run as root, which ignores file modes, so the chmod alone proves nothing here:
    what is checked is that no file under the data home changed (bytes and mtime) and none
    appeared, which holds for any user. As a non-root user the chmod makes it a real
    read-only directory too (SQLite's ``mode=ro`` alone fails there, ``immutable`` does not)."""
    root = _copy(template, scratch)
    before = _tree_state(root)
    listing = sorted(p.name for p in root.rglob("*"))
    for path in [root, *root.rglob("*")]:
        path.chmod(0o500 if path.is_dir() else 0o400)
    try:
        report = _verify(root, template.pin)
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root), "PYTHONPATH": str(SRC)}
        done = subprocess.run(
            [sys.executable, "-m", "deepseek_eyes", "audit", "verify", "--json"],
            env=env, capture_output=True, text=True, timeout=120, check=False)
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(0o700 if path.is_dir() else 0o600)
    assert report.ok, report.as_json()
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert sorted(p.name for p in root.rglob("*")) == listing
    assert _tree_state(root) == before


@pytest.mark.sqlite_only
def test_verify_reads_a_live_wal_and_notices_a_writer_behind_an_immutable_read(
    template: Template, scratch: Path
) -> None:
    root = _copy(template, scratch)
    reader = Database.open_read_only(root / "eyes.db")  # no WAL yet: immutable
    home = DataHome(root)
    home.audit.append("mcp.call", "while verifying", outcome="ok")
    home.seal()
    wal = root / "eyes.db-wal"
    assert wal.exists()
    db_state, wal_state = _tree_state(root)["eyes.db"], _tree_state(root)["eyes.db-wal"]
    live = _verify(root)  # a WAL is there: mode=ro reads it
    assert live.ok, live.as_json()
    assert live.entries == template.pin.seq + 1
    state = _tree_state(root)
    assert (state["eyes.db"], state["eyes.db-wal"]) == (db_state, wal_state)
    home.close()  # the last writer checkpoints into the file the immutable reader opened
    assert reader.changed_since_open()
    reader.close()


# -- the legitimate path ------------------------------------------------------------------

def test_a_runtime_trim_signs_the_checkpoint_naming_its_cut(tmp_path: Path) -> None:
    home = DataHome(tmp_path / "home")
    log = AttemptLog(home.db, max_rows=3)
    for _ in range(8):
        log.operation("see").record("cache", "miss")
    log.trim()
    cut = home.db.query_one("SELECT seq, body FROM chain WHERE kind = 'retention'")
    assert cut is not None
    newest = stored_checkpoints(home.db)[-1]
    assert newest.seq == cut["seq"]  # the checkpoint's hash is the cut entry's own
    assert newest.counts == {"attempts": 8, "body": 1}
    assert log.count() == 3
    home.close()
    report = _verify(tmp_path / "home")
    assert report.ok, report.as_json()
    assert report.retained == 5
    # Without the key (a database outside a data home) nothing is cut.
    with fresh_database():
        bare = Database(tmp_path / "bare.db")
    bare_log = AttemptLog(bare, max_rows=3)
    for _ in range(8):
        bare_log.operation("see").record("cache", "miss")
    bare_log.trim()
    assert bare_log.count() == 8
    bare.close()


def test_old_checkpoints_without_counts_keep_verifying(template: Template, scratch: Path) -> None:
    """A version 1 checkpoint (what was signed before counts) next to newer ones."""
    root = _copy(template, scratch)
    keyring = AuditKeyring.read_only(audit_directory(root))
    assert keyring is not None
    conn = _raw(root)
    seq, value = conn.execute("SELECT seq, hash FROM chain WHERE seq = 3").fetchone()
    kid, mac = keyring.sign(Checkpoint.signed_bytes(seq, value, 1.0))
    conn.execute("UPDATE chain_checkpoints SET seq = ?, hash = ?, ts = 1.0, key_id = ?,"
                 " mac = ?, counts = NULL, ordinal = NULL WHERE id = 1", (seq, value, kid, mac))
    conn.close()
    assert _verify(root, Checkpoint(seq, value, 1.0, kid, mac)).ok
    assert Checkpoint.parse(Checkpoint(seq, value, 1.0, kid, mac).token()).version == 1


# -- the command line: exit 1 and the code ------------------------------------------------

def test_the_cli_exits_1_with_each_code(template: Template, scratch: Path) -> None:
    def cli(root: Path, *args: str) -> tuple[int, str | None]:
        env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root), "PYTHONPATH": str(SRC)}
        done = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "deepseek_eyes", "audit", "verify", "--json", *args],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        problem = json.loads(done.stdout)["problem"]
        return done.returncode, None if problem is None else problem["code"]

    intact = _copy(template, scratch)
    assert cli(intact, "--checkpoint", template.pin.token()) == (0, None)
    no_key = _copy(template, scratch)
    (audit_directory(no_key) / "keyring.json").unlink()
    assert cli(no_key) == (1, "AUDIT_KEY_MISSING")
    assert not (audit_directory(no_key) / "keyring.json").exists()
    no_checkpoints = _copy(template, scratch)
    conn = _raw(no_checkpoints)
    conn.execute("DELETE FROM chain_checkpoints")
    conn.close()
    assert cli(no_checkpoints) == (1, "AUDIT_CHECKPOINT_MISSING")
    lying = scratch / "header-only.jsonl"
    header = json.loads(_export_header(template, scratch))
    header["entries"] = 15
    lying.write_text(json.dumps(header) + "\n")
    assert cli(intact, "--file", str(lying)) == (1, "AUDIT_EXPORT_MISMATCH")


def _export_header(template: Template, scratch: Path) -> str:
    root = _copy(template, scratch)
    out = root.parent / "audit.jsonl"
    with DataHome(root) as home:
        export_chain(home.db, out, home.audit_keys())
    return out.read_text(encoding="utf-8").splitlines()[0]
