"""The store's statements on PostgreSQL's wire: a pipeline driven straight over libpq.

psycopg's cursor layer spends about 40 µs of Python on each statement (a cursor, its
adapters map, the query's conversion, generators and a poll per send: ``bench/store_pg.py``
measured the store's turn at 2.3 ms more gateway CPU on PostgreSQL than on SQLite, most of
it there). The store sends some thirty small statements a turn, pipelined inside a
transaction (store/postgres.py), and reads a few rows back; this module sends them through
psycopg's own libpq binding (``psycopg.pq``) with what psycopg would do, minus the objects
per statement:

* a query's ``%s``/``%(name)s`` placeholders become ``$n`` once per text (cached);
* parameters are dumped, and rows loaded, by one psycopg ``Transformer`` per connection (so
  the connection's registered adapters apply, as with ``conn.execute``);
* a statement used a second time on a connection is prepared there (a name per text and
  parameter types, as psycopg's prepared statements), in the same round trip as its run;
* results are read without blocking the interpreter: libpq is asked for a result only
  when it has one, and waits happen in ``poll`` (a cut-off round trip closes its
  connection rather than lend it with replies unread).

A :class:`Pipeline` is one connection in pipeline mode: :meth:`~Pipeline.send` queues a
statement and returns its :class:`Slot`, :meth:`~Pipeline.sync` makes the round trip and
fills every slot queued before it. The first failed statement's error (a psycopg error of
its SQLSTATE, built from the server's result as psycopg builds it) is raised by that sync;
the statements after it in the same trip did not run (their slots stay empty).
"""

from __future__ import annotations

import contextlib
import re
import select
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Pipeline", "Slot", "run"]

#: Uses of one statement (text and parameter types) on a connection before it is prepared.
PREPARE_AT = 2
#: Prepared statements kept per connection (the store's statements are fixed strings).
PREPARED_MAX = 512

_PLACEHOLDER = re.compile(rb"%%|%s|%\((\w+)\)s")
_PREPARABLE = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)


class _Wire:
    """A text's wire form, worked out once per text (see _compile): the query with $n
    placeholders, the parameter names in their order (None for positional %s), how many
    parameters it takes, their formats for psycopg's dumper (all AUTO), and whether it
    may be prepared."""

    __slots__ = ("count", "formats", "names", "preparable", "query")

    def __init__(self, query: bytes, names: tuple[str, ...] | None, count: int,
                 preparable: bool) -> None:
        self.query, self.names, self.count, self.preparable = query, names, count, preparable
        self.formats: list[Any] = [_psycopg().auto] * count


_COMPILED: dict[str, _Wire] = {}


def _compile(text: str) -> _Wire:
    known = _COMPILED.get(text)
    if known is not None:
        return known
    names: list[str] = []
    count = 0

    def place(match: re.Match[bytes]) -> bytes:
        nonlocal count
        if match.group(0) == b"%%":
            return b"%"
        name = match.group(1)
        if name is None:
            count += 1
            return b"$%d" % count
        key = name.decode()
        if key not in names:
            names.append(key)
        return b"$%d" % (names.index(key) + 1)

    query = _PLACEHOLDER.sub(place, text.encode())
    if names and count:
        raise ValueError(f"mixed placeholders in {text[:80]!r}")
    result = _Wire(query, tuple(names) if names else None, len(names) or count,
                   bool(_PREPARABLE.match(text)))
    if len(_COMPILED) < 4096:
        _COMPILED[text] = result
    return result


class _Psycopg:
    """The psycopg constants a statement uses, loaded once (psycopg is imported only when
    PostgreSQL is used), so sending one does not import them again."""

    def __init__(self) -> None:
        from psycopg import pq
        from psycopg.adapt import PyFormat

        self.auto = PyFormat.AUTO
        self.text = pq.Format.TEXT


_LOADED: list[_Psycopg] = []


def _psycopg() -> _Psycopg:
    if not _LOADED:
        _LOADED.append(_Psycopg())
    return _LOADED[0]


class _State:
    """What one psycopg connection keeps across pipelines: its transformer, its prepared
    statements (``key -> name``) and how often each unprepared one was used."""

    __slots__ = ("prepared", "transformer", "uses")

    def __init__(self, conn: Any) -> None:
        from psycopg.adapt import Transformer

        self.transformer = Transformer(conn)
        self.prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        self.uses: dict[tuple[bytes, tuple[int, ...]], int] = {}


_STATES: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()


def _state(conn: Any) -> _State:
    state = _STATES.get(conn)
    if state is None:
        state = _STATES[conn] = _State(conn)
    return state


