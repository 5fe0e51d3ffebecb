"""``deepseek-eyes chat``: an interactive conversation over the runtime, one line a message.

Each line is a message to the model, or a command (``/image PATH``, ``/tools``, ``/usage``,
``/session [new]``, ``/help``, ``/exit``). Every turn runs through the same runtime and turn
code as ``ask`` and the gateway, and the session log is the conversation's memory: a turn
sends the stored history plus the new message, exactly as ``ask --session`` does, so
``chat --session ID`` resumes a conversation and ``ask`` and ``chat`` share sessions.

Decisions a newcomer would otherwise undo:

* **The event loop runs in a thread of its own; the main thread reads the lines**
  (:func:`converse`). The runtime holds live MCP connections and the terminal's reaper,
  which a loop stopped at a blocking ``input()`` would starve; and readline's line editing,
  with Ctrl-C at the prompt dropping the line, works only in the main thread, where Python
  handles signals. Lines are read between turns and never ahead, so an approval prompt on
  the terminal gets the person's answer, not the reader. Everything that touches the
  runtime (its database connection included) runs on the loop.
* **Tool events are shown from the turn's ``notify`` callback**, not from the stream's
  event chunks: the callback runs before the tool does, so ``· terminal_run…`` is on the
  screen before an approval prompt asks about it, never after.
* **Echo is off while a turn runs** (:class:`deepseek_eyes.cli.repl.TypeAhead`): what a
  person types then is kept by the terminal, not echoed into the streaming answer, and is
  read as the next message once the turn ends; an approval question turns echo on for its
  answer.
* **The chat follows the settings file** as the gateway does, with the same watch
  (:mod:`deepseek_eyes.gateway.settings_watch`): ``mcp allow``, ``register`` or a hand
  edit of ``[mcp]`` in another terminal reaches the next turn's tools without a restart.
* **A turn's failure is the turn's, not the chat's**: it prints ``error CODE: sentence``
  (or ``{"error": …}`` with ``--json``) and the next line is read. The chat ends only at
  ``/exit`` or end of input, with status 0. Ctrl-C cancels a running turn (the model's
  stream is closed, the turn recorded ``aborted``) and the chat prompts again; at the
  prompt it discards the line.
* **The session id is chosen when the chat starts**, so ``/session`` can name it before the
  first turn, and a turn that started a fork (its history no longer matched the log) moves
  the chat to the fork.

Input: with standard input and output a terminal, readline edits the line and keeps a
history across runs (``chat_history`` in the data directory, mode 0600); a line ending in
``\\`` continues the message on the next, and a pasted block is one message. Otherwise one
line is one message.

Output: answers on standard output as they stream (reasoning, dimmed, only when standard
output is a terminal); tool events and errors on standard error, and the prompt too,
except that readline writes it to standard output (it does only when that is the terminal).
With ``--json`` standard output has one JSON object per turn and per command result, and
nothing else is written: no prompt, no colour, no events.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from deepseek_eyes.cli.common import dump_json, loaded_settings
from deepseek_eyes.cli.repl import (
    PROMPT,
    EditingReader,
    InterruptRelay,
    LineReader,
    Screen,
    ToolTicker,
    TypeAhead,
    describe_event,
    is_terminal,
)
from deepseek_eyes.errors import CliError, DeepSeekEyesError, StoreError

if TYPE_CHECKING:
    from deepseek_eyes.runtime.approval import Approver
    from deepseek_eyes.runtime.runtime import Runtime
    from deepseek_eyes.runtime.turn import TurnResult
    from deepseek_eyes.vision.evidence.cache import ImageMeta

__all__ = ["HISTORY_FILE", "Chat", "chat_command", "converse"]

_T = TypeVar("_T")
#: The typed messages of earlier chats, in the data directory (mode 0600).
HISTORY_FILE = "chat_history"
#: How long the chat waits for its event loop to stop once the runtime is closed.
CLOSE_WAIT_S = 10.0

#: The chat's own commands and what each does (``/help``).
COMMANDS_HELP: tuple[tuple[str, str], ...] = (
    ("/image PATH", "attach an image to the next message (several allowed)"),
    ("/tools", "the tools the model is offered now, with source and risk"),
    ("/usage", "this session's usage, and the totals of this data directory"),
    ("/session [new]", "the session id and its message count; 'new' starts a fresh one"),
    ("/help", "this list"),
    ("/exit", "leave (so does end of input, Ctrl-D)"),
)
_ESCAPE_HINT = "A line starting with // is sent as text starting with /."


@dataclasses.dataclass
class _Reply:
    """A command's result: the JSON object, and the lines a person reads instead."""

    payload: dict[str, Any]
    lines: list[str]


