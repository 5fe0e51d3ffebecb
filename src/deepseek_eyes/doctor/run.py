"""``deepseek-eyes doctor``: every check in order, each bounded, none stopping the others.

The order is the order of a first use: the settings (nothing else can run without them),
their references, the data directory and its audit chain (before anything opens it), the
upstream and its key, what the final models see, the vision routes, the MCP servers, the
programs the browser, the desktop and the sandbox need, then the gateway's key and port.
A check that raises an unexpected error is itself a failed check naming that error, never
a traceback: doctor is what a person runs when something is already wrong.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.settings import Settings

from . import local, remote
from .report import Check

__all__ = ["DEFAULT_TIMEOUT_S", "DoctorOptions", "run_doctor"]

#: Seconds any one party (the upstream, a route, an MCP server) may take to answer.
DEFAULT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class DoctorOptions:
    config: Path | None = None
    probe: bool = False
    timeout: float = DEFAULT_TIMEOUT_S


def _broken(name: str, exc: BaseException) -> Check:
    if isinstance(exc, DeepSeekEyesError):
        return Check(name, "fail", f"{exc.code}: {exc.message}")
    return Check(name, "fail", f"the check itself failed: {type(exc).__name__}: {exc}",
                 "report this with the output of `deepseek-eyes doctor --json`")


async def _guarded(name: str, work: Callable[[], Awaitable[list[Check]]],
                   bound: float) -> list[Check]:
    try:
        with anyio.fail_after(bound):
            return await work()
    except TimeoutError:
        return [Check(name, "fail", f"no answer within {bound:g}s",
                      "check the network and the endpoints this check names")]
    except Exception as exc:  # each check is isolated: one broken check names itself
        return [_broken(name, exc)]


def _sync(name: str, work: Callable[[], list[Check] | Check]) -> list[Check]:
    try:
        found = work()
    except Exception as exc:  # each check is isolated, as above
        return [_broken(name, exc)]
    return found if isinstance(found, list) else [found]


async def run_doctor(options: DoctorOptions) -> list[Check]:
    """Every check, in order. Raises nothing a check can raise."""
    first, settings, source = local.check_settings(options.config)
    if settings is None:
        return [first]
    checks = [first]
    checks += _sync("env", lambda: local.check_env_references(settings))
    # Before anything opens the data directory (the routes' check creates it): what is
    # checked is what the person has, not what doctor made.
    home = _sync("data.directory", lambda: local.check_data_directory(settings))
    checks += home
    checks += _sync("audit", lambda: local.check_audit(settings))
    checks += await _network_checks(settings, source, options,
                                    writable=all(c.status == "ok" for c in home))
    checks += _sync("chromium", lambda: local.check_chromium(settings))
    checks += _sync("desktop", lambda: local.check_desktop(settings))
    checks += _sync("bubblewrap", lambda: local.check_bubblewrap(settings))
    checks += _sync("gateway.key", lambda: local.check_gateway_key(settings))
    checks += _sync("gateway.port", lambda: local.check_gateway_port(settings, source))
    return checks


async def _network_checks(settings: Settings, source: Path | None,
                          options: DoctorOptions, *, writable: bool) -> list[Check]:
    timeout = options.timeout
    # The probe and the routes' checks make model calls of their own: a wider bound.
    slow = timeout * (6 if options.probe else 3)
    client = remote.final_client(settings, timeout)
    try:
        checks = await _guarded("upstream", lambda: _one(remote.check_upstream(
            settings, client)), timeout * 2)
        checks += await _guarded("sight", lambda: remote.check_sight(
            settings, client, probe=options.probe), slow)
    finally:
        await client.aclose()
    if writable:  # the routes' state lives in the data directory
        checks += await _guarded("routes", lambda: remote.check_routes(
            settings, probe=options.probe, timeout=timeout), slow)
    else:
        checks.append(Check("routes", "warn", "not checked: the data directory is not "
                            "writable", "fix the data directory first"))
    checks += await _guarded("mcp", lambda: remote.check_mcp(
        settings, source, timeout=timeout), timeout * 3)
    return checks


async def _one(work: Awaitable[Check]) -> list[Check]:
    return [await work]