class Slot:
    """One statement's outcome: its result (``None`` until its round trip, and after it
    when the statement did not run) and how to read it."""

    __slots__ = ("error", "result", "transformer")

    def __init__(self, transformer: Any) -> None:
        self.result: Any = None
        #: The statement's own failure (psycopg's error), once its round trip is made.
        self.error: Exception | None = None
        self.transformer = transformer

    def last_key(self) -> tuple[int, int | None]:
        """An INSERT's row count and the integer key its ``RETURNING`` gave last (None:
        no row inserted)."""
        res = self.result
        count = res.command_tuples
        rows = res.ntuples if res.nfields else 0
        value = res.get_value(rows - 1, 0) if rows else None
        return (-1 if count is None else count), (None if value is None else int(value))

    def rows(self) -> tuple[list[str] | None, list[tuple[Any, ...]], int]:
        """Column names (None for a statement that returns no rows), rows, row count."""
        res = self.result
        count = res.command_tuples
        rowcount = -1 if count is None else count
        if not res.nfields:
            return None, [], rowcount
        names = [res.fname(i).decode() for i in range(res.nfields)]
        transformer = self.transformer
        transformer.set_pgresult(res)
        rows = transformer.load_rows(0, res.ntuples, tuple) if res.ntuples else []
        return names, rows, rowcount


