"""Approvals inside a turn: a plan that needs a person pauses the turn until one decides.

The model can plan and execute, but it can never approve: the runtime's terminal source
does not offer ``terminal_approve``. When an execution needs approval, the turn asks its
:class:`Approver` and waits:

* :class:`TerminalPrompt` — ``ask`` and ``chat`` on a terminal: the plan (argv shown
  exactly, invisible characters made visible) is printed on the terminal and a ``y`` is
  read from it; anything else denies. Read in a worker thread, bounded in time.
* :class:`ConsoleWait` — no terminal (the gateway, a pipe): the plan waits, pending, for a
  person in the terminal approval console (``/terminal/console`` of the gateway) for a
  bounded time.

Either way the model is told the outcome (approved and run, denied, or not decided in
time); a plan nobody approved never runs. Without any approver (``None``), a plan that
needs approval is refused at once with ``RUNTIME_APPROVAL_UNAVAILABLE``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TextIO

import anyio

__all__ = [
    "Approver", "ConsoleWait", "Decision", "TerminalPrompt", "describe_plan", "open_terminal",
    "terminal_available",
]

Decision = Literal["approved", "denied", "timeout"]


class Approver(Protocol):
    """Decides plans that need a person. ``via`` is recorded with the approval."""

    via: str

    async def decide(self, plan: Mapping[str, Any]) -> Decision: ...


def _visible(text: object) -> str:
    """Invisible characters shown as escapes, so a name cannot hide what it is."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def describe_plan(plan: Mapping[str, Any]) -> str:
    """The plan as a person must see it before approving: exact argv, cwd, risk, reasons
    (or, for an ask-first MCP call, ``kind`` ``mcp``: the server, tool and arguments)."""
    if plan.get("kind") == "mcp":
        return ("The model wants to call an ask-first MCP tool:\n"
                f"  server:    {_visible(plan.get('server'))}\n"
                f"  tool:      {_visible(plan.get('tool'))}\n"
                f"  arguments: {_visible(plan.get('arguments'))}")
    decision = plan.get("decision") or {}
    argv = " ".join(repr(a) for a in plan.get("argv_visible") or plan.get("argv") or [])
    reasons = "; ".join(str(r) for r in decision.get("reasons") or [])
    effects = ", ".join(str(e) for e in decision.get("effects") or [])
    return (f"The model wants to run:\n  argv: [{argv}]\n  cwd:  {plan.get('cwd')}\n"
            f"  risk: {decision.get('risk')}  effects: {effects or '-'}\n"
            f"  why approval: {reasons or '-'}")


def terminal_available(tty: str = "/dev/tty") -> bool:
    """Whether a person can be asked on the controlling terminal (stdin and stderr are
    terminals, and ``tty`` exists)."""
    return sys.stdin.isatty() and sys.stderr.isatty() and os.path.exists(tty)


def open_terminal(opened: contextlib.ExitStack, tty: str,
                  opener: Callable[[], tuple[TextIO, TextIO]] | None = None,
                  ) -> tuple[TextIO, TextIO]:
    """A reader and a writer on ``tty`` (closed with ``opened``), or ``opener``'s."""
    if opener is not None:
        return opener()
    # Two streams: a terminal opened "r+" in text mode is refused (a text stream for
    # reading and writing must be seekable, and a terminal is not).
    return (opened.enter_context(open(tty, encoding="utf-8")),
            opened.enter_context(open(tty, "w", encoding="utf-8")))


class TerminalPrompt:
    """Ask on the controlling terminal (``ask``/``chat`` run interactively)."""

    via = "cli"

    def __init__(self, *, timeout: float = 300.0, tty: str = "/dev/tty",
                 opener: Callable[[], tuple[TextIO, TextIO]] | None = None) -> None:
        self._timeout = timeout
        self._tty = tty
        self._opener = opener

    @staticmethod
    def available(tty: str = "/dev/tty") -> bool:
        """Whether there is a terminal to ask on (stdin and stderr are terminals)."""
        return terminal_available(tty)

    def _ask(self, plan: Mapping[str, Any]) -> Decision:
        with contextlib.ExitStack() as opened:
            reader, writer = open_terminal(opened, self._tty, self._opener)
            writer.write(describe_plan(plan) + "\nApprove? [y/N] ")
            writer.flush()
            answer = reader.readline()
        return "approved" if answer.strip().lower() in ("y", "yes") else "denied"

    async def decide(self, plan: Mapping[str, Any]) -> Decision:
        with anyio.move_on_after(self._timeout):
            return await anyio.to_thread.run_sync(self._ask, plan, abandon_on_cancel=True)
        return "timeout"


class ConsoleWait:
    """Wait for a person in the terminal console to approve or deny the plan."""

    via = "console"

    def __init__(self, state_of: Callable[[str, str], str], *, timeout: float = 120.0,
                 poll: float = 0.1, notice: Callable[[Mapping[str, Any]], None] | None = None
                 ) -> None:
        self._state_of = state_of
        self._timeout = timeout
        self._poll = poll
        self._notice = notice

    async def decide(self, plan: Mapping[str, Any]) -> Decision:
        if self._notice is not None:
            self._notice(plan)
        deadline = time.monotonic() + self._timeout
        session, plan_id = str(plan["session_id"]), str(plan["plan_id"])
        while time.monotonic() < deadline:
            state = self._state_of(session, plan_id)
            if state == "approved":
                return "approved"
            if state not in ("planned",):
                return "denied"
            await anyio.sleep(self._poll)
        return "timeout"
