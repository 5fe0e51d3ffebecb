"""The replica topology of the scale-out tests: HAProxy in front of three ``serve`` processes.

Issue 43's "must show" runs against what an operator would run: several ``deepseek-eyes
serve`` replicas, one settings file, one gateway key, one upstream, behind a real load
balancer that balances per request and health-checks ``/readyz``. The test command starts
all of it from Debian's ``haproxy`` (no container, no mock balancer), once per test file
(the ``topology`` fixture of ``tests/scale/conftest.py``).

What the replicas share is whatever ``backend_env`` says: empty, they share one SQLite data
directory (what works today, on one machine); with ``DEEPSEEK_EYES_DATABASE_URL`` and
``DEEPSEEK_EYES_STATE_URL`` set there, the same tests run on PostgreSQL and Redis. The
data directory is shared in both cases (settings' keyrings, blobs until they move).

The balancer, as ``docs/deployment.md`` shows it:

* ``balance roundrobin`` with ``option http-server-close``: every request is balanced on
  its own, even on a client's kept-alive connection.
* ``option httpchk GET /readyz`` with the ``Host`` the gateway accepts (a loopback name):
  a replica that is not ready, stopping (its socket is closed) or dead leaves the rotation.
* ``retries`` with ``option redispatch 1`` and ``retry-on conn-failure empty-response
  503``: a connection a replica refuses (dead, or draining after SIGTERM) is retried on
  another replica, and so is a request a stopping replica answered 503
  ``GATEWAY_SHUTTING_DOWN`` (it reached the app on a connection opened just before the
  signal: not run, "send it again") or closed without a byte of answer (a whole answer
  whose replica died: resent, it becomes an attempt of the turn the dead one held). Without
  the 503, the drain test lost about one request in six runs to that race. Retries at this
  level need the whole request in HAProxy's buffer before it is sent:
  ``option http-buffer-request`` (without it the dead replica's 502 reached the client).
  A stream a replica was sending when it died is *not* resent by the balancer (its status
  line was sent): the client resends it, as the test's client does.
* ``http-response set-header X-Served-By %[srv_name]``: which replica answered, for the
  tests (and for an operator's access log); the gateway itself names no replica.
* ``errorfile 502|503|504``: HAProxy's own answers (no replica ready, a replica too slow or
  broken) in the gateway's error shape, written from ``deepseek_eyes.gateway.balancer``.
  Test-only: a request with the ``X-Test-Server-Timeout`` header gets a ``timeout server``
  of 1 s (``http-request set-timeout``), so the 504 is reached without a two-minute turn.

Waits are on events, never fixed sleeps: a replica is started once it says where it
listens (``serve --json``) and its ``/readyz`` answers 200; it is in the rotation once
HAProxy's stats socket (``show stat``) says ``UP``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from deepseek_eyes.gateway.balancer import write_haproxy_errorfiles
from helpers import GATEWAY_KEY, Lines, _unavailable
from services import free_port

__all__ = ["BACKEND", "MODEL", "SERVED_BY", "SHORT_TIMEOUT", "Replica", "Topology",
           "start_topology"]

BACKEND = "deepseek_eyes"  # HAProxy's backend name
SERVED_BY = "x-served-by"  # the header HAProxy adds: the replica that answered
MODEL = "deepseek-v4-pro"
#: The test-only header that shortens HAProxy's ``timeout server`` to 1 s for its request.
SHORT_TIMEOUT = "x-test-server-timeout"
START_S = 60.0  # every wait on a process is bounded
POLL_S = 0.05  # the interval of a bounded wait on a condition no event announces


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(POLL_S)


@dataclass
class Replica:
    """One ``serve`` process on a fixed port (a restart comes back on the same one, where
    HAProxy's ``server`` line points)."""

    name: str  # HAProxy's server name: eyes1, eyes2, eyes3
    port: int
    process: subprocess.Popen[str] | None = None
    stderr: Lines = field(default_factory=Lines)
    _stdout: queue.Queue[str] = field(default_factory=queue.Queue)
    _readers: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        """Whether its ``/readyz`` answers 200 now."""
        try:
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


class Topology:
    """HAProxy and its replicas; see the module's docstring. Start with
    :func:`start_topology`."""

    def __init__(self, root: Path, upstream_url: str, *, replicas: int = 3,
                 backend_env: Mapping[str, str] | None = None, settings: str = "",
                 key: str = GATEWAY_KEY, gateway: Mapping[str, float | str] | None = None,
                 check_inter: str = "250ms") -> None:
        self.root = root
        self.home = root / "data"
        self.config = root / "eyes.toml"
        self.key = key
        self.backend_env = dict(backend_env or {})
        self.replicas = [Replica(f"eyes{i + 1}", free_port()) for i in range(replicas)]
        self.port = free_port()
        self.stats_socket = root / "haproxy.sock"
        self.haproxy_config = root / "haproxy.cfg"
        self.haproxy: subprocess.Popen[str] | None = None
        self.haproxy_stderr = Lines()
        self.check_inter = check_inter
        self.upstream_url = upstream_url
        # drain_delay: a SIGTERM'd replica fails /readyz this long before it stops taking
        # work; HAProxy takes it out after two failed checks (fall 2, 250 ms apart).
        self.gateway = {"rate_limit_per_minute": 1_000_000, "drain_timeout": 10.0,
                        "drain_delay": 2.0, **(gateway or {})}
        self.home.mkdir(parents=True, exist_ok=True)
        self.write_settings(settings)

    def write_settings(self, settings: str = "") -> None:
        """The replicas' one settings file: the loopback upstream, the ``[gateway]`` keys
        (no rate limit worth the name unless ``gateway`` gives one), then ``settings``
        (TOML of other tables). Replicas started later read it (:meth:`restart_all`)."""
        gateway = "".join(f"{name} = {json.dumps(value)}\n"
                          for name, value in self.gateway.items())
        self.config.write_text(
            f'[llm]\nbase_url = "{self.upstream_url}"\napi_key = false\nmodel = "{MODEL}"\n'
            f"timeout = 60\n[gateway]\n{gateway}" + settings, encoding="utf-8")

    # -- what a client uses ----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The balancer's OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    @property
    def env(self) -> dict[str, str]:
        """The environment every replica (and every CLI run on the topology) gets."""
        return {**os.environ, "DEEPSEEK_EYES_HOME": str(self.home),
                "DEEPSEEK_EYES_GATEWAY_KEY": self.key, **self.backend_env}

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    @staticmethod
    def served_by(headers: Mapping[str, str]) -> str:
        """The replica that answered a response (HAProxy's header)."""
        name = headers.get(SERVED_BY)
        assert name, f"no {SERVED_BY} header: {dict(headers)}"
        return name

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``deepseek-eyes --config … ARGS`` on the topology's store, to its end."""
        return subprocess.run(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(self.config), *args],
            env=self.env, capture_output=True, text=True, timeout=timeout, check=False)

    # -- the replicas ----------------------------------------------------------------------

    @staticmethod
    def _reap(replica: Replica) -> None:
        """Wait for an ended process's readers, and close its pipes."""
        process = replica.process
        if process is None:
            return
        process.wait(timeout=START_S)
        replica.stderr.wait_ended(START_S)
        for reader in replica._readers:
            reader.join(timeout=START_S)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _spawn(self, replica: Replica) -> None:
        self._reap(replica)
        replica.stderr = Lines()
        replica._stdout = queue.Queue()
        process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(self.config), "serve",
             "--port", str(replica.port), "--json"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        replica.process = process
        out, errors = replica._stdout, replica.stderr
        replica._readers = [
            threading.Thread(target=lambda: [out.put(x) for x in process.stdout or []],
                             daemon=True),
            threading.Thread(target=errors.read, args=(process.stderr,), daemon=True)]
        for reader in replica._readers:
            reader.start()

    def _listening(self, replica: Replica) -> None:
        """Wait until ``replica`` says where it listens, then until it is ready."""
        try:
            line = replica._stdout.get(timeout=START_S)
        except queue.Empty:
            raise AssertionError(f"{replica.name} did not start: "
                                 f"{replica.stderr.text()[-2000:]}") from None
        said = json.loads(line)
        assert "listening" in said, f"{replica.name}: {line} {replica.stderr.text()[-2000:]}"
        url = str(said["listening"]["url"]).rstrip("/").removesuffix("/v1")
        assert url.endswith(f":{replica.port}"), line
        _wait(lambda: not replica.alive or replica.ready(), START_S,
              f"{replica.name}'s /readyz answering 200")
        assert replica.alive, f"{replica.name} exited: {replica.stderr.text()[-2000:]}"

    def start_replicas(self, *replicas: Replica) -> None:
        """Start ``replicas`` (all when none is named) side by side; return once each is
        ready (not yet necessarily back in HAProxy's rotation: :meth:`wait_up`)."""
        chosen = replicas or tuple(self.replicas)
        for replica in chosen:
            assert not replica.alive, f"{replica.name} is already running"
            self._spawn(replica)
        for replica in chosen:
            self._listening(replica)

    def kill(self, name: str) -> Replica:
        """kill -9 one replica, and wait until it is gone."""
        replica = self.replica(name)
        assert replica.process is not None
        replica.process.send_signal(signal.SIGKILL)
        replica.process.wait(timeout=START_S)
        return replica

    def terminate(self, name: str) -> Replica:
        """SIGTERM one replica (it fails /readyz for ``drain_delay``, then drains); does not
        wait (``replica.process.wait``)."""
        replica = self.replica(name)
        assert replica.process is not None
        replica.process.send_signal(signal.SIGTERM)
        return replica

    def restart(self, name: str) -> Replica:
        """Start a stopped replica again on its port; return once HAProxy has it ``UP``."""
        replica = self.replica(name)
        if replica.alive:
            assert replica.process is not None
            replica.process.send_signal(signal.SIGINT)
            replica.process.wait(timeout=START_S)
        self.start_replicas(replica)
        self.wait_up(name)
        return replica

    def restart_all(self) -> None:
        """Stop every replica (SIGINT: drained, without ``drain_delay``, as nothing is
        sent to them meanwhile) and start them again (after a change of
        settings); return once all are ``UP``."""
        for replica in self.replicas:
            if replica.alive:
                assert replica.process is not None
                replica.process.send_signal(signal.SIGINT)
        for replica in self.replicas:
            self._reap(replica)
        self.ensure_all_up()

    def ensure_all_up(self) -> None:
        """Restart whatever replica a test left stopped; return once all are ``UP``."""
        stopped = [r for r in self.replicas if not r.alive]
        if stopped:
            self.start_replicas(*stopped)
        for replica in self.replicas:
            self.wait_up(replica.name)

    # -- the balancer ----------------------------------------------------------------------

    def _haproxy_cfg(self) -> str:
        servers = "\n".join(
            f"    server {r.name} 127.0.0.1:{r.port} check inter {self.check_inter} fall 2"
            " rise 1"
            for r in self.replicas)
        errorfiles = "\n".join(
            f"    errorfile {status} {path}"
            for status, path in write_haproxy_errorfiles(self.root / "errors").items())
        return f"""\
global
    maxconn 512
    stats socket {self.stats_socket} mode 600 level admin
    log stderr format raw local0

defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-request 10s
    timeout check 3s
    retries 3
    retry-on conn-failure empty-response 503
    option redispatch 1
    option http-server-close
    option http-buffer-request
{errorfiles}

frontend eyes
    bind 127.0.0.1:{self.port}
    default_backend {BACKEND}

backend {BACKEND}
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect status 200
    http-response set-header X-Served-By %[srv_name]
    http-request set-timeout server 1s if {{ req.hdr({SHORT_TIMEOUT}) -m found }}
{servers}
"""

    def start_haproxy(self) -> None:
        haproxy = shutil.which("haproxy") or (
            "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
        if haproxy is None:
            _unavailable("haproxy is not installed (apt-get install haproxy)")
        self.haproxy_config.write_text(self._haproxy_cfg(), encoding="utf-8")
        self.haproxy = subprocess.Popen(  # noqa: S603 - Debian's haproxy, argv list
            [str(haproxy), "-f", str(self.haproxy_config), "-db"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.haproxy_stderr.follow(self.haproxy.stderr)
        for replica in self.replicas:
            self.wait_up(replica.name)

    def admin(self, command: str) -> str:
        """One command on HAProxy's stats socket (``show stat``, ``show servers state``)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.stats_socket))
            sock.sendall(command.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def _stats(self, column: str) -> dict[str, str]:
        """One column of ``show stat`` for each replica; empty while the socket is not
        there yet."""
        try:
            text = self.admin("show stat")
        except OSError:
            return {}
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        return {row["svname"]: row[column] for row in rows
                if row.get("pxname") == BACKEND and row["svname"] != "BACKEND"}

    def states(self) -> dict[str, str]:
        """Each replica's status as HAProxy sees it (``UP``, ``DOWN``, ``UP 1/2``, …)."""
        return self._stats("status")

    def busy(self) -> list[str]:
        """The replicas HAProxy has a request in flight on now (``scur``)."""
        return [name for name, count in self._stats("scur").items() if int(count or 0) > 0]

    def counters(self) -> dict[str, int]:
        """The backend's request counters from ``show stat``: answers by class
        (``hrsp_2xx``, ``hrsp_5xx``), retries (``wretr``), redispatches (``wredis``), failed
        connections (``econ``) and responses (``eresp``). Counters, not the request log:
        HAProxy writes its log to stderr without blocking and can lose a line (``show
        info`` counts them as ``DroppedLogs``); CI twice read fewer lines than answers,
        even 10 s after the last."""
        text = self.admin("show stat")
        for row in csv.DictReader(io.StringIO(text.lstrip("# "))):
            if row.get("pxname") == BACKEND and row["svname"] == "BACKEND":
                return {name: int(row[name] or 0) for name in
                        ("hrsp_2xx", "hrsp_5xx", "wretr", "wredis", "econ", "eresp")}
        raise AssertionError(f"no {BACKEND} row in HAProxy's show stat:\n{text[:2000]}")

    def wait_state(self, name: str, status: str, timeout: float = START_S) -> None:
        """Wait until HAProxy says ``status`` (``UP``, ``DOWN``) of replica ``name``."""
        assert self.haproxy is not None
        assert self.haproxy.poll() is None, self.haproxy_stderr.text()[-2000:]
        _wait(lambda: self.states().get(name) == status, timeout,
              f"HAProxy seeing {name} {status} (now {self.states().get(name)})")

    def wait_up(self, name: str, timeout: float = START_S) -> None:
        self.wait_state(name, "UP", timeout)

    # -- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the balancer and every replica (SIGINT, then SIGKILL after a bound)."""
        processes = [r.process for r in self.replicas if r.process is not None]
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # no drain_delay: nothing is sent meanwhile
        if self.haproxy is not None:
            processes.append(self.haproxy)
            if self.haproxy.poll() is None:
                self.haproxy.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for replica in self.replicas:
            self._reap(replica)
        if self.haproxy is not None and self.haproxy.stderr is not None:
            self.haproxy_stderr.wait_ended(START_S)
            self.haproxy.stderr.close()


@contextlib.contextmanager
def start_topology(root: Path, upstream_url: str, *,
                   backend_env: Mapping[str, str] | None = None, settings: str = "",
                   gateway: Mapping[str, float | str] | None = None, replicas: int = 3,
                   check_inter: str = "250ms") -> Iterator[Topology]:
    """The topology started (replicas ready, all ``UP`` in HAProxy), closed after the block."""
    topology = Topology(root, upstream_url, replicas=replicas, backend_env=backend_env,
                        settings=settings, gateway=gateway, check_inter=check_inter)
    try:
        topology.start_replicas()
        topology.start_haproxy()
        yield topology
    finally:
        topology.close()
