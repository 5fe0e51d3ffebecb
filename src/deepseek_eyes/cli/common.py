"""What every command needs: settings from ``--config``, the data home, the bridge, and
the checks that turn a command line the library would misread into an error with a code.

The store and the bridge are imported inside the functions that open them: this module is
imported by every command, and ``config check`` should not pay for the vision stack.
"""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from deepseek_eyes.errors import CliError
from deepseek_eyes.settings import LoadedSettings, load_settings

if TYPE_CHECKING:
    from deepseek_eyes.store.db import Database
    from deepseek_eyes.vision.bridge import VisionBridge

__all__ = [
    "audited_settings_edit", "dump_json", "ensure_can_listen", "listening", "loaded_settings",
    "open_bridge", "serve_http",
]


def loaded_settings(ctx: click.Context) -> LoadedSettings:
    root = ctx.find_root()
    config_path: Path | None = (root.obj or {}).get("config_path")
    return load_settings(config_path)


@contextlib.contextmanager
def audited_settings_edit(ctx: click.Context, path: Path) -> Iterator[None]:
    """Run a settings-file edit; for each change it wrote, append a ``settings.change``
    audit row (the command, the file, its SHA-256 before and after, as the edit saw them
    under the file's lock) to the audit chain."""
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.settings.writer import recording

    with recording() as writes:
        yield
    if not writes:
        return
    with DataHome.open(load_settings(path).settings) as home:
        for written in writes:
            home.audit.append("settings.change", ctx.command_path, path=str(path.absolute()),
                              before_sha256=written.before, after_sha256=written.sha256)


@contextlib.asynccontextmanager
async def open_bridge(ctx: click.Context) -> AsyncIterator[VisionBridge]:
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.vision.bridge import VisionBridge

    loaded = loaded_settings(ctx)
    home = DataHome.open(loaded.settings)
    bridge = VisionBridge(loaded.settings, home)
    try:
        yield bridge
    finally:
        await bridge.aclose()
        home.close()


@contextlib.contextmanager
def stored_database(ctx: click.Context) -> Iterator[Database | None]:
    """The data directory's database opened to read only (SQLite ``mode=ro``: nothing is
    created, migrated or written), or None when nothing is stored yet. For the commands
    that only look (``sessions``, ``usage``): they work on a read-only copy of a data
    directory, a backup or a forensic one, as ``audit verify`` and ``audit show`` do."""
    from deepseek_eyes.settings import data_home
    from deepseek_eyes.store import db as store_db

    settings = loaded_settings(ctx).settings
    path = data_home(settings) / "eyes.db"
    url = settings.store.url()
    if url is None and not path.exists():
        yield None
        return
    db = store_db.Database.open_read_only(
        path, url=url, password=settings.store.password() if url else None)
    try:
        yield db
    finally:
        db.close()


def dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def listening(host: str, port: int, path: str = "/") -> dict[str, Any]:
    """Where a server listens, as ``serve --json`` and ``terminal serve --json`` say it:
    ``{"host", "port", "url"}`` (an IPv6 host in brackets in the URL)."""
    shown = f"[{host}]" if ":" in host else host
    return {"host": host, "port": port, "url": f"http://{shown}:{port}{path}"}


def serve_http(app: Any, host: str, port: int, announce: Callable[[str, int], None]) -> None:
    """``uvicorn.run``, telling ``announce`` the bound address once it listens (the port may
    have been 0). Exits with status 3 when the server cannot start, as ``uvicorn.run`` does."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers:
                bound_host, bound_port = self.servers[0].sockets[0].getsockname()[:2]
                announce(bound_host, bound_port)

    server = Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                   access_log=False, lifespan="on"))
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is stopped
        server.run()
    if not server.started:
        sys.exit(3)


def ensure_can_listen(host: str, port: int) -> None:
    """Refuse a port another server already listens on, before a server starts and fails
    with its own log line. Only that case: other bind failures are the server's to report.

    Raises:
        CliError: ``CLI_ADDRESS_IN_USE``.
    """
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers do
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"{host}:{port} is already in use; stop the server holding it or pick "
                    "another port with --port",
                    code="CLI_ADDRESS_IN_USE", details={"host": host, "port": port},
                ) from None
