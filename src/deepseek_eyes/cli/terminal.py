"""``deepseek-eyes terminal …``: serve the terminal MCP server, plan without running,
verify receipts, rotate receipt keys, make a token. Thin: the work is in
:mod:`deepseek_eyes.terminal`.

``serve --json`` describes the server as one object, ``{"transport", "mode", "workspaces",
"sandbox"}`` plus ``"approvals"`` and ``"listening": {"host", "port", "url", "console"}`` over
HTTP, printed once the socket is bound. Over HTTP the console's one-time login link follows
on standard error (``terminal: console login (one use): URL#login=CODE``; with ``--json``
the first is ``listening.console_login`` and later ones are ``{"console_login"}`` lines),
and a new one each time one is used: the person's credential, separate from the MCP token.
With ``--stdio``, standard output *is* the MCP channel, and a line that is not JSON-RPC
there would break the client, so the object goes to standard error instead and nothing but
the protocol ever reaches standard output.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from deepseek_eyes.cli.common import (
    dump_json,
    ensure_can_listen,
    listening,
    loaded_settings,
    serve_http,
)
from deepseek_eyes.errors import ReceiptError
from deepseek_eyes.home import DataHome
from deepseek_eyes.terminal.config import (
    build_service,
    load_keyring,
    resolve_token,
    resolve_workspace,
    terminal_dir,
)
from deepseek_eyes.terminal.policy.engine import MODES, PolicyEngine
from deepseek_eyes.terminal.receipts.chain import (
    HEAD_FILENAME,
    ReceiptLog,
    load_head,
    parse_receipts,
    read_log,
    snapshot_head,
    verify_chain,
    verify_receipt,
)

__all__ = ["terminal_group"]

_workspace_option = click.option(
    "--workspace", "workspaces", multiple=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Workspace root (repeatable; default: the working directory or terminal.workspaces).",
)
_mode_option = click.option("--mode", type=click.Choice(MODES), default=None,
                            help="Policy mode (default: terminal.mode).")
_json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@click.group("terminal")
def terminal_group() -> None:
    """The terminal MCP server: plan, approve, execute, with signed receipts."""


@terminal_group.command("serve")
@click.option("--stdio", "transport", flag_value="stdio", help="JSON-RPC over stdin/stdout.")
@click.option("--http", "transport", flag_value="http", help="Streamable HTTP at /mcp.")
@click.option("--host", default=None, help="HTTP bind address (default: terminal.host).")
@click.option("--port", type=int, default=None, help="HTTP port (default: terminal.port).")
@click.option("--advisor", is_flag=True,
              help="Offer terminal_advise, backed by the [llm] model (advisory text only).")
@click.option("--json", "as_json", is_flag=True,
              help="Describe the server as one JSON object once it listens (on standard "
                   "error with --stdio, whose standard output is the protocol).")
@_workspace_option
@_mode_option
@click.pass_context
def serve_command(
    ctx: click.Context, transport: str | None, host: str | None, port: int | None,
    advisor: bool, as_json: bool, workspaces: tuple[Path, ...], mode: str | None,
) -> None:
    """Serve over stdio or HTTP. HTTP refuses to start without a strong bearer token."""
    if transport is None:
        raise click.UsageError("choose --stdio or --http")
    settings = loaded_settings(ctx).settings
    token = resolve_token(settings) if transport == "http" else None
    with DataHome.open(settings) as home:
        service = build_service(settings, workspaces=list(workspaces), mode=mode,
                                audit=home.audit, token=token)
        helper = _advisor(settings) if advisor else None
        described = {
            "transport": transport, "mode": service.config.mode,
            "workspaces": list(service.config.workspace.roots),
            "sandbox": "bwrap" if service.config.sandbox else None,
        }
        if not as_json:
            roots = ", ".join(service.config.workspace.roots)
            sandbox = "bwrap" if service.config.sandbox else "none (see README)"
            click.echo(f"terminal: mode {service.config.mode}; workspace {roots}; "
                       f"sandbox {sandbox}", err=True)
        if transport == "stdio":
            if as_json:
                click.echo(dump_json({**described, "approvals": service.config.approvals}),
                           err=True)
            elif service.config.approvals == "person":
                click.echo("terminal: over stdio there is no approval console, so a plan that "
                           "needs approval cannot run (serve --http for the console)", err=True)
            from deepseek_eyes.serving import loop

            loop.run(_serve_stdio(service, helper))
            return

        from deepseek_eyes.terminal.transport.console_login import ConsoleLogins, login_url
        from deepseek_eyes.terminal.transport.http import HttpOptions, build_http_app

        term = settings.terminal
        options = HttpOptions.from_settings(term, token or "", host)
        console: dict[str, str] = {}

        def show_code(code: str) -> None:
            # The console's own credential, for the person who started the server: every
            # code works once, and a new one is printed when one is used. With --json the
            # first is in the object, later ones are JSON lines on standard error.
            link = login_url(console["url"], code)
            if as_json and "first" not in console:
                console["first"] = link
            elif as_json:
                click.echo(dump_json({"console_login": link}), err=True)
            else:
                click.echo(f"terminal: console login (one use): {link}", err=True)

        logins = ConsoleLogins(show_code)
        app = build_http_app(service, options, helper, logins=logins)
        bind_port = term.port if port is None else port
        ensure_can_listen(options.host, bind_port)

        def announce(bound_host: str, bound_port: int) -> None:
            where = listening(bound_host, bound_port, "/mcp")
            where["console"] = console["url"] = listening(
                bound_host, bound_port, "/console/")["url"]
            if as_json:
                logins.issue()
                where["console_login"] = console["first"]
                click.echo(dump_json({**described, "approvals": service.config.approvals,
                                      "listening": where}))
            else:
                click.echo(f"terminal: MCP at {where['url']}, console at {where['console']}; "
                           f"approvals: {service.config.approvals}", err=True)
                logins.issue()

        serve_http(app, options.host, bind_port, announce)


async def _serve_stdio(service: Any, helper: Any) -> None:
    from deepseek_eyes.serving.stdio import run_stdio
    from deepseek_eyes.terminal.transport.server import build_mcp_server

    try:
        await run_stdio(build_mcp_server(service, helper))
    finally:
        await service.aclose()


def _advisor(settings: Any) -> Any:
    from deepseek_eyes.cli.terminal_advisor import DeepSeekAdvisor

    return DeepSeekAdvisor.from_settings(settings)


@terminal_group.command("plan")
@click.option("--command", "command", default=None,
              help="A command string (parsed without shell semantics) instead of ARGV.")
@click.option("--cwd", default=None, help="Working directory (default: the first workspace).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@_workspace_option
@_mode_option
@click.argument("argv", nargs=-1)
@click.pass_context
def plan_command(
    ctx: click.Context, command: str | None, cwd: str | None, as_json: bool,
    workspaces: tuple[Path, ...], mode: str | None, argv: tuple[str, ...],
) -> None:
    """Judge ARGV (after --) or --command without running it. Exit 0 when allowed."""
    if bool(argv) == (command is not None):
        raise click.UsageError("give ARGV after -- or --command, not both")
    settings = loaded_settings(ctx).settings
    engine = PolicyEngine(resolve_workspace(list(workspaces) or list(settings.terminal.workspaces),
                                            settings),
                          mode or settings.terminal.mode)  # type: ignore[arg-type]
    result = engine.evaluate(argv=list(argv) if argv else None, command=command, cwd=cwd)
    decision = result.decision
    if as_json:
        click.echo(dump_json({
            "argv": list(result.argv), "display": result.display,
            "decision": decision.to_dict(),
            "resolution": result.resolution.to_dict() if result.resolution else None,
        }))
    else:
        verdict = ("refused" if not decision.allowed else
                   "needs approval" if decision.requires_approval else "allowed")
        click.echo(f"{verdict} ({decision.mode}, risk {decision.risk}): {result.display}")
        for reason in decision.reasons:
            click.echo(f"  - {reason}")
    sys.exit(0 if decision.allowed else 1)


@terminal_group.group("receipts")
def receipts_group() -> None:
    """Check signed receipts and share exports."""


_head_file = click.Path(path_type=Path, dir_okay=False, exists=True)


@receipts_group.command("verify")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--chain", is_flag=True,
              help="Also check the links, and that the chain starts at sequence 1.")
@click.option("--head", "head_file", type=_head_file, default=None,
              help="A head file (the log's head.jsonl, or a copy taken with it): the log must "
                   "end exactly at the receipt its newest head names. Implies --chain.")
@click.option("--pinned", "pinned_files", type=_head_file, multiple=True,
              help="A head file exported earlier (`receipts head`; repeatable): the receipt "
                   "it names must still be in the chain, later ones are allowed. Implies "
                   "--chain.")
@_json_option
@click.pass_context
def verify_command(
    ctx: click.Context, file: Path, chain: bool, head_file: Path | None,
    pinned_files: tuple[Path, ...], as_json: bool,
) -> None:
    """Verify FILE: one receipt (or export), a JSON list of them, or JSON lines.

    With --chain, FILE must be a whole chain from sequence 1. Heads are read before FILE, so
    a live log that grows meanwhile is never taken for a cut one (but with --head, a receipt
    appended in between reads as a stale head: use --pinned on a live log).
    """
    keyring = load_keyring(loaded_settings(ctx).settings)
    head = load_head(head_file, keyring) if head_file else None
    pins = [load_head(path, keyring) for path in pinned_files]
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReceiptError(f"{file} is not UTF-8 text") from exc
    items = parse_receipts(text)
    chain = chain or head is not None or bool(pins)
    if chain:
        verify_chain(items, keyring, head=head, pinned=pins)
    else:
        for item in items:
            verify_receipt(item, keyring)
    kinds = sum(1 for i in items if isinstance(i, dict) and i.get("sharing_redacted"))
    if as_json:
        click.echo(dump_json({
            "valid": True, "file": str(file), "receipts": len(items), "share_exports": kinds,
            "chain": chain,
            "head": None if head is None else {"sequence": head["sequence"],
                                               "written_at": head["written_at"]},
            "pinned": [pin["sequence"] for pin in pins],
        }))
        return
    summary = f"{file}: {len(items)} valid ({kinds} share export(s))"
    if chain:
        summary += (f", chain intact from sequence 1 to {len(items)}" if items
                    else ", chain intact (empty)")
        if head is not None:
            summary += f", ends at its signed head (written {head['written_at']})"
        else:
            summary += " (its end is not checked without --head)"
        for pin in pins:
            summary += f", pinned head {pin['sequence']} present"
    click.echo(summary)


@receipts_group.command("head")
@click.option("--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the head file here (default: standard output).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the head as JSON; without --output, its file's text is in \"file\".")
@click.pass_context
def head_command(ctx: click.Context, output: Path | None, as_json: bool) -> None:
    """Export the head of this data directory's receipt log, to keep elsewhere.

    The head and the whole chain behind it are verified first. Later, `receipts verify
    --pinned FILE LOG` shows that the receipts it covers are all still there.

    With --json, standard output holds one object, {"head", "output", "file"}; without
    --output, "file" is the head file's text (`jq -j .file` writes it back).
    """
    settings = loaded_settings(ctx).settings
    directory = terminal_dir(settings) / "receipts"
    keyring = load_keyring(settings)
    head, data = snapshot_head(directory / HEAD_FILENAME, keyring)
    receipts = read_log(directory / ReceiptLog.FILENAME)  # read after the head: it only grows
    verify_chain(receipts, keyring, pinned=[head])
    if output is not None:
        output.write_bytes(data)
    if as_json:
        click.echo(dump_json({
            "head": head, "output": None if output is None else str(output),
            "file": data.decode("utf-8") if output is None else None,
        }))
        return
    if output is None:
        click.echo(data.decode("utf-8"), nl=False)
    click.echo(f"head {head['sequence']} ({head['last_hash'] or 'no receipts yet'}, written "
               f"{head['written_at']}): chain intact", err=True)


@terminal_group.group("keys")
def keys_group() -> None:
    """The receipt keyring (ids only; keys never leave the keyring)."""


def _key_ids(ids: list[str]) -> dict[str, Any]:
    return {"keys": [{"id": kid, "signs": i == 0} for i, kid in enumerate(ids)]}


@keys_group.command("list")
@_json_option
@click.pass_context
def keys_list(ctx: click.Context, as_json: bool) -> None:
    """The receipt key ids, the signing key first."""
    ids = load_keyring(loaded_settings(ctx).settings).ids()
    if as_json:
        click.echo(dump_json(_key_ids(ids)))
        return
    for i, kid in enumerate(ids):
        click.echo(f"{kid}{'  (signs)' if i == 0 else ''}")


@keys_group.command("rotate")
@_json_option
@click.pass_context
def keys_rotate(ctx: click.Context, as_json: bool) -> None:
    """Add a fresh signing key; older keys keep verifying old receipts."""
    keyring = load_keyring(loaded_settings(ctx).settings)
    kid = keyring.rotate()
    click.echo(dump_json({"rotated": kid, **_key_ids(keyring.ids())}) if as_json else kid)


@terminal_group.command("token")
@_json_option
def token_command(as_json: bool) -> None:
    """Print a fresh 256-bit bearer token for DEEPSEEK_EYES_TERMINAL_TOKEN (as
    `deepseek-eyes token` does)."""
    from deepseek_eyes.cli.token import new_token

    token = new_token()
    click.echo(dump_json({"token": token}) if as_json else token)
