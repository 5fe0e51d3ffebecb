"""Shared fixtures: every test runs against a temporary data directory with no API keys;
tests that need a remote model get the session's loopback OpenAI-compatible server, which
decodes every image it is sent (see :mod:`vision.loopback`). Tests that need counters of
their own use a tagged behaviour, ``loopback.url("healthy~" + tag)``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepseek_eyes.home import DataHome
from helpers import SCORE, SmallDisk, mount_tmpfs, require_module
from services import PostgresCluster, RedisServer, start_postgres, start_redis
from vision.loopback import LoopbackVisionServer

# Kept importable from here for older tests; new code imports them from ``helpers``: any
# conftest.py of a subfolder becomes the module ``conftest`` once collected.
__all__ = ["require_module"]

SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_KEY")

#: ``DEEPSEEK_EYES_TEST_DATABASE=postgresql`` runs the tests against PostgreSQL: each test's
#: data directory keeps its tables in a fresh database of the session's cluster (the store
#: suite on both engines: tests/store/test_on_postgresql.py runs its subset so).
TEST_DATABASE = os.environ.get("DEEPSEEK_EYES_TEST_DATABASE", "sqlite")


@pytest.fixture(scope="session", autouse=True)
def session_home(tmp_path_factory: pytest.TempPathFactory,
                 request: pytest.FixtureRequest) -> Iterator[Path]:
    """A data directory for what runs outside a test's own (module and session fixtures
    that start servers): without it they wrote to the machine's default one, which a run
    of another version then found migrated past its own schema."""
    root = tmp_path_factory.mktemp("session-home")
    saved = {name: os.environ.get(name) for name in ("DEEPSEEK_EYES_HOME", "XDG_DATA_HOME",
                                                     "DEEPSEEK_EYES_DATABASE_URL")}
    os.environ.pop("DEEPSEEK_EYES_DATABASE_URL", None)
    if TEST_DATABASE == "postgresql":  # module fixtures' stores: a database of the session's
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        os.environ["DEEPSEEK_EYES_DATABASE_URL"] = cluster.new_database()
    os.environ["DEEPSEEK_EYES_HOME"] = str(root / "eyes-home")
    os.environ["XDG_DATA_HOME"] = str(root / "xdg-data")
    yield root
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The score reports tests recorded (helpers.SCORE), after the run: a test's own output
    is not shown when the tests run on several workers."""
    scores = [value for reports in terminalreporter.stats.values() for report in reports
              if getattr(report, "when", None) == "call"
              for name, value in getattr(report, "user_properties", ()) if name == SCORE]
    if scores:
        terminalreporter.section("scores")
        for text in scores:
            terminalreporter.write_line(str(text))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if TEST_DATABASE != "postgresql":
        return
    skip = pytest.mark.skip(reason="about SQLite's file itself (the tests run on PostgreSQL)")
    for item in items:
        if item.get_closest_marker("sqlite_only") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  request: pytest.FixtureRequest) -> Path:
    home = tmp_path / "eyes-home"
    monkeypatch.setenv("DEEPSEEK_EYES_HOME", str(home))
    monkeypatch.delenv("DEEPSEEK_EYES_DATABASE_URL", raising=False)
    if TEST_DATABASE == "postgresql":
        cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
        monkeypatch.setenv("DEEPSEEK_EYES_DATABASE_URL", cluster.new_database())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for name in list(os.environ):
        # OTEL_*: a developer's own collector settings would turn traces on in the gateways
        # tests start; the tracing tests set what they need.
        if name.endswith(SECRET_ENV_SUFFIXES) or name.startswith("OTEL_"):
            monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def home(tmp_path: Path) -> Iterator[DataHome]:
    """A data directory of the test's own (``tmp_path/data``), closed after it; a test file
    that needs one filled defines its own ``home``."""
    data = DataHome(tmp_path / "data")
    yield data
    data.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 16 MiB tmpfs of the test's own at ``tmp_path/disk``, unmounted after the test (a
    process still using it must be stopped by then). Needs root: skipped locally without,
    a failure under CI=true."""
    with mount_tmpfs(tmp_path / "disk", 16 << 20) as disk:
        yield disk


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def loopback() -> Iterator[LoopbackVisionServer]:
    with LoopbackVisionServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL cluster per test session (tests/services.py); a test takes
    its own database with ``postgres_cluster.new_database()``."""
    with start_postgres() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """The URL of a fresh, empty database of the session's cluster."""
    return postgres_cluster.new_database()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One throwaway redis-server per test session (tests/services.py)."""
    with start_redis() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of one of the session's Redis databases, flushed for this test."""
    return redis_server.url()
