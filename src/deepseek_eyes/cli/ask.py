"""``deepseek-eyes ask`` and ``deepseek-eyes sessions``.

``ask`` shows its step on a terminal when it takes over a second
(:mod:`deepseek_eyes.cli.progress`): reading the images, waiting for the turn, and each tool
the model calls (the runtime's progress events). Tool activity is also written to standard
error one line an event, as ``chat`` writes it (``· terminal_run…``, ``· approved``,
``· done``), with or without ``--json``: standard output keeps only the answer (or the JSON
object), so a script reading it sees no change. With the terminal among
``[runtime] tool_sources``, a plan that needs approval is shown on the terminal and runs
only on a ``y``; without a terminal (a pipe, a script) nobody can approve, so such a plan
is not run and the model is told so.

``ask --session ID`` on a session another scope made (a gateway client's, or one from
before scopes: docs/security.md, "Scopes") says whose it is and refuses
(``STORE_SESSION_FOREIGN``) unless ``--force``: a gateway client may have planted it under
a name the user would pick. ``sessions list`` and ``sessions show`` show each session's
scope; they show every scope's sessions, since whoever reads the data directory reads
them all anyway."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings, stored_database
from deepseek_eyes.cli.progress import Progress, progress_on_stderr
from deepseek_eyes.cli.repl import describe_event
from deepseek_eyes.errors import StoreError, TurnError
from deepseek_eyes.home import DataHome
from deepseek_eyes.runtime.approval import Approver, Decision, TerminalPrompt
from deepseek_eyes.runtime.messages import image_url_part
from deepseek_eyes.runtime.runtime import Runtime
from deepseek_eyes.runtime.turn import deepseekeyes_json, usage_json
from deepseek_eyes.store import scopes
from deepseek_eyes.store.events import SCOPES_MIGRATION, SessionStore
from deepseek_eyes.vision.intake.decode import ImageLimits, read_image_file

__all__ = ["ask_command", "sessions_group"]


@contextlib.asynccontextmanager
async def open_runtime(ctx: click.Context, *, follow: bool = False) -> AsyncIterator[Runtime]:
    """The runtime on the command's settings; ``follow``: the command follows the settings
    file (``chat``), so MCP starts even with no server enabled (see ``Runtime.start``)."""
    settings = loaded_settings(ctx).settings
    home = DataHome.open(settings)
    runtime = Runtime(settings, home)
    try:
        await runtime.start(follow=follow)  # connects the MCP servers its tools need
        yield runtime
    finally:
        await runtime.aclose()
        home.close()


_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")


def _names_an_image(arg: str) -> bool:
    """Whether the last argument is an image path rather than a question."""
    if any(ch.isspace() for ch in arg):
        return False
    return arg.lower().endswith(_IMAGE_SUFFIXES) or Path(arg).is_file()


class _PromptWithoutProgress:
    """The terminal prompt, with the progress line kept off the terminal meanwhile."""

    via = "cli"

    def __init__(self, prompt: TerminalPrompt, progress: Progress) -> None:
        self._prompt = prompt
        self._progress = progress

    async def decide(self, plan: Mapping[str, Any]) -> Decision:
        with self._progress.hidden():
            return await self._prompt.decide(plan)


def terminal_approver(runtime: Runtime, progress: Progress) -> Approver | None:
    """Who approves a plan (or an ask-first MCP call) that needs it: the person at this
    terminal, else nobody (the plan is then not run and the model is told so; an ask-first
    call waits in the web console's Approvals, if one is served)."""
    asks = runtime.mcp_manager is not None and any(
        s.ask for s in runtime.mcp_manager.settings.servers)
    if (runtime.terminal is None and not asks) or not TerminalPrompt.available():
        return None
    prompt = TerminalPrompt(timeout=runtime.settings.runtime.approval_timeout)
    return _PromptWithoutProgress(prompt, progress)


def _show(progress: Progress, event: Mapping[str, Any]) -> None:
    line = describe_event(event)
    if line is not None:
        with progress.hidden():  # the line is erased first, so the two never share a row
            click.echo(line, err=True)
    if event.get("type") == "tool.started":
        progress.update(f"ask: running {event.get('tool')}…")
    elif event.get("type") == "tool.finished":
        progress.update("ask: waiting for the answer…")


@click.command("ask")
@click.argument("args", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Answer, usage and evidence as JSON.")
@click.option("--session", "session_id", default=None, help="Continue (or start) this session.")
@click.option("--model", default=None, help="Final model (default: llm.model, then /models).")
@click.option("--force", is_flag=True,
              help="Continue a --session that a gateway client (or a version before scopes) "
                   "made.")
@click.pass_context
def ask_command(
    ctx: click.Context, args: tuple[str, ...], as_json: bool, session_id: str | None,
    model: str | None, force: bool,
) -> None:
    """Ask about IMAGE... : deepseek-eyes ask [IMAGE...] "QUESTION"."""
    *images, question = args
    if not question.strip() or _names_an_image(question):
        # `ask photo.png` alone would send the path to the model as the question.
        raise click.UsageError('ask needs a question: deepseek-eyes ask [IMAGE...] "QUESTION"')

    async def run(progress: Progress) -> dict[str, Any]:
        async with open_runtime(ctx) as runtime:
            runtime.check_credentials()
            owner = _owner(runtime.sessions, session_id, force=force)
            limits = ImageLimits.from_settings(runtime.settings.image)
            most = runtime.settings.runtime.max_images_per_turn
            if len(set(images)) > most:  # refused before any file is read
                raise TurnError(f"{len(set(images))} images were given; at most {most} are "
                                "allowed (runtime.max_images_per_turn)",
                                code="RUNTIME_TOO_MANY_IMAGES",
                                details={"images": len(set(images)), "limit": most})
            # All or nothing: a refused third image leaves the first two unstored.
            progress.update(f"ask: reading {len(images)} image(s)…")
            content: list[Mapping[str, Any]] = [
                image_url_part(read_image_file(Path(path), limits)) for path in images]
            content.append({"type": "text", "text": question})
            # The gateway's admission path: the same checks, decoding and store.
            request = await runtime.request_from_openai(
                {"model": model, "messages": [{"role": "user", "content": content}]},
                session_id=session_id, continue_session=True, source="cli",
                approver=terminal_approver(runtime, progress),
                notify=lambda event: _show(progress, event),
            )
            request.scope = owner
            progress.update("ask: waiting for the evidence and the answer…" if images
                            else "ask: waiting for the answer…")
            result = await runtime.run(request)
            extra = {k: v for k, v in (("sight", result.sight),
                                       ("model_renamed", result.model_renamed)) if v}
            return {
                **extra,
                "answer": result.content,
                "session_id": result.session_id,
                "turn_id": result.turn_id,
                "model": result.model,
                "path": result.path,
                "usage": usage_json(result.usage),
                "evidence": result.evidence,
                "rereads": result.rereads,
                "tools": result.tools,
                "provenance": deepseekeyes_json(result)["provenance"],
            }

    with progress_on_stderr(as_json=as_json) as progress:
        out = asyncio.run(run(progress))
    if as_json:
        click.echo(dump_json(out))
    else:
        click.echo(out["answer"])
        click.echo(f"(session {out['session_id']}, {out['path']} turn)", err=True)


def _owner(sessions: SessionStore, session_id: str | None, *, force: bool) -> str:
    """The scope ``ask`` acts in: the CLI's, or with ``--force`` the named session's own.

    Raises:
        StoreError: ``STORE_SESSION_FOREIGN`` for another scope's session without ``force``.
    """
    if session_id is None or not SessionStore.valid_id(session_id):
        return scopes.CLI
    owner = sessions.scope_of(session_id)
    if owner is None or owner == scopes.CLI:
        return scopes.CLI
    if not force:
        made = ("from before scopes, its owner unknown" if owner == scopes.LEGACY
                else f"made by a client of {scopes.label(owner)}")
        raise StoreError(
            f"session {session_id!r} is not this command line's: it was {made}. Its history "
            "may have been written by someone else; pass --force to continue it anyway",
            code="STORE_SESSION_FOREIGN",
            details={"session_id": session_id, "scope": scopes.label(owner)})
    return owner


@click.group("sessions")
def sessions_group() -> None:
    """Inspect stored sessions (append-only event logs)."""


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


@sessions_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--search", default=None, metavar="TEXT",
              help="Only sessions with a message holding TEXT.")
@click.pass_context
def sessions_list(ctx: click.Context, as_json: bool, limit: int, search: str | None) -> None:
    """Sessions, most recently active first: title, turns, model, last activity."""
    with stored_database(ctx) as db:
        rows = SessionStore(db).sessions(limit=limit, search=search) if db is not None else []
    if as_json:
        click.echo(dump_json({"sessions": rows}))
        return
    for row in rows:
        fork = f"  fork of {row['forked_from']}" if row["forked_from"] else ""
        click.echo(f"{row['id']}  {row['title'] or '(no user message)'}")
        click.echo(f"    {row['turns']} turn(s), {row['events']} events, "
                   f"{row['model'] or '-'}, last {_when(row['last_at'])} ({row['source']}, "
                   f"scope {scopes.label(row['scope'])}){fork}")
    if not rows:
        click.echo("(no sessions)" if not search else f"(no session holds {search!r})")


def _describe(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        pieces = []
        for part in content:
            if part.get("type") == "image":
                size = f"{part['width']}x{part['height']}"
                pieces.append(f"[image sha256:{part['sha256'][:12]} {size}]")
            else:
                pieces.append(str(part.get("text", "")))
        text = " ".join(pieces)
    else:
        text = str(content or "")
    calls = message.get("tool_calls") or []
    if calls:
        text += " " + " ".join(f"→ {c['name']}({c['arguments']})" for c in calls)
    return text


@sessions_group.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def sessions_show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """The events and turns of one session."""
    with stored_database(ctx) as db:
        store = SessionStore(db) if db is not None else None
        if store is None or not store.exists(session_id):
            raise StoreError(f"no session {session_id!r}", code="STORE_SESSION_NOT_FOUND")
        events = store.events(session_id)
        turns = store.turns(session_id)
        owner = store.scope_of(session_id) if db is not None and \
            db.schema_version >= SCOPES_MIGRATION else scopes.LEGACY
    # Output of an attempt a later successful attempt replaced: kept, no longer history.
    superseded = {t.details.get("retry_of") for t in turns if t.outcome == "ok"} - {None}
    if as_json:
        click.echo(dump_json({
            "session_id": session_id,
            "scope": owner,
            "events": [
                {"seq": e.seq, "ts": e.ts, "role": e.role, "turn_id": e.turn_id,
                 "body_sha256": e.body_sha256, "message": e.message,
                 "superseded": e.turn_id in superseded}
                for e in events
            ],
            "turns": [t.__dict__ for t in turns],
        }))
        return
    click.echo(f"session {session_id}, scope {scopes.label(owner or scopes.LEGACY)}")
    for event in events:
        mark = " (superseded)" if event.turn_id in superseded else ""
        click.echo(f"{event.seq:>4} {_when(event.ts)} {event.role:<9}"
                   f"{mark} {_describe(event.message)}")
    for turn in turns:
        notes = [turn.code or "", f"retry of {turn.details['retry_of']}"
                 if turn.details.get("retry_of") else "", str(turn.details.get("reason") or "")]
        click.echo(f"turn {turn.id}: {turn.path} {turn.model} {turn.outcome}"
                   + "".join(f" {n}" for n in notes if n))
