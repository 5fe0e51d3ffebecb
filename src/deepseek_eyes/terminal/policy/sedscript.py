"""Read a GNU sed script the way sed compiles it, and report what it can do beyond filtering.

A sed script is a small language: addresses, ``{}`` blocks, and one-letter commands whose
arguments run to the end of the line (``a``/``i``/``c`` text, ``r``/``w`` file names, ``e``
commands, labels). A regex that tries to find ``e`` or ``w`` in the text is fooled by any of
these; this reader walks the commands in order, exactly as ``sed/compile.c`` does, so a ``w``
inside a regex or inside appended text is text, and an ``e`` after a ``1`` address is a
command.

Reported: ``e`` and the ``e`` flag of ``s`` (run a command), ``w``/``W`` and the ``w`` flag
(write a file, named so the engine can check it), ``r``/``R`` (read a file, named likewise),
and anything this reader does not know (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deepseek_eyes.terminal.policy.analysis import Effect

__all__ = ["SedReading", "read_sed_script"]

_SIMPLE = set("=dDgGhHnNpPxzF")
_EXIT = set("qQ")  # optional exit code
_LABELLED = set("btT")
_TEXT = set("aic")
_MAX_STEPS = 20_000


@dataclass
class SedReading:
    """What a script does: effects with reasons, and the files it reads and writes."""

    effects: list[tuple[Effect, str]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


class _Unreadable(Exception):
    pass


class _Reader:
    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0
        self.out = SedReading()
        self.depth = 0

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.i += 1

    def to_line_end(self) -> str:
        end = self.s.find("\n", self.i)
        end = len(self.s) if end < 0 else end
        text = self.s[self.i : end]
        self.i = end
        return text

    def delimited(self, delim: str) -> None:
        """Skip past the next unescaped ``delim`` (GNU ``match_slash``)."""
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch == "\\":
                self.i += 2
                continue
            if ch == "\n" and delim != "\n":
                raise _Unreadable("a newline inside a sed regex or replacement")
            self.i += 1
            if ch == delim:
                return
        raise _Unreadable("an unterminated sed regex, replacement or y command")

    def address(self) -> bool:
        ch = self.peek()
        if ch.isdigit():
            while self.peek().isdigit():
                self.i += 1
            if self.peek() == "~":
                self.i += 1
                while self.peek().isdigit():
                    self.i += 1
            return True
        if ch == "$":
            self.i += 1
            return True
        if ch in ("/", "\\"):
            if ch == "\\":
                self.i += 1
                delim = self.peek()
                if delim in ("", "\n", "\\"):
                    raise _Unreadable("a sed address with no delimiter")
            else:
                delim = "/"
            self.i += 1
            self.delimited(delim)
            while self.peek() in ("I", "M"):
                self.i += 1
            return True
        return False

    def second_address(self) -> None:
        self.skip_blanks()
        if self.peek() in ("+", "~"):
            self.i += 1
            if not self.peek().isdigit():
                raise _Unreadable("a sed address step without a number")
            while self.peek().isdigit():
                self.i += 1
            return
        if not self.address():
            raise _Unreadable("a sed address range without its end")

    def end_of_command(self) -> None:
        self.skip_blanks()
        ch = self.peek()
        if ch in ("", "\n", ";", "}", "#"):
            return
        raise _Unreadable(f"unexpected {ch!r} after a sed command")

    def label(self) -> str:
        """A label (or ``v``'s version): up to a blank, ``;``, ``}`` or the line's end, and
        nothing but the end of the command after it (else the script is not read)."""
        self.skip_blanks()
        start = self.i
        while self.peek() not in ("", "\n", ";", "}", " ", "\t"):
            self.i += 1
        name = self.s[start : self.i]
        self.end_of_command()
        return name

    def file_argument(self, what: str) -> str:
        self.skip_blanks()
        name = self.to_line_end()
        if not name:
            raise _Unreadable(f"a sed {what} without a file name")
        return name

    def substitute(self) -> None:
        delim = self.peek()
        if delim in ("", "\n", "\\"):
            raise _Unreadable("a sed s command without a delimiter")
        self.i += 1
        self.delimited(delim)
        self.delimited(delim)
        while True:
            ch = self.peek()
            if ch in ("g", "p", "i", "I", "m", "M") or ch.isdigit():
                self.i += 1
            elif ch == "e":
                self.i += 1
                self.out.effects.append((Effect.EXEC, "sed s///e runs the pattern space as a "
                                                      "command"))
            elif ch == "w":
                self.i += 1
                name = self.file_argument("s///w")
                self.out.effects.append((Effect.WRITE, f"sed s///w writes the file {name!r}"))
                self.out.writes.append(name)
                return
            else:
                self.end_of_command()
                return

    def command(self) -> None:
        ch = self.peek()
        self.i += 1
        if ch == "{":
            self.depth += 1
            return
        if ch == "}":
            self.depth -= 1
            if self.depth < 0:
                raise _Unreadable("an unexpected '}' in the sed script")
            self.end_of_command()
            return
        if ch in _SIMPLE:
            self.end_of_command()
        elif ch == "l" or ch in _EXIT or ch == "L":
            if ch == "L":
                raise _Unreadable("sed L is obsolete")
            self.skip_blanks()
            while self.peek().isdigit():
                self.i += 1
            self.end_of_command()
        elif ch == ":":
            if not self.label():
                raise _Unreadable("a sed label without a name")
        elif ch in _LABELLED or ch == "v":
            self.label()
        elif ch in _TEXT:
            self._text()
        elif ch in ("r", "R"):
            name = self.file_argument(ch)
            self.out.effects.append((Effect.READ, f"sed {ch} reads the file {name!r}"))
            self.out.reads.append(name)
        elif ch in ("w", "W"):
            name = self.file_argument(ch)
            self.out.effects.append((Effect.WRITE, f"sed {ch} writes the file {name!r}"))
            self.out.writes.append(name)
        elif ch == "e":
            self.to_line_end()
            self.out.effects.append((Effect.EXEC, "sed e runs a command"))
        elif ch == "s":
            self.substitute()
        elif ch == "y":
            delim = self.peek()
            if delim in ("", "\n", "\\"):
                raise _Unreadable("a sed y command without a delimiter")
            self.i += 1
            self.delimited(delim)
            self.delimited(delim)
            self.end_of_command()
        else:
            raise _Unreadable(f"sed command {ch!r} is not one the policy knows")

    def _text(self) -> None:
        """``a``/``i``/``c``: GNU one-liner text or ``a\\`` + lines, each ``\\``-continued."""
        self.skip_blanks()
        if self.peek() == "\\":
            self.i += 1
            self.skip_blanks()
            if self.peek() == "\n":
                self.i += 1
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch == "\\":
                self.i += 2  # an escaped character, including an escaped newline
                continue
            if ch == "\n":
                return
            self.i += 1

    def run(self) -> SedReading:
        steps = 0
        while self.i < len(self.s):
            steps += 1
            if steps > _MAX_STEPS:
                raise _Unreadable("the sed script is too long to read")
            ch = self.peek()
            if ch in (" ", "\t", "\n", ";"):
                self.i += 1
                continue
            if ch == "#":
                self.to_line_end()
                continue
            if self.address():
                self.skip_blanks()
                if self.peek() == ",":
                    self.i += 1
                    self.second_address()
            elif self.peek() == ",":
                raise _Unreadable("a sed address range without its start")
            self.skip_blanks()
            while self.peek() == "!":
                self.i += 1
                self.skip_blanks()
            if self.i >= len(self.s):
                raise _Unreadable("a sed address without a command")
            self.command()
        if self.depth != 0:
            raise _Unreadable("an unmatched '{' in the sed script")
        return self.out


def read_sed_script(script: str) -> SedReading:
    """Read ``script`` (``-e`` pieces joined by newlines, as sed joins them)."""
    try:
        return _Reader(script).run()
    except _Unreadable as exc:
        return SedReading(effects=[(Effect.UNKNOWN, f"the sed script cannot be read: {exc}")])
