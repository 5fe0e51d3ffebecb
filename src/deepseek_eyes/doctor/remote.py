"""The doctor's checks that ask something of another party, each under a short bound: the
upstream (a real ``GET /models`` with the key), what each final model is known to see, the
vision routes, and the MCP servers.

Nothing here probes a model unless asked (``--probe``): a probe is a billed call. Without
it the sight check reports where each verdict comes from (the settings, a verdict learned
on this upstream, or the priors not yet confirmed) from the data directory opened read-only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from deepseek_eyes.errors import DeepSeekEyesError, LLMError
from deepseek_eyes.llm.catalog import ModelCatalog
from deepseek_eyes.llm.client import ChatClient
from deepseek_eyes.llm.retry import RetryPolicy
from deepseek_eyes.runtime.sight import SightStore, SightVerdict
from deepseek_eyes.settings import Settings, data_home

from .report import Check

__all__ = ["check_mcp", "check_routes", "check_sight", "check_upstream", "final_client"]


def final_client(settings: Settings, timeout: float) -> ChatClient:
    """The final model's client, with ``timeout`` and no retry: doctor wants the answer now.
    An unset key sends none (the upstream then says whether it needs one)."""
    llm = settings.llm
    key = llm.api_key.resolve() if llm.api_key is not None and llm.api_key.is_set() else None
    return ChatClient(llm.base_url, api_key=key, timeout=timeout,
                      connect_timeout=min(timeout, llm.connect_timeout),
                      retry=RetryPolicy(max_retries=0), base_url_source=llm.base_url_source)


async def check_upstream(settings: Settings, client: ChatClient) -> Check:
    """A real ``GET /models`` against ``llm.base_url``: reachable, and the key accepted."""
    llm = settings.llm
    try:
        listed = await client.list_models()
    except LLMError as exc:
        status = exc.details.get("status")
        if status in (401, 403):
            env = llm.api_key.env if llm.api_key is not None else None
            unset = llm.api_key is not None and not llm.api_key.is_set()
            said = "no key was sent" if unset else "the key was refused"
            return Check("upstream", "fail", f"{client.base_url} answered {status}: {said}",
                         f"export {env}=… with a valid key" if env else
                         'set llm.api_key = { env = "NAME" } and export NAME')
        return Check("upstream", "fail", f"{exc.code}: {exc.message}",
                     "check the network, or point llm.base_url (or DEEPSEEK_BASE_URL) at "
                     "a reachable endpoint")
    return Check("upstream", "ok", f"{client.base_url} answered /models ({len(listed)} "
                 "model(s)); the key is accepted")


def _when(stamp: float | None) -> str:
    return "-" if stamp is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _learned(settings: Settings, upstream: str, model: str) -> SightVerdict | None:
    """A learned verdict that has not expired, read from the database opened read-only."""
    from deepseek_eyes.store.db import Database

    path = data_home(settings) / "eyes.db"
    url = settings.store.url()
    if url is None and not path.exists():
        return None
    db = Database.open_read_only(path, url=url,
                                 password=settings.store.password() if url else None)
    try:
        found = SightStore(db).get(upstream, model)
    except Exception:  # an older schema without the table: nothing was learned
        return None
    finally:
        db.close()
    if found is None or (found.expires_at or 0) <= time.time():
        return None
    return found


async def check_sight(settings: Settings, client: ChatClient, *, probe: bool) -> list[Check]:
    """One check per final model (the settings' models and the default): whether it sees
    and how that is known. ``probe`` asks the pixel probe now and keeps the verdict."""
    from deepseek_eyes.llm.known import known_model

    llm = settings.llm
    catalog = ModelCatalog(llm, client)
    try:
        default = await catalog.default_model()
    except LLMError as exc:
        # The upstream check names the cause; chat would fail the same way.
        return [Check("sight", "fail", f"no final model is known: {exc.code}",
                      "set llm.model, or make the upstream reachable (see the upstream "
                      "check)")]
    models = list(dict.fromkeys([default, *(m.id for m in llm.models)]))
    upstream = llm.base_url.rstrip("/")  # as Sight keys its verdicts
    probed: dict[str, SightVerdict | None] = {}
    if probe:
        probed = await _probe(settings, client, catalog, models)
    out: list[Check] = []
    for model in models:
        entry = llm.model_settings(model)
        verdict: SightVerdict | None = None
        if entry is not None and "input" in entry.model_fields_set:
            verdict = SightVerdict(model, "image" in entry.input, "settings")
        verdict = verdict or probed.get(model) or _learned(settings, upstream, model)
        name = f"sight:{model}"
        if verdict is not None:
            sees = "sees" if verdict.sees else "does not see"
            when = (f", checked {_when(verdict.checked_at)}, until {_when(verdict.expires_at)}"
                    if verdict.checked_at else "")
            code = f" ({verdict.code})" if verdict.code else ""
            out.append(Check(name, "ok", f"{sees}{code}; from {verdict.how}{when}"))
            continue
        info = await catalog.get(model)
        if info is not None and info.listing_image is not None:
            prior, how = info.listing_image, "the upstream's /models"
        elif (known := known_model(model)) is not None:
            prior, how = known.sees, "the known-models table"
        else:
            prior, how = False, "nothing (an unknown model)"
        sees = "sees" if prior else "does not see"
        fix = (f"`deepseek-eyes doctor --probe` (or `models --probe {model}`) asks it now"
               if llm.sight_probe or probe else
               f"set [[llm.models]] id = \"{model}\" with its input, or turn "
               "llm.sight_probe on")
        if probe and model in probed:
            fix = "the probe got no answer; see the upstream check"
        out.append(Check(name, "warn", f"{sees} by the priors ({how}), not confirmed on "
                         "this upstream", fix))
    return out


async def _probe(settings: Settings, client: ChatClient, catalog: ModelCatalog,
                 models: list[str]) -> dict[str, SightVerdict | None]:
    """The pixel probe of each model, kept in the data directory as a turn's would be."""
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.runtime.sight import Sight

    home = DataHome.open(settings)
    try:
        sight = Sight(settings.llm, catalog=catalog, client=client, db=home.db,
                      usage=home.usage, audit=home.audit)
        return {model: await sight.probe(model) for model in models
                if sight.configured(model) is None}
    finally:
        home.close()


async def check_routes(settings: Settings, *, probe: bool, timeout: float) -> list[Check]:
    """Each vision route's health, circuit and probe state (``routes``); ``probe`` checks
    and probes every route now."""
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.vision.bridge import VisionBridge

    home = DataHome.open(settings)
    bridge = VisionBridge(settings, home)
    try:
        reports: dict[str, Any] = {}
        with anyio.move_on_after(timeout):
            await bridge.router.refresh_routes()
        if probe:
            with anyio.move_on_after(timeout * 4):
                reports = {r["name"]: r for r in await bridge.router.probe_all()}
        status = bridge.router.status()
    finally:
        await bridge.aclose()
        home.close()
    out: list[Check] = []
    for route in status:
        name = f"route:{route['name']}"
        words = [f"health {route['health']}", f"circuit {route['circuit']}",
                 f"probe {route['probe']}"]
        if route["order"] is None:
            out.append(Check(name, "ok", "not in the route order; " + ", ".join(words)))
            continue
        bad = (route["health"] == "failed" or route["circuit"] == "open"
               or route["probe"] == "failed")
        report = reports.get(route["name"])
        if report is not None and not report["ok"]:
            bad = True
            words.append(f"probe now: {report['code']}")
        code = route["health_code"] or route["last_code"]
        if code:
            words.append(code)
        if bad:
            out.append(Check(name, "warn", ", ".join(words),
                             f"`deepseek-eyes routes --probe` shows why; check vision.routes "
                             f"{route['name']!r} (its base_url, model and key)"))
        elif route["health"] in ("unknown", "stale") or route["probe"] in ("untested",
                                                                             "expired"):
            out.append(Check(name, "ok", ", ".join(words)
                             + " (not checked lately; `doctor --probe` checks now)"))
        else:
            out.append(Check(name, "ok", ", ".join(words)))
    ordered = [c for c, r in zip(out, status, strict=True) if r["order"] is not None]
    if ordered and all(c.status == "warn" for c in ordered):
        out = [Check(c.check, "fail", c.detail, c.fix) if c in ordered else c for c in out]
    return out


async def check_mcp(settings: Settings, source: Path | None, *, timeout: float
                    ) -> list[Check]:
    """Each configured MCP server's status: the running gateway's, when one runs for this
    settings file; else each enabled server connected and listed within ``timeout``, then
    closed."""
    mcp = settings.mcp
    if not mcp.servers:
        return [Check("mcp", "ok", "no MCP servers are configured")]
    from deepseek_eyes.gateway.control_client import running_gateway

    gateway = running_gateway(data_home(settings), source)
    if gateway is not None:
        try:
            rows: list[dict[str, Any]] = await anyio.to_thread.run_sync(
                lambda: gateway.request("GET", "/control/status")["servers"])
        except DeepSeekEyesError as exc:
            return [Check("mcp", "fail", f"the running gateway did not answer ({exc.code})",
                          "restart `deepseek-eyes serve`")]
    else:
        rows = await _connect_each(settings, timeout)
    return [_server_check(row, timeout) for row in rows]


async def _connect_each(settings: Settings, timeout: float) -> list[dict[str, Any]]:
    from deepseek_eyes.mcp_host.manager import McpManager
    from deepseek_eyes.mcp_host.stderr_log import server_log_dir
    from deepseek_eyes.mcp_host.tokens import set_token_root, token_root

    root = data_home(settings)
    set_token_root(token_root(root))
    manager = McpManager(settings.mcp, log_dir=server_log_dir(root))
    try:
        await manager.start(wait=timeout)
        return manager.status()
    finally:
        with anyio.move_on_after(timeout, shield=True):
            await manager.stop()


def _server_check(row: dict[str, Any], timeout: float) -> Check:
    name = f"mcp:{row['id']}"
    status = row["status"]
    if status == "ready":
        return Check(name, "ok", f"ready, {row.get('tools', 0)} tool(s)")
    if status == "disabled":
        return Check(name, "ok", "disabled")
    if status == "failed":
        error = row.get("last_error") or row.get("error") or "failed"
        missing = row.get("missing_env")
        fix = (f"export {missing}=…" if missing else
               f"`deepseek-eyes mcp probe {row['id']}` shows the failure; its stderr log "
               "is in the data directory's logs/mcp")
        return Check(name, "fail", f"failed: {error}" + (f" ({missing} unset)" if missing
                                                          else ""), fix)
    return Check(name, "warn", f"{status} after {timeout:g}s (not ready yet)",
                 f"`deepseek-eyes mcp probe {row['id']}` waits longer")
