"""Per-route health, probe and circuit state, shared across processes through SQLite.

The CLI is one process per command, so a probe passed a minute ago or a circuit opened by
the last run must survive the process; a gateway shares the same rows. State is keyed by
route name and the route's fingerprint, so pointing a route at another model or URL starts
it afresh instead of inheriting a probe it never passed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from deepseek_eyes.store.db import Database

__all__ = ["RouteState", "RouteStateStore"]


@dataclass(frozen=True)
class RouteState:
    """A route's health, probe verdict and circuit, as stored."""

    route: str
    fingerprint: str
    health_ok: bool | None = None
    health_at: float | None = None
    health_code: str | None = None
    probe_ok: bool | None = None
    probe_at: float | None = None
    probe_code: str | None = None
    circuit_open_until: float | None = None
    last_code: str | None = None

    def health_fresh(self, now: float, ttl: float) -> bool:
        return self.health_ok is True and self.health_at is not None and now - self.health_at < ttl

    def probe_fresh(self, now: float, ttl: float) -> bool:
        return self.probe_ok is not None and self.probe_at is not None and now - self.probe_at < ttl

    def circuit_open(self, now: float) -> bool:
        return self.circuit_open_until is not None and now < self.circuit_open_until


def _opt_bool(value: object) -> bool | None:
    return None if value is None else bool(value)


class RouteStateStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, route: str, fingerprint: str) -> RouteState:
        row = self._db.query_one(
            "SELECT * FROM route_state WHERE route = ? AND fingerprint = ?", (route, fingerprint)
        )
        if row is None:
            return RouteState(route, fingerprint)
        return RouteState(
            route=route,
            fingerprint=fingerprint,
            health_ok=_opt_bool(row["health_ok"]),
            health_at=row["health_at"],
            health_code=row["health_code"],
            probe_ok=_opt_bool(row["probe_ok"]),
            probe_at=row["probe_at"],
            probe_code=row["probe_code"],
            circuit_open_until=row["circuit_open_until"],
            last_code=row["last_code"],
        )

    def save(self, state: RouteState) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO route_state (route, fingerprint, health_ok, health_at,"
            " health_code, probe_ok, probe_at, probe_code, circuit_open_until, last_code)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                state.route, state.fingerprint,
                None if state.health_ok is None else int(state.health_ok),
                state.health_at, state.health_code,
                None if state.probe_ok is None else int(state.probe_ok),
                state.probe_at, state.probe_code, state.circuit_open_until, state.last_code,
            ),
        )

    def update(self, route: str, fingerprint: str, **changes: object) -> RouteState:
        state = replace(self.get(route, fingerprint), **changes)  # type: ignore[arg-type]
        self.save(state)
        return state
