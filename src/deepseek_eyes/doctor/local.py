"""The doctor's checks that ask nothing of the network: the settings and their ``{ env }``
references, the data directory and its audit chain, the gateway's key and port, and the
programs the browser, the desktop and the terminal's sandbox need.

Each check reuses the rule the part it checks applies when it runs (the gateway's key rule,
the browser's Chromium search, the desktop's program list, the sandbox's bwrap probe), so
that doctor and the command it predicts cannot disagree.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from pathlib import Path

from deepseek_eyes.errors import DeepSeekEyesError
from deepseek_eyes.serving.tokens import TOKEN_COMMAND
from deepseek_eyes.settings import Settings, data_home, load_settings
from deepseek_eyes.settings.base import is_loopback_host
from deepseek_eyes.settings.references import env_references

from .report import Check, Status

__all__ = [
    "check_audit",
    "check_bubblewrap",
    "check_chromium",
    "check_data_directory",
    "check_desktop",
    "check_env_references",
    "check_gateway_key",
    "check_gateway_port",
    "check_settings",
]


def check_settings(config: Path | None) -> tuple[Check, Settings | None, Path | None]:
    """Load the settings as every command would; the other checks need them."""
    try:
        loaded = load_settings(config)
    except DeepSeekEyesError as exc:
        errors = exc.details.get("errors") or []
        first = "; ".join(f"{e.get('path')}: {e.get('message')}" for e in errors[:3]
                          if isinstance(e, dict))
        detail = f"{exc.code}: {exc.message}" + (f" ({first})" if first else "")
        return (Check("settings", "fail", detail,
                      "correct the file (`deepseek-eyes config check` lists every error)"),
                None, None)
    where = str(loaded.source) if loaded.source else "no settings file; the built-in defaults"
    return Check("settings", "ok", f"{where}: valid"), loaded.settings, loaded.source


def check_env_references(settings: Settings) -> list[Check]:
    """One check per ``{ env = … }`` reference: set, or unset with the variable to export.

    The final model's key unset fails (every turn would); the gateway's unset is the key
    check's to judge; another reference unset fails, except under a disabled MCP server,
    which never connects (a warning)."""
    out: list[Check] = []
    for ref in env_references(settings, named_only=False):
        where = ref.path
        if where == "gateway.api_key":
            continue
        name = f"env:{where}"
        if os.environ.get(ref.env):
            out.append(Check(name, "ok", f"{ref.env} is set"))
            continue
        fix = f"export {ref.env}=…"
        if where == "llm.api_key":
            fix += " (or set llm.api_key = false for an endpoint that takes no key)"
        status: Status = "warn" if _disabled_server(settings, where) else "fail"
        out.append(Check(name, status, f"{ref.env} is not set", fix))
    return out


def _disabled_server(settings: Settings, where: str) -> bool:
    if not where.startswith("mcp.servers["):
        return False
    index = int(where[len("mcp.servers["):].split("]", 1)[0])
    server = settings.mcp.servers[index]
    return not (settings.mcp.enabled and server.enabled)


def check_gateway_key(settings: Settings) -> Check:
    """The gateway's key by the rule ``serve`` applies: strong, and present wherever the
    gateway offers tools that act on this machine or listens beyond it."""
    from deepseek_eyes.gateway.server import check_key, gateway_key
    from deepseek_eyes.serving.tokens import token_strength

    gateway = settings.gateway
    key = gateway_key(settings)
    fix = f"export {gateway.api_key.env}=$({TOKEN_COMMAND})" if gateway.api_key else (
        f'set gateway.api_key = {{ env = "DEEPSEEK_EYES_GATEWAY_KEY" }} and export it '
        f"(`{TOKEN_COMMAND}` makes one)")
    if key is None and not is_loopback_host(gateway.host):
        return Check("gateway.key", "fail",
                     f"no key, and gateway.host {gateway.host} is not loopback: serve refuses",
                     fix)
    try:
        warning = check_key(settings, key)
    except DeepSeekEyesError as exc:
        return Check("gateway.key", "fail", f"{exc.code}: {exc.message}", fix)
    if warning is not None:
        return Check("gateway.key", "warn", warning, fix)
    if key is None:  # check_key warns when there is none; kept for the type checker
        return Check("gateway.key", "warn", "no gateway key", fix)
    strength = token_strength(key)
    return Check("gateway.key", "ok",
                 f"strong ({len(key)} characters, about {strength.estimated_bits} bits)")


def check_gateway_port(settings: Settings, source: Path | None) -> Check:
    """The gateway's port: free, or held by the gateway running for this settings file
    (asked over its control API)."""
    from deepseek_eyes.gateway.control_client import running_gateway

    host, port = settings.gateway.host, settings.gateway.port
    where = f"{host}:{port}"
    gateway = running_gateway(data_home(settings), source)
    if gateway is not None:
        try:
            servers = gateway.request("GET", "/control/status").get("servers", [])
        except DeepSeekEyesError as exc:
            return Check("gateway.port", "fail",
                         f"a gateway runs for this file but does not answer ({exc.code})",
                         "restart it: stop `deepseek-eyes serve` and start it again")
        return Check("gateway.port", "ok", f"the gateway runs for this file on "
                     f"{gateway.host}:{gateway.port} and answers ({len(servers)} MCP "
                     "server(s))")
    if port == 0:
        return Check("gateway.port", "ok", "gateway.port = 0: the system picks a free one")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
    except OSError as exc:
        return Check("gateway.port", "fail", f"gateway.host {host} does not resolve: {exc}",
                     "set gateway.host to 127.0.0.1 or an address of this machine")
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as serve's does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return Check("gateway.port", "fail",
                             f"{where} is in use by another program (no gateway runs for this "
                             "settings file)",
                             "stop the program holding it, or set gateway.port "
                             "(or serve --port)")
            return Check("gateway.port", "fail", f"cannot listen on {where}: {exc.strerror}",
                         "set gateway.host and gateway.port to an address of this machine")
    return Check("gateway.port", "ok", f"{where} is free")


def check_data_directory(settings: Settings) -> Check:
    """The data directory exists and takes a file, or the nearest existing parent would
    let it be created."""
    root = data_home(settings)
    fix = (f"make {root} writable by this user, or point DEEPSEEK_EYES_HOME (or "
           "storage.home) elsewhere")
    if not root.exists():
        parent = next((p for p in root.parents if p.exists()), None)
        if parent is not None and parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
            return Check("data.directory", "ok", f"{root} does not exist yet; it will be "
                         "created on first use")
        return Check("data.directory", "fail", f"{root} cannot be created ({parent} is not "
                     "writable)", fix)
    if not root.is_dir():
        return Check("data.directory", "fail", f"{root} is not a directory", fix)
    try:
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("data.directory", "fail", f"{root} is not writable: {exc.strerror}", fix)
    return Check("data.directory", "ok", f"{root} is writable")


def check_audit(settings: Settings) -> Check:
    """``audit verify`` on the data directory's chain: read-only, never creates a key."""
    from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
    from deepseek_eyes.audit.verify import verify_path

    root = data_home(settings)
    try:
        url = settings.store.url()  # the store's PostgreSQL database, when it is there
        report = verify_path(root / "eyes.db", AuditKeyring.read_only(audit_directory(root)),
                             url=url, password=settings.store.password() if url else None)
    except DeepSeekEyesError as exc:
        return Check("audit", "fail", f"{exc.code}: {exc.message}",
                     "run `deepseek-eyes audit verify` (docs/audit.md says what each code "
                     "means)")
    view = report.as_json()
    problem = report.problem
    if problem is not None:
        where = f"entry {problem.seq}" if problem.seq is not None else "outside the chain"
        return Check("audit", "fail", f"{problem.code} at {where}: {problem.reason}",
                     "run `deepseek-eyes audit verify` and keep the data directory for "
                     "inspection (docs/audit.md)")
    return Check("audit", "ok", f"the chain is intact ({view['entries']} entries)")