class Pipeline:
    """One psycopg connection in pipeline mode, until :meth:`close` (see the module
    docstring). Not thread-safe: the store calls it under its connection's lock."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.state = _state(conn)
        self.transformer = self.state.transformer
        #: What each result still expected belongs to, in order: a slot, or a name being
        #: prepared (bytes, with its key), or None.
        self._expected: list[Any] = []
        self._poller: Any = None
        self._polled = 0
        self._polled_fd: int | None = None
        #: A round trip was cut off mid-way: the connection is closed when left (_leave).
        self._broken = False
        self._text = _psycopg().text
        self.pgconn.enter_pipeline_mode()

    # -- sending -------------------------------------------------------------------------

    def send(self, text: str, params: Sequence[Any] | Mapping[str, Any] | None) -> Slot:
        """Queue ``text`` (psycopg's placeholders) with ``params`` (None: the text as it
        is, no placeholders read); its slot is filled by the next :meth:`sync`.

        Nothing is written to the socket here: libpq buffers the statement (it writes by
        itself only past 64 KiB queued; the connection is non-blocking) and :meth:`sync`
        sends the trip's statements in one write. Sending each at once, so the server
        could start on it while the next one is made, cost a write and a wakeup of the
        server per statement: on two cores shared with the server, about 0.9 ms more a
        gateway turn (``bench/store_pg.py``: 9.52 against 8.64 ms)."""
        slot = Slot(self.transformer)
        pgconn = self.pgconn
        if params is None:
            pgconn.send_query_params(text.encode(), None)
            self._expected.append(slot)
            return slot
        wire = _COMPILED.get(text) or _compile(text)
        count = wire.count
        if wire.names is not None:
            assert isinstance(params, Mapping)
            values: Sequence[Any] = [params[n] for n in wire.names]
        else:
            assert not isinstance(params, Mapping)
            values = params
        if len(values) != count:
            import psycopg

            raise psycopg.ProgrammingError(
                f"the query has {count} placeholders but {len(values)} parameters were"
                " passed")
        if count:
            tx = self.transformer
            dumped = tx.dump_sequence(values, wire.formats)
            types = tuple(tx.types or ())
            formats = list(tx.formats or ())
        else:
            dumped, types, formats = [], (), None
        key = (wire.query, types)
        state = self.state
        name = state.prepared.get(key)
        if name is None and wire.preparable and len(state.prepared) < PREPARED_MAX:
            uses = state.uses.get(key, 0) + 1
            if uses >= PREPARE_AT:
                state.uses.pop(key, None)
                name = b"eyes_%d" % len(state.prepared)
                while name in state.prepared.values():
                    name += b"_"
                state.prepared[key] = name
                pgconn.send_prepare(name, wire.query, param_types=types or None)
                self._expected.append((name, key))
            elif len(state.uses) < PREPARED_MAX * 8:
                state.uses[key] = uses
        if name is not None:
            pgconn.send_query_prepared(name, dumped or None, param_formats=formats,
                                       result_format=self._text)
        else:
            pgconn.send_query_params(wire.query, dumped or None, param_types=types or None,
                                     param_formats=formats, result_format=self._text)
        self._expected.append(slot)
        return slot

    # -- the round trip ------------------------------------------------------------------

    def sync(self) -> None:
        """Send what is queued and read every result back (one round trip).

        Raises:
            psycopg.Error: the first statement that failed (the ones after it did not
                run), or the link's failure.
        """
        expected, self._expected = self._expected, []
        try:
            first_error = self._read(expected)
        except BaseException:
            # Cut off mid-way (the link lost, an interrupt): what is still on the wire is
            # unknown, so the connection is not lent again (see abandon).
            self._broken = True
            raise
        if first_error is not None:
            raise first_error

    def _read(self, expected: list[Any]) -> Exception | None:
        from psycopg import pq

        pgconn = self.pgconn
        pgconn.pipeline_sync()
        self._flush()
        first_error: Exception | None = None
        for owner in expected:
            result = None
            while True:  # one result per statement, then None
                got = self._next()
                if got is None:
                    break
                result = got
            if result is None:
                continue
            status = result.status
            if status == pq.ExecStatus.FATAL_ERROR:
                error = _error(result, self.conn)
                if first_error is None:
                    first_error = error
                if isinstance(owner, tuple):  # a prepare that failed: not prepared
                    self.state.prepared.pop(owner[1], None)
                elif isinstance(owner, Slot):
                    owner.error = error
                continue
            if status == pq.ExecStatus.PIPELINE_ABORTED:
                if isinstance(owner, tuple):
                    self.state.prepared.pop(owner[1], None)
                continue
            if isinstance(owner, Slot):
                owner.result = result
        end = self._next()
        if end is None or end.status != pq.ExecStatus.PIPELINE_SYNC:
            import psycopg

            raise psycopg.OperationalError("the pipeline's results are out of step")
        return first_error

    def close(self) -> None:
        """Read what is still queued (raising its first error), then leave pipeline mode."""
        try:
            if self._expected:
                self.sync()
        finally:
            self._leave()

    def abandon(self) -> None:
        """Leave pipeline mode after a failure, keeping the connection usable when it is
        (what was queued is read and dropped); never raises."""
        with contextlib.suppress(Exception):  # raised already, or by the caller's rollback
            if self._expected and not self._broken:
                self.sync()
        with contextlib.suppress(Exception):
            self._leave()

    def _leave(self) -> None:
        """Out of pipeline mode; a connection that cannot be (a round trip cut off
        mid-way, results left unread) is closed, so its pool drops it."""
        if self.pgconn.status == 0 and not self._broken:  # CONNECTION_OK
            try:
                self.pgconn.exit_pipeline_mode()
                return
            except Exception:
                self._broken = True
        self.conn.close()

    # -- waiting without holding the interpreter -------------------------------------------

    def _wait(self, events: int) -> int:
        """Wait (the interpreter free meanwhile) until the socket is ready for ``events``;
        ``poll``, not ``select``: a busy process's socket may be numbered past 1024."""
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            self._polled = 0
        fd = self.pgconn.socket
        if self._polled != events or self._polled_fd != fd:
            if self._polled_fd is not None:
                poller.unregister(self._polled_fd)
            poller.register(fd, events)
            self._polled, self._polled_fd = events, fd
        ready = 0
        for _fd, happened in poller.poll():
            ready |= happened
        return ready

    def _flush(self) -> None:
        pgconn = self.pgconn
        while pgconn.flush() == 1:
            if self._wait(select.POLLIN | select.POLLOUT) & select.POLLIN:
                pgconn.consume_input()  # the server's replies, so it can read on

    def _next(self) -> Any:
        pgconn = self.pgconn
        while pgconn.is_busy():
            self._wait(select.POLLIN)
            pgconn.consume_input()
        return pgconn.get_result()


def _error(result: Any, conn: Any) -> Exception:
    """The psycopg error of the server's failed ``result`` (as ``conn.execute`` raises)."""
    from psycopg import errors

    try:
        encoding = conn.info.encoding
    except Exception:  # a link gone meanwhile: the message is still UTF-8 here
        encoding = "utf-8"
    return errors.error_from_result(result, encoding=encoding)


def run(conn: Any, text: str, params: Sequence[Any] | Mapping[str, Any] | None) -> Slot:
    """One statement on its own (outside a transaction: autocommit), in one round trip.

    Raises:
        psycopg.Error: as :meth:`Pipeline.sync`.
    """
    pipe = Pipeline(conn)
    try:
        slot = pipe.send(text, params)
        pipe.sync()
    except BaseException:
        pipe.abandon()
        raise
    pipe.close()
    return slot
