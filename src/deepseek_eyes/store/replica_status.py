"""Each replica's MCP servers' status, as the last snapshot it wrote.

An MCP server's connection is each process's own: three ``serve`` replicas hold three
connections to one server, each with its own status, latency and last failure. The console
of any replica lists them all from here. Each replica writes only its own rows (named by
:func:`~deepseek_eyes.store.owner.owner`), when a server's status changes (at most once a
second per server) and every :data:`REFRESH_S` even when nothing changed, so a row older
than :data:`FRESH_S` says its replica stopped writing: shown as stale, and omitted once it
is older than :data:`FORGOTTEN_S`. A replica that stops cleanly removes its rows.

Only the status's words are kept (status, latency, the last failure's code): no message,
no log path, nothing a server's answer could have put there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from deepseek_eyes.store.approvals import replica_name
from deepseek_eyes.store.db import Database
from deepseek_eyes.store.owner import alive, on_this_host, owner

__all__ = ["FORGOTTEN_S", "FRESH_S", "REFRESH_S", "ReplicaStatus", "ServerStatus"]

#: A replica rewrites its rows this often when nothing changed.
REFRESH_S = 10.0
#: A row older than this: its replica stopped writing (shown stale).
FRESH_S = 30.0
#: A row older than this is not listed at all.
FORGOTTEN_S = 600.0


@dataclass(frozen=True)
class ServerStatus:
    """What a replica says of one server."""

    server: str
    status: str | None
    latency_ms: float | None
    last_error: str | None


class ReplicaStatus:
    """The ``replica_mcp_status`` rows of one database, written as process ``me``."""

    def __init__(self, db: Database, *, me: str | None = None) -> None:
        self._db = db
        self.me = owner() if me is None else me

    def write(self, servers: Iterable[ServerStatus], *, only: bool = False) -> None:
        """This replica's snapshot of ``servers``; ``only``: they are all its servers (rows
        of others, removed since, go).

        Raises:
            StoreError: the store's write codes.
        """
        now = time.time()
        rows = list(servers)
        with self._db.transaction() as conn:
            if only:
                conn.execute("DELETE FROM replica_mcp_status WHERE replica = ?", (self.me,))
            for row in rows:
                conn.execute(
                    "INSERT OR REPLACE INTO replica_mcp_status (replica, server, status,"
                    " latency_ms, last_error, ts) VALUES (?,?,?,?,?,?)",
                    (self.me, row.server, row.status, row.latency_ms, row.last_error, now))

    def forget(self) -> None:
        """This replica stops: its rows go."""
        self._db.execute("DELETE FROM replica_mcp_status WHERE replica = ?", (self.me,))

    def listing(self) -> list[dict[str, Any]]:
        """Every replica's rows not yet forgotten, by replica then server: ``stale`` when
        the replica stopped writing (or, on this host, its process is gone), ``this`` for
        this process's own."""
        now = time.time()
        out = []
        for row in self._db.query(
                "SELECT replica, server, status, latency_ms, last_error, ts FROM"
                " replica_mcp_status WHERE ts >= ? ORDER BY replica, server",
                (now - FORGOTTEN_S,)):
            name = str(row[0])
            gone = on_this_host(name) and not alive(name)
            out.append({"replica": replica_name(name), "this": name == self.me,
                        "server": row[1], "status": row[2], "latency_ms": row[3],
                        "last_error": row[4], "ts": row[5],
                        "stale": gone or now - float(row[5]) > FRESH_S})
        return out
