"""Helpers every test folder can import (``from helpers import …``). They live here, not in
conftest.py: each folder's conftest.py is imported as the module ``conftest``, so ``from
conftest import`` would find whichever was collected last."""

from __future__ import annotations

import base64
import contextlib
import errno
import importlib
import importlib.util
import json
import os
import queue
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["BLIND", "BLIND_TOML", "GATEWAY_KEY", "LOCAL_VISION", "SCORE", "ServedGateway",
           "SmallDisk",
           "mount_read_only", "mount_tmpfs", "require_module", "serve_blind", "serve_gateway"]

#: The user property a test records a score report under (``record_property(SCORE,
#: text)``): conftest.py prints them all after the run, under "scores", also when the
#: tests ran on several workers (pytest-xdist shows no worker's output).
SCORE = "score"

#: The key :func:`serve_gateway` gives a gateway unless the test sets its own. Tokens in
#: tests are random literals: every server refuses patterned ones (serving/tokens.py).
GATEWAY_KEY = "DuZnn3inbKNJ3aqCH0KIHObov3W_PHFryIjOq-dOgWc"


#: For a test about something other than learning which model sees: the settings say the
#: text-only model is text-only (no probe), and images are read by the local route alone
#: (no ``deepseek`` route). Merge BLIND into ``[llm]`` and LOCAL_VISION into ``[vision]``,
#: or append BLIND_TOML to a settings file that has no ``[vision]`` table of its own.
BLIND = {"models": [{"id": "deepseek-v4-pro", "input": ["text"]}]}
LOCAL_VISION = {"deepseek": {"enabled": False}}
BLIND_TOML = ('\n[[llm.models]]\nid = "deepseek-v4-pro"\ninput = ["text"]\n'
              '\n[vision.deepseek]\nenabled = false\n')


def _unavailable(reason: str) -> NoReturn:
    """Skip locally; fail under CI=true, where a missing dependency is a broken setup and
    never a silent skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def require_module(name: str) -> ModuleType:
    """Import an optional test dependency: skip locally, but fail under CI=true, where a
    missing dependency is a broken setup and never a silent skip."""
    try:
        return importlib.import_module(name)
    except ImportError:
        _unavailable(f"the test dependency {name!r} is missing")


class SmallDisk:
    """A tmpfs of its own (:func:`mount_tmpfs`): a real filesystem that really fills up."""

    FILLER = "filler.bin"

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def free_bytes(self) -> int:
        info = os.statvfs(self.root)
        return info.f_bfree * info.f_frsize

    def fill(self) -> None:
        """Write a filler file until the disk is full (``ENOSPC``), to the last byte.
        Unbuffered, so nothing is left to flush (and fail) at close."""
        fd = os.open(self.root / self.FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for chunk in (1 << 20, 4096, 1):
                block = b"\0" * chunk
                try:
                    while True:
                        os.write(fd, block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        finally:
            os.close(fd)

    def free(self) -> None:
        """Delete the filler: the space is back."""
        (self.root / self.FILLER).unlink(missing_ok=True)


def _mount(*args: str, what: str) -> None:
    """Run mount(8) with ``args``; unavailable (skip, or fail under CI=true) when it fails.
    Mounting needs root (or CAP_SYS_ADMIN) on Linux."""
    mount = shutil.which("mount")
    if sys.platform != "linux" or mount is None:
        _unavailable(f"{what} cannot be mounted here (Linux and mount(8) are needed)")
    done = subprocess.run([mount, *args], capture_output=True, text=True,  # noqa: S603
                          check=False, timeout=30)
    if done.returncode != 0:
        _unavailable(f"{what} cannot be mounted: {done.stderr.strip()}")


def _unmount(where: Path) -> None:
    umount = shutil.which("umount") or "umount"
    if subprocess.run([umount, str(where)], capture_output=True,  # noqa: S603
                      check=False, timeout=30).returncode != 0:
        subprocess.run([umount, "-l", str(where)], capture_output=True,  # noqa: S603
                       check=False, timeout=30)


@contextlib.contextmanager
def mount_tmpfs(where: Path, size: int) -> Iterator[SmallDisk]:
    """A tmpfs of ``size`` bytes mounted at ``where`` (created) for the block, unmounted
    after it. Without the right to mount the test is skipped locally and fails under
    CI=true."""
    where.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where),
           what=f"a tmpfs at {where}")
    try:
        yield SmallDisk(where)
    finally:
        _unmount(where)


@contextlib.contextmanager
def mount_read_only(source: Path, where: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``where`` (created) for the block: even root
    cannot write there (``EROFS``), unlike a copy whose modes are only taken away. As
    :func:`mount_tmpfs` without the right to mount."""
    where.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(source), str(where), what=f"{source} at {where}")
    try:
        _mount("-o", "remount,bind,ro", str(where), what=f"{where} read-only")
        yield where
    finally:
        _unmount(where)


