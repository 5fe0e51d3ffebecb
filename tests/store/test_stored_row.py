"""The chain's computed record bytes equal the stored row's, for every chained table.

A chained write no longer reads its row back: it computes what SQLite stored from the bound
values and the declared column types (``store/stored.py``). If that computation were wrong
for some value, the entry's digest would not match the row and ``audit verify`` would
report a tampered record that nobody touched. So every chained table, every column and
every affinity gets generated values of every type ``sqlite3`` binds (None, bool, int,
float with its edge cases, str with numeric-looking text, bytes), inserted for real; the
computed bytes (when the encoder answers) must equal the canonical bytes of the row read
back, and the computed row must equal the row read back, type for type.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepseek_eyes.store import chain, stored
from deepseek_eyes.store.db import MIGRATIONS

TABLES = sorted(chain.CHAINED_TABLES)


def _schema() -> chain.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, factory=chain.Connection)
    for script in MIGRATIONS:
        conn.executescript(script)
    return conn


CONN = _schema()
SHAPES = {t: stored.table_shape(CONN, t) for t in TABLES}

numbers_as_text = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from([" 12 ", "0x1A", "1e3", "-0", "+5", "3.0", ".5", "5.", "1_000", "", "١٢"]),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**62, 2**63 - 1, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, -3.0, 2.0**52, 2.0**53, 2.0**62, 2.0**63, -(2.0**63),
                     1e300, 5e-324, 0.1, math.nan, math.inf, -math.inf]),
    st.text(max_size=40),
    numbers_as_text,
    st.binary(max_size=24),
)


def _read_back(table: str, rowid: int) -> dict[str, Any]:
    cur = CONN.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,))  # noqa: S608
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def _canonical(table: str, row: dict[str, Any]) -> bytes | None:
    try:
        return chain.canonical_bytes(chain.project_row(table, row))
    except (TypeError, ValueError):  # bytes or a non-finite float in a plain column
        return None


def _check(table: str, columns: list[str], params: list[Any]) -> bool:
    """Insert and compare; True when the computed path answered (not the read-back)."""
    sql = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES "  # noqa: S608
           f"({', '.join('?' * len(columns))})")
    insert = stored.parse_insert(sql)
    assert insert is not None
    CONN.execute("SAVEPOINT t")
    try:
        try:
            cur = CONN.execute(sql, params)
        except (sqlite3.IntegrityError, OverflowError):
            return False  # NOT NULL or a duplicate key: nothing stored, nothing to chain
        rowid = int(cur.lastrowid or 0)
        back = _read_back(table, rowid)
        computed = stored.stored_row(SHAPES[table], insert, params, rowid)
        if computed is not None:
            assert computed == back or _same_with_nan(computed, back), (params, computed, back)
            assert [type(computed[k]) for k in back] == [type(v) for v in back.values()]
        encoder = stored.RowEncoder(SHAPES[table], insert, chain.CHAINED_TABLES[table])
        data = encoder.encode(params, rowid)
        if data is not None:
            assert data == _canonical(table, back), (params, back)
        # What a chained write uses: the same bytes' SHA-256, or None with them.
        digest = encoder.digest(params, rowid)
        assert digest == (None if data is None else hashlib.sha256(data).hexdigest())
        # Its bytes, as a batch entry stores them (the fast path's and the general one's).
        raw = encoder.digest_raw(params, rowid)
        assert raw == (None if data is None else hashlib.sha256(data).digest())
        fast = encoder.fast_raw(params, rowid) if encoder.fast_raw is not None \
            and len(params) == encoder.width else None
        assert fast is None or fast == raw
        return data is not None
    finally:
        CONN.execute("ROLLBACK TO t")
        CONN.execute("RELEASE t")


def _same_with_nan(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(x == y or (isinstance(x, float) and isinstance(y, float) and x != x and y != y)
               for x, y in zip(a.values(), b.values(), strict=True))


@pytest.mark.parametrize("table", TABLES)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_computed_record_bytes_equal_the_stored_row(table: str, data: st.DataObject) -> None:
    shape = SHAPES[table]
    insertable = [c.name for c in shape.columns if not c.rowid]
    columns = data.draw(st.lists(st.sampled_from(insertable), min_size=1, unique=True)
                        | st.just(insertable))
    params = [data.draw(values, label=c) for c in columns]
    _check(table, columns, params)


@pytest.mark.parametrize("table", TABLES)
def test_values_stored_as_bound_are_computed_not_read_back(table: str) -> None:
    """The common case must take the computed path, or the test above proves nothing."""
    shape = SHAPES[table]
    typical = {stored.TEXT: "x-1", stored.INTEGER: 7, stored.REAL: 1.5}
    columns = [c.name for c in shape.columns if not c.rowid]
    params = [typical[c.affinity] for c in shape.columns if not c.rowid]
    assert _check(table, columns, params)


def test_affinity_follows_sqlite_rules() -> None:
    assert [stored.affinity_of(t) for t in
            ("INTEGER", "BIGINT", "VARCHAR(10)", "TEXT", "CLOB", "BLOB", "", "REAL",
             "DOUBLE", "FLOAT", "NUMERIC", "DECIMAL(10,5)", "BOOLEAN", "DATE")] == [
        "INTEGER", "INTEGER", "TEXT", "TEXT", "TEXT", "BLOB", "BLOB", "REAL", "REAL",
        "REAL", "NUMERIC", "NUMERIC", "NUMERIC", "NUMERIC"]


@given(value=values, declared=st.sampled_from(["", "NUMERIC", "BLOB", "DECIMAL"]))
@settings(max_examples=300, deadline=None)
def test_other_affinities_match_sqlite(value: Any, declared: str) -> None:
    """The affinities no chained table uses yet (NUMERIC, BLOB), against SQLite itself."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE t (v {declared})")
    try:
        conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
    except OverflowError:
        return
    (back,) = conn.execute("SELECT v FROM t").fetchone()
    shape = stored.table_shape(conn, "t")
    insert = stored.parse_insert("INSERT INTO t (v) VALUES (?)")
    assert insert is not None
    computed = stored.stored_row(shape, insert, [value], 1)
    if computed is not None:
        got = computed["v"]
        assert type(got) is type(back)
        assert got == back or (got != got and back != back)


def test_inserts_it_cannot_parse_are_read_back() -> None:
    assert stored.parse_insert("INSERT OR REPLACE INTO audit (ts) VALUES (?)") is None
    assert stored.parse_insert("INSERT INTO audit (ts, kind) VALUES (?, 'x')") is None
    assert stored.parse_insert("INSERT INTO audit SELECT * FROM audit") is None
    assert stored.parse_insert("INSERT INTO audit (ts, ts) VALUES (?, ?)") is None
    parsed = stored.parse_insert("insert or ignore into sessions (id, created_at) values (?,?)")
    assert parsed == stored.Insert("sessions", ("id", "created_at"))


records = st.dictionaries(
    st.text(max_size=12),
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
              st.binary(max_size=8)),
    max_size=8)


@given(record=records)
@settings(max_examples=500, deadline=None)
def test_record_digest_is_the_sha256_of_the_canonical_bytes(record: dict[str, Any]) -> None:
    """verify's fast record digest against the encoder, key order and values of every kind
    (those JSON refuses are refused the same way)."""
    try:
        expected = hashlib.sha256(chain.canonical_bytes(record)).hexdigest()
    except (TypeError, ValueError) as refused:
        with pytest.raises(type(refused)):
            chain.record_digest(record)
        return
    assert chain.record_digest(record) == expected
    assert chain.record_digest(dict(reversed(list(record.items())))) == expected
