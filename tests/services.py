"""Throwaway PostgreSQL clusters and Redis servers from Debian's packages, for the tests of
the scale-out backends (store on PostgreSQL, shared state on Redis, the replica topology).

Real engines, not stand-ins: a cluster is ``initdb``'d into a fresh directory and started on
a free loopback port (about 2 s here), a Redis server runs in the foreground with nothing
saved to disk. Each is started once per test session by the fixtures in ``conftest.py``
(:func:`postgres_cluster`, :func:`redis_server`); a test takes a fresh database
(:meth:`PostgresCluster.new_database`) or a fresh Redis database number, so tests never see
each other's rows. Missing binaries skip locally and fail under ``CI=true``
(:func:`helpers._unavailable`).

PostgreSQL will not run as root (FIELD-NOTES): as root the cluster's directory belongs to the
``postgres`` user and every server command runs through ``runuser``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from helpers import _unavailable as unavailable

__all__ = ["PostgresCluster", "RedisServer", "free_port", "postgres_bindir", "start_postgres",
           "start_redis"]


def _port_slice() -> range:
    """The ports :func:`free_port` draws from: below the kernel's ephemeral range (where a
    port asked of the kernel could be taken by any outgoing connection before the server
    binds it) and, under pytest-xdist, this worker's own share of them (two workers never
    hand out the same port)."""
    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first = 10000 if low > 12000 else 1024
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    share = max(low - first, 0) // workers
    return range(first + worker * share, first + (worker + 1) * share)


_PORTS = _port_slice()
_next_port = _PORTS.start + (os.getpid() * 7919) % max(len(_PORTS), 1)


def free_port() -> int:
    """A loopback port nothing listens on now, none handed out before in this process (a
    port taken but not yet bound by the server it was for is not handed out again). A
    machine whose ephemeral range leaves too few ports below it gets one from the kernel."""
    global _next_port
    if len(_PORTS) < 256:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    for _ in range(len(_PORTS)):
        port = _next_port
        _next_port = _PORTS.start + (_next_port + 1 - _PORTS.start) % len(_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {_PORTS}")


def postgres_bindir() -> Path:
    """Where ``initdb`` and ``pg_ctl`` live (Debian keeps them off PATH)."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        bindir = Path(out.stdout.strip())
        if (bindir / "initdb").exists():
            return bindir
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    unavailable("PostgreSQL's initdb is not installed (apt-get install postgresql)")
    raise AssertionError("unreachable")


@dataclass
class PostgresCluster:
    """A running throwaway cluster; :meth:`new_database` hands each test its own database."""

    root: Path
    port: int
    bindir: Path
    _as_postgres: list[str] = field(default_factory=list)

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql],
            capture_output=True, text=True, check=False, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return out.stdout.strip()

    def new_database(self, prefix: str = "t") -> str:
        """A fresh empty database; returns its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"),
             *args], capture_output=True, text=True, check=False, timeout=120)

    def stop(self, mode: str = "fast") -> None:
        self._ctl("stop", "-m", mode, "-w")

    def start(self) -> None:
        out = self._ctl(
            "-l", str(self.root / "server.log"),
            "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                  "-c fsync=off -c max_connections=200",
            "start", "-w", "-t", "60")
        if out.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pg_ctl start failed: {out.stderr.strip()}\n{log}")

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def start_postgres() -> Iterator[PostgresCluster]:
    """initdb + start a cluster on a free port (trust auth on loopback only); removed after."""
    bindir = postgres_bindir()
    if shutil.which("psql") is None:
        unavailable("psql is not installed (apt-get install postgresql-client)")
    root = Path(tempfile.mkdtemp(prefix="eyes-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        as_postgres = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
        root.chmod(0o755)
    cluster = PostgresCluster(root=root, port=free_port(), bindir=bindir,
                              _as_postgres=as_postgres)
    init = subprocess.run(
        [*as_postgres, str(bindir / "initdb"), "-D", str(root / "data"), "-U", "postgres",
         "--auth=trust", "-E", "UTF8", "--no-sync"],
        capture_output=True, text=True, check=False, timeout=120)
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {init.stderr.strip()}")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class RedisServer:
    """A running ``redis-server`` on loopback; :meth:`url` names one of its databases."""

    port: int
    process: subprocess.Popen[bytes]
    _next_db: int = 0

    def url(self, db: int | None = None) -> str:
        if db is None:
            db = self._next_db % 16
            self._next_db += 1
            subprocess.run(["redis-cli", "-p", str(self.port), "-n", str(db), "FLUSHDB"],
                           capture_output=True, check=False, timeout=30)
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def start(self) -> None:
        """Start again on the same port (after :meth:`stop`)."""
        self.process = _spawn_redis(self.port)


def _spawn_redis(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--protected-mode", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return process
        time.sleep(0.02)
    process.kill()
    raise RuntimeError("redis-server did not start listening within 30 s")


@contextlib.contextmanager
def start_redis() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    server = RedisServer(port=port, process=_spawn_redis(port))
    try:
        yield server
    finally:
        server.stop()