class Chat:
    """One chat: its runtime, its session, the images waiting for the next message."""

    def __init__(self, runtime: Runtime, *, screen: Screen, as_json: bool,
                 session_id: str, model: str | None, approver: Approver | None,
                 typeahead: TypeAhead | None = None) -> None:
        self.runtime = runtime
        self.typeahead = typeahead
        self.screen = screen
        self.as_json = as_json
        self.session_id = session_id
        self.model = model
        self.approver = approver
        # (path as typed, admitted image, its bytes: sent through the one admission path)
        self.pending: list[tuple[str, ImageMeta, bytes]] = []
        self.turn: asyncio.Task[None] | None = None
        self.interrupted = False
        self.approving = False  # an approval question is on the terminal
        # Running tools on one redrawn line (a terminal only; elsewhere lines say it all).
        self.ticker = ToolTicker(screen.err if screen.interactive and not as_json
                                 and is_terminal(screen.err) else None)

    # output ------------------------------------------------------------------------------
    def emit(self, payload: Mapping[str, Any]) -> None:
        click.echo(dump_json(payload))

    def error(self, exc: DeepSeekEyesError) -> None:
        if self.as_json:
            self.emit({"error": exc.to_dict()})
        else:
            self.screen.end_answer()
            self.screen.note(f"error {exc.code}: {exc.message}")

    def reply(self, reply: _Reply) -> None:
        if self.as_json:
            self.emit(reply.payload)
        else:
            for line in reply.lines:
                click.echo(line)

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event.get("type") in ("approval.wanted", "approval.decided"):
            self.approving = event["type"] == "approval.wanted"
            if self.typeahead is not None:  # the approval answer is typed, and seen
                (self.typeahead.release if self.approving else self.typeahead.hold)()
        self.ticker.on_event(event)
        text = None if self.as_json else describe_event(event)
        if event.get("type") == "tool.progress" and self.ticker.live:
            text = None  # the ticking line shows it, in place
        if text is not None:
            with self.ticker.hidden():
                self.screen.note(text)

    # the loop ----------------------------------------------------------------------------
    async def banner(self) -> None:
        if self.screen.interactive and not self.as_json:
            count = len(self._messages())
            self.screen.note(f"chat: session {self.session_id} ({count} messages); /help "
                             "for commands, Ctrl-D to leave")

    async def handle(self, line: str) -> bool:
        """Act on one line; False when the chat should end."""
        text = line.strip()
        if not text:
            return True
        if text.startswith("/") and not text.startswith("//"):
            name, _, argument = text.partition(" ")
            if name in ("/exit", "/quit"):
                return False
            try:
                self.reply(await self.command(name, argument.strip()))
            except DeepSeekEyesError as exc:
                self.error(exc)
            return True
        await self.send(line[1:] if text.startswith("//") else line)
        return True

    async def command(self, name: str, argument: str) -> _Reply:
        """Raises:
            DeepSeekEyesError: the command could not do what it was asked (its code says
                why); ``CLI_USAGE`` for an unknown command or a bad argument.
        """
        if name == "/image":
            return await self.attach(argument)
        if name == "/tools" and not argument:
            return self.tools()
        if name == "/usage" and not argument:
            return self.usage()
        if name == "/session" and argument in ("", "new"):
            if argument == "new":
                self.session_id = self.runtime.sessions.new_id()
            return self.session(new=argument == "new")
        if name == "/help" and not argument:
            return self.help()
        known = {entry.split(" ")[0] for entry, _ in COMMANDS_HELP}
        what = f"{name} takes no {argument!r}" if name in known else f"unknown command {name}"
        raise CliError(f"{what}; /help lists the commands", code="CLI_USAGE",
                       details={"command": name})

    # commands ----------------------------------------------------------------------------
    async def attach(self, argument: str) -> _Reply:
        from deepseek_eyes.vision.intake.decode import ImageLimits, read_image_file

        if not argument:
            raise CliError("/image needs a path: /image PATH", code="CLI_USAGE",
                           details={"command": "/image"})
        path = argument
        if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
            path = path[1:-1]  # a path pasted in quotes (a file manager's drag and drop)
        limits = ImageLimits.from_settings(self.runtime.settings.image)
        data = read_image_file(Path(path).expanduser(), limits)
        (meta,) = await self.runtime.bridge.admit_all([data])
        self.pending.append((path, meta, data))
        image = {"path": path, "sha256": meta.sha256, "width": meta.width,
                 "height": meta.height, "media_type": meta.media_type}
        return _Reply({"command": "image", "attached": image, "pending": len(self.pending)},
                      [f"attached {path} ({meta.width}x{meta.height} {meta.media_type}, "
                       f"sha256:{meta.sha256[:12]}); {len(self.pending)} image(s) go with "
                       "the next message"])

    def tools(self) -> _Reply:
        from deepseek_eyes.runtime.messages import image_part, image_refs
        from deepseek_eyes.runtime.tools import TurnContext

        pending = [{"role": "user", "content": [image_part(m) for _, m, _ in self.pending]}]
        images = image_refs([*self._messages(), *pending])
        rt = self.runtime.settings.runtime
        context = TurnContext(
            session_id=self.session_id,
            images={f"img-{n}": image for n, image in enumerate(images, start=1)},
            max_tool_calls=rt.max_tool_calls_per_turn, max_rereads=rt.max_rereads_per_turn,
        )
        offer = self.runtime.tools.offer(context)
        rows = [{"name": spec.name, "source": offer.routes[spec.name].name, "risk": spec.risk,
                 "description": spec.description} for spec in offer.specs]
        width = max((len(row["name"]) for row in rows), default=0)
        lines = [f"{row['name']:<{width}}  {row['source']:<8}  {row['risk']:<7}  "
                 f"{_first_line(row['description'], 60)}" for row in rows]
        return _Reply({"command": "tools", "tools": rows},
                      lines or ["no tools are offered now ([runtime] tool_sources)"])

    def usage(self) -> _Reply:
        from deepseek_eyes.runtime.turn import usage_json
        from deepseek_eyes.usage import ProviderUsage, UsageCategory

        turns = self.runtime.sessions.turns(self.session_id)
        # A turn record keeps its usage in the OpenAI shape usage_json wrote.
        used = [ProviderUsage.from_openai(turn.details.get("usage")) for turn in turns]
        total = ProviderUsage(**{field.name: sum(getattr(u, field.name) for u in used)
                                 for field in dataclasses.fields(ProviderUsage)})
        rows = [{"turn_id": turn.id, "model": turn.model, "path": turn.path,
                 "outcome": turn.outcome, "code": turn.code, "usage": usage_json(usage)}
                for turn, usage in zip(turns, used, strict=True)]
        tracker = self.runtime.home.usage.summary()
        failed = sum(1 for turn in turns if turn.outcome != "ok")
        lines = [
            f"session {self.session_id}: {len(turns)} turn(s)"
            + (f", {failed} failed" if failed else ""),
            f"  prompt {total.prompt_tokens} tokens (cache hit {total.cache_hit_tokens}, miss "
            f"{total.cache_miss_tokens}), completion {total.completion_tokens} (reasoning "
            f"{total.reasoning_tokens})",
            "this data directory, all sessions and commands (exact):",
        ]
        lines += [f"  {name}: {row['calls']} call(s), prompt {row['prompt_tokens']}, "
                  f"completion {row['completion_tokens']}"
                  for name, row in tracker["exact"].items()] or ["  (none)"]
        # Counters (local OCR runs, native visual turns) involve no provider: they are
        # events, never tokens, and a "0 tokens" beside them read like free usage.
        estimated = {n: r for n, r in tracker["estimated"].items()
                     if not UsageCategory(n).counter}
        counters = {n: r for n, r in tracker["estimated"].items() if UsageCategory(n).counter}
        lines += ["estimated (attribution, already inside the exact totals):"]
        lines += [f"  {name}: {row['estimated_tokens']} tokens ({row['events']} event(s))"
                  for name, row in estimated.items()] or ["  (none)"]
        lines += ["counters (no provider, no tokens):"]
        lines += [f"  {name}: {row['events']} event(s)"
                  for name, row in counters.items()] or ["  (none)"]
        return _Reply({"command": "usage", "session_id": self.session_id, "turns": rows,
                       "session_total": usage_json(total), "tracker": tracker}, lines)

    def session(self, *, new: bool) -> _Reply:
        messages = self._messages()
        internal = sum(1 for m in messages if m.get("internal"))
        turns = len(self.runtime.sessions.turns(self.session_id))
        text = f"session {self.session_id}: {len(messages)} message(s)"
        if internal:
            text += f" ({internal} of them the runtime's tool exchanges)"
        text += f", {turns} turn(s)"
        if new:
            text = f"new {text}"
        return _Reply({"command": "session", "session_id": self.session_id, "new": new,
                       "messages": len(messages), "internal": internal, "turns": turns},
                      [text])

    def help(self) -> _Reply:
        width = max(len(entry) for entry, _ in COMMANDS_HELP)
        return _Reply(
            {"command": "help",
             "commands": [{"name": entry, "summary": what} for entry, what in COMMANDS_HELP]},
            [f"{entry:<{width}}  {what}" for entry, what in COMMANDS_HELP] + [_ESCAPE_HINT])

    def _messages(self) -> list[dict[str, Any]]:
        sessions = self.runtime.sessions
        return sessions.messages(self.session_id) if sessions.exists(self.session_id) else []

    # a turn ------------------------------------------------------------------------------
    async def send(self, text: str) -> None:
        """Run one turn, interruptible by Ctrl-C; its failure is reported, not raised."""
        self.interrupted = False
        self.turn = asyncio.ensure_future(self._turn(text))
        if self.typeahead is not None:
            self.typeahead.hold()
        try:
            try:
                await self.turn
            finally:
                self.ticker.stop()  # before any line that says how the turn ended
        except asyncio.CancelledError:
            if not self.interrupted:
                raise
            self.screen.end_answer()
            if not self.as_json:
                self.screen.note("· interrupted")
        except DeepSeekEyesError as exc:
            self.error(exc)
        finally:
            if self.typeahead is not None:
                self.typeahead.release()
            self.turn = None
            self.approving = False

    async def _turn(self, text: str) -> None:
        from deepseek_eyes.runtime.messages import image_url_part

        content: list[Mapping[str, Any]] = [image_url_part(data) for _, _, data in self.pending]
        content.append({"type": "text", "text": text})
        # The images go with this message whatever its outcome: once sent, they are in
        # the session log (a failed turn's message is logged too).
        self.pending.clear()
        request = await self.runtime.request_from_openai(
            {"model": self.model, "messages": [{"role": "user", "content": content}]},
            session_id=self.session_id, continue_session=True, source="chat",
            approver=self.approver, notify=self.on_event,
        )
        stream = self.runtime.stream(request)
        try:
            async for chunk in stream:
                for choice in chunk.get("choices") or []:
                    if self.as_json or not isinstance(choice, dict):
                        continue
                    delta = choice.get("delta") or {}
                    if delta.get("reasoning_content"):
                        self.screen.reasoning(str(delta["reasoning_content"]))
                    if delta.get("content"):
                        self.screen.content(str(delta["content"]))
        finally:
            if stream.session_id is not None:
                self.session_id = stream.session_id
        result = stream.result
        if result is None:  # a stream always sets its result before it ends
            raise RuntimeError("the turn ended without a result")
        self._finished(result)

    def _finished(self, result: TurnResult) -> None:
        from deepseek_eyes.runtime.turn import usage_json

        self.session_id = result.session_id
        if self.as_json:
            self.emit({"session_id": result.session_id, "answer": result.content,
                       "path": result.path, "tools": result.tools,
                       "usage": usage_json(result.usage)})
            return
        self.screen.end_answer()
        if result.fork is not None:
            self.screen.note(f"· the history no longer matched session {result.fork.parent};"
                             f" this conversation continues in session {result.session_id}")

    def interrupt(self) -> None:
        """Ctrl-C while a line is handled: stop the running turn (a command is let finish).

        Not while an approval question waits: its reader, in a worker thread, cannot be
        stopped and would take the next line typed; the person answers it instead.
        """
        if self.approving:
            self.screen.note("\n(answer the approval question: y or n)")
            return
        if self.turn is not None and not self.turn.done():
            self.interrupted = True
            self.turn.cancel()