class ServedGateway:
    """``deepseek-eyes serve`` in a process of its own (see :func:`serve_gateway`)."""

    def __init__(self, base: str, process: subprocess.Popen[str], key: str | None,
                 stderr: Lines | None = None) -> None:
        self.base = base  # http://127.0.0.1:PORT/v1
        self.process = process
        self.key = key  # the gateway's key (None: an open loopback gateway)
        self._stderr = stderr or Lines()

    @property
    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header a client of this gateway sends."""
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    @property
    def stderr(self) -> str:
        """What the gateway wrote on standard error so far."""
        return self._stderr.text()

    def wait_for_stderr(self, fragment: str, timeout: float) -> bool:
        """Wait until a line of its standard error holds ``fragment``; False after
        ``timeout`` seconds (or once the stream ended) without one."""
        return self._stderr.wait_for(fragment, timeout)


class Lines:
    """Lines read by a thread, that another can wait on."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()

    def read(self, stream: Iterable[str] | None) -> None:
        for line in stream or ():
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def text(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def follow(self, stream: Iterable[str] | None) -> Lines:
        """Read ``stream`` in a daemon thread of its own; returns these lines."""
        threading.Thread(target=self.read, args=(stream,), daemon=True).start()
        return self

    def wait_for(self, fragment: str, timeout: float, times: int = 1) -> bool:
        """Wait until ``times`` lines hold ``fragment``; False after ``timeout`` seconds
        (or once the stream ended) without them."""
        def count() -> int:
            return sum(fragment in line for line in self._lines)

        with self._changed:
            self._changed.wait_for(lambda: self._ended or count() >= times, timeout)
            return count() >= times

    def wait_ended(self, timeout: float) -> bool:
        """Wait until the stream has been read to its end."""
        with self._changed:
            return self._changed.wait_for(lambda: self._ended, timeout)


def open_gateway_env(home: Path) -> dict[str, str]:
    """The environment of an open loopback gateway on data directory ``home`` (no key: no
    tool that acts on the machine is configured)."""
    return {**os.environ, "DEEPSEEK_EYES_HOME": str(home), "DEEPSEEK_EYES_GATEWAY_KEY": ""}


def run_cli(config: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``deepseek-eyes --config CONFIG ARGS...`` on data directory ``home``, to its end."""
    return subprocess.run(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), *args],
        env=open_gateway_env(home), capture_output=True, text=True, timeout=120, check=False)


@contextlib.contextmanager
def serve_gateway(
    config: Path, env: dict[str, str], *, deadline_s: float = 60
) -> Iterator[ServedGateway]:
    """Start ``serve --port 0 --json`` with ``config`` and ``env``; yields once it listens,
    and stops it on exit. A gateway that does not start fails the test with its stderr.
    Without ``DEEPSEEK_EYES_GATEWAY_KEY`` in ``env`` the gateway gets :data:`GATEWAY_KEY`
    (one with tools needs a key); an empty value there serves without a key."""
    env = dict(env)
    env.setdefault("DEEPSEEK_EYES_GATEWAY_KEY", GATEWAY_KEY)
    if not env["DEEPSEEK_EYES_GATEWAY_KEY"]:
        del env["DEEPSEEK_EYES_GATEWAY_KEY"]
    process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "serve",
         "--port", "0", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    errors = Lines()
    readers = [
        threading.Thread(target=lambda: [lines.put(x) for x in process.stdout or []],
                         daemon=True),
        threading.Thread(target=errors.read, args=(process.stderr,), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        try:
            line = lines.get(timeout=deadline_s)
        except queue.Empty:
            process.kill()
            pytest.fail(f"the gateway did not start: {errors.text()[-2000:]}")
        url = json.loads(line)["listening"]["url"].rstrip("/")
        yield ServedGateway(url if url.endswith("/v1") else f"{url}/v1", process,
                            env.get("DEEPSEEK_EYES_GATEWAY_KEY"), errors)
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=20)
        for reader in readers:
            reader.join(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@contextlib.contextmanager
def serve_blind(root: Path, upstream_url: str, model: str, *, timeout: float = 20,
                more: str = "") -> Iterator[ServedGateway]:
    """:func:`serve_gateway` on ``root/eyes.toml``: ``[llm]`` at ``upstream_url`` with
    ``model`` said to be text-only and images read locally (:data:`BLIND_TOML`), then
    ``more`` settings; its data directory is ``root/data``."""
    config = root / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "{upstream_url}"\napi_key = false\nmodel = "{model}"\n'
        f"timeout = {timeout:g}\n" + BLIND_TOML + more, encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root / "data")}
    with serve_gateway(config, env) as gateway:
        yield gateway


@contextlib.contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """Our tracing on, every finished span kept in memory for the test to read; off again and
    the provider shut down at the end."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from deepseek_eyes import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(provider)
    try:
        yield exporter
    finally:
        telemetry.uninstall()
        provider.shutdown()


#: The append-only triggers of the store's migrations (dropped to tamper on SQLite).
TRIGGERS = ("chain_no_update", "chain_no_delete", "evidence_no_update", "events_no_update",
            "events_no_delete")


def on_postgresql() -> bool:
    """Whether this test's store is on PostgreSQL (``DEEPSEEK_EYES_TEST_DATABASE``)."""
    return bool(os.environ.get("DEEPSEEK_EYES_DATABASE_URL"))


def raw_store(path: Path, *, tamper: bool = False) -> sqlite3.Connection:
    """A connection of its own to the store's database, as an attacker or an operator
    with direct access has one: the SQLite file at ``path``, or (the tests on PostgreSQL)
    the test's PostgreSQL database as its superuser, SQLite's SQL translated like the
    store's own. ``tamper``: the append-only triggers off (SQLite: dropped; PostgreSQL:
    ``session_replication_role = replica``, which fires no trigger for this session)."""
    url = os.environ.get("DEEPSEEK_EYES_DATABASE_URL")
    if url:
        from deepseek_eyes.store.postgres import PgConnection

        pg = PgConnection(url)
        if tamper:
            pg.raw("SET session_replication_role = replica")
        return pg
    conn = sqlite3.connect(path, isolation_level=None)
    if tamper:
        for name in TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    return conn


def _admin(url: str) -> tuple[str, Any]:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/postgres")), parts


def _create_database(url: str, template: str | None = None) -> str:
    """A new database on ``url``'s cluster (a copy of ``template``'s database when given);
    returns its URL."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    admin, parts = _admin(url)
    name = f"f_{uuid.uuid4().hex[:12]}"
    source = "" if template is None else f" TEMPLATE {urlsplit(template).path.lstrip('/')}"
    with psycopg.connect(admin, autocommit=True) as pg:
        pg.execute(f"CREATE DATABASE {name}{source}")
    return str(urlunsplit(parts._replace(path=f"/{name}")))


@contextlib.contextmanager
def fresh_database() -> Iterator[str | None]:
    """A fresh store database for the block, on PostgreSQL (a new database of the same
    cluster named by ``DEEPSEEK_EYES_DATABASE_URL``; yields its URL); nothing to do on
    SQLite (yields None), where a new directory is a new database. For tests that open
    several stores in one test (a hypothesis example each) and for module templates."""
    url = os.environ.get("DEEPSEEK_EYES_DATABASE_URL")
    if not url:
        yield None
        return
    os.environ["DEEPSEEK_EYES_DATABASE_URL"] = fresh = _create_database(url)
    try:
        yield fresh
    finally:
        os.environ["DEEPSEEK_EYES_DATABASE_URL"] = url


def clone_store(template: str | None) -> None:
    """Point this test's store at a copy of the template's database (PostgreSQL; a copy of
    the data directory copies a SQLite store already). The test's own fixture restores the
    variable after it."""
    if template is not None:
        os.environ["DEEPSEEK_EYES_DATABASE_URL"] = _create_database(template, template)


def named_records(conn: Any, seq: int) -> list[tuple[str, int]]:
    """The records the chain entry at ``seq`` names, ``(table, rowid)`` in its order: its
    single record, or each one its batch names (a transaction's records share one entry,
    store/chain.py); none for a body entry. How a tamper test finds what an entry covers."""
    from deepseek_eyes.store import chain

    table, rowid, kind, body = conn.execute(
        "SELECT ref_table, ref_id, kind, body FROM chain WHERE seq = ?", (seq,)).fetchone()
    if table is not None:
        return [(str(table), int(rowid))]
    if kind == chain.BATCH:
        return [(t, r) for t, r, _k, _d in chain.batch_members(body)]
    return []


def rewritten_body(conn: Any, kind: str, body: str | None) -> str | None:
    """A body entry's body as an attacker who rewrites the chain makes it: a batch entry's
    record digests taken again from the records as they are now (one that is gone keeps
    its digest); any other body as it is."""
    from deepseek_eyes.store import chain

    if kind != chain.BATCH or body is None:
        return body
    parsed = json.loads(body)
    runs, version = parsed["records"], parsed["v"]
    for run in runs:
        table, _kind, first, digests = run
        if version == 3:  # base64 of the digests' bytes
            digests = base64.b64decode(digests).hex()
        fresh = []
        for n in range(len(digests) // 64):
            record = chain.read_record(conn, table, first + n)
            fresh.append(chain.record_digest(record) if record is not None
                         else digests[n * 64:(n + 1) * 64])
        run[3] = "".join(fresh)
        if version == 3:
            run[3] = base64.b64encode(bytes.fromhex(run[3])).decode()
    return chain.canonical_bytes({"records": runs, "v": version}).decode()