def check_chromium(settings: Settings) -> Check:
    from deepseek_eyes.browser.session import find_chromium
    from deepseek_eyes.errors import FIX_CHROMIUM

    try:
        found = find_chromium(settings.browser)
    except DeepSeekEyesError as exc:
        status: Status = "fail" if "browser" in settings.runtime.tool_sources else "warn"
        return Check("chromium", status, f"{exc.code}: {exc.message}", FIX_CHROMIUM)
    return Check("chromium", "ok", found)


def check_desktop(settings: Settings) -> Check:
    from deepseek_eyes.desktop.headless import missing_programs

    missing = missing_programs()
    python = settings.desktop.python
    if not os.access(python, os.X_OK):
        missing.append(str(python))
    if not missing:
        return Check("desktop", "ok", "Xvfb, D-Bus and the AT-SPI bus launcher are present")
    status: Status = "fail" if "desktop" in settings.runtime.tool_sources else "warn"
    return Check("desktop", status, f"missing: {', '.join(missing)}",
                 "sudo apt-get install xvfb dbus-x11 at-spi2-core python3-gi "
                 "gir1.2-atspi-2.0 python3-xlib (or set desktop.python)")


def check_bubblewrap(settings: Settings) -> Check:
    from deepseek_eyes.terminal.execution.sandbox import bwrap_available

    found = bwrap_available()
    if found is not None:
        return Check("bubblewrap", "ok", f"{found} builds a sandbox here")
    return Check("bubblewrap", "warn", "bwrap is missing or cannot build a sandbox here: "
                 "terminal commands would run unconfined"
                 + (" (the terminal is a tool source)"
                    if "terminal" in settings.runtime.tool_sources else ""),
                 "sudo apt-get install bubblewrap (and allow unprivileged user namespaces)")