class _LoopThread:
    """The event loop, run in a daemon thread while the main thread reads the person's lines.

    Daemon: a loop that hangs in shutdown must not keep the process alive after the chat.
    The thread blocks SIGINT, and so do the threads and processes it starts (they inherit
    the mask): Ctrl-C must reach the main thread, where it ends the wait for a line or
    for a turn. Were it delivered to another thread, the main thread's readline would
    never wake; and a Ctrl-C that cancels a turn should not also kill an MCP server the
    chat started (each such child still ends on the runtime's own SIGTERM or SIGKILL).
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="chat-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(AttributeError, OSError, ValueError):  # not POSIX: as is
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        self.loop.run_forever()

    def call(self, work: Coroutine[Any, Any, _T],
             on_interrupt: Callable[[], None] | None = None) -> _T:
        """Run ``work`` on the loop and wait for it. Ctrl-C meanwhile calls ``on_interrupt``
        on the loop and goes on waiting; without one, it cancels ``work`` and is raised."""
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        while True:
            try:
                return future.result()
            except KeyboardInterrupt:
                if on_interrupt is None:
                    future.cancel()
                    raise
                self.loop.call_soon_threadsafe(on_interrupt)

    def close(self) -> None:
        """Cancel what is left on the loop and stop it, as ``asyncio.run`` ends its loop."""
        with contextlib.suppress(Exception):  # best effort: the process is ending anyway
            asyncio.run_coroutine_threadsafe(_wind_down(), self.loop).result(CLOSE_WAIT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=CLOSE_WAIT_S)
        if not self._thread.is_alive():
            self.loop.close()


async def _wind_down() -> None:
    current = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not current]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


def converse(chat: Chat, reader: LineReader | EditingReader, loop: _LoopThread) -> None:
    """Read a message, handle it on the loop, until ``/exit`` or end of input."""
    loop.call(chat.banner())
    try:
        while True:
            try:
                line = reader.read(PROMPT)
            except KeyboardInterrupt:  # Ctrl-C at the prompt: the line is dropped
                if not chat.as_json:
                    chat.screen.note("\n(/exit or Ctrl-D leaves)")
                continue
            except CliError as exc:
                chat.error(exc)
                continue
            if line is None:
                if chat.screen.interactive and not chat.as_json:
                    chat.screen.note("")
                return
            if not loop.call(chat.handle(line), on_interrupt=chat.interrupt):
                return
    finally:
        reader.close()


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


@click.command("chat")
@click.option("--session", "session_id", default=None,
              help="Continue (or start) this session; default: a new one.")
@click.option("--model", default=None, help="Final model (default: llm.model, then /models).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per turn and per command result; no prompt or colour.")
@click.pass_context
def chat_command(ctx: click.Context, session_id: str | None, model: str | None,
                 as_json: bool) -> None:
    """Chat with the model: one line a message, /help lists the commands."""
    # Imported here: the runtime pulls in the HTTP client, the MCP SDK and the vision stack,
    # which `chat --help` should not pay for.
    from deepseek_eyes.cli.ask import open_runtime, terminal_approver
    from deepseek_eyes.cli.elicit import install_terminal_form
    from deepseek_eyes.cli.progress import Progress
    from deepseek_eyes.gateway.settings_watch import SettingsWatch
    from deepseek_eyes.store.events import SessionStore

    if session_id is not None and not SessionStore.valid_id(session_id):
        raise StoreError("a session id is 1-128 letters, digits, '.', '_', ':' or '-'",
                         code="STORE_SESSION_INVALID", details={"session_id": session_id})
    stdin = sys.stdin
    if isinstance(stdin, io.TextIOWrapper):
        stdin.reconfigure(errors="replace")  # a stray byte must not end the chat
    screen = Screen(sys.stdout, sys.stderr, interactive=is_terminal(stdin) and not as_json)
    # Before any MCP server connects: the elicitation capability is declared at the handshake.
    form = install_terminal_form(interactive=is_terminal(stdin) and not as_json)
    opened = contextlib.AsyncExitStack()

    async def start() -> Chat:
        source = loaded_settings(ctx).source
        runtime = await opened.enter_async_context(
            open_runtime(ctx, follow=source is not None))
        runtime.check_credentials()
        if runtime.mcp_manager is not None and source is not None:
            # `mcp allow` (any edit of [mcp]) reaches this chat as it reaches a gateway.
            watch = SettingsWatch(source, runtime.mcp_manager,
                                  say=(lambda _: None) if as_json else
                                  (lambda sentence: screen.note(f"chat: {sentence}")))
            await opened.enter_async_context(watch.following())
        return Chat(runtime, screen=screen, as_json=as_json,
                    session_id=session_id or runtime.sessions.new_id(), model=model,
                    approver=terminal_approver(runtime, Progress(None)),
                    typeahead=TypeAhead(stdin) if screen.interactive else None)

    relay = InterruptRelay() if screen.interactive else None
    loop = _LoopThread()
    try:
        chat = loop.call(start())
        if form is not None:  # a form mid-turn is answered with echo on
            form.echo = chat.typeahead
        reader: LineReader | EditingReader
        if screen.interactive and EditingReader.available(stdin, sys.stdout):
            reader = EditingReader(stdin, chat.runtime.home.root / HISTORY_FILE)
        else:
            reader = LineReader(stdin, sys.stderr if screen.interactive else None)
        converse(chat, reader, loop)
    finally:
        try:
            loop.call(opened.aclose())
        finally:
            loop.close()
            if relay is not None:
                relay.close()
