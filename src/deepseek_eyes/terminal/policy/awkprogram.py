"""Tokenize an awk program as awk's lexer does, and report what it can do beyond reading.

The old check blanked string and regex literals with regular expressions and searched what
was left. ``a = 4 / 2; system("id"); b = a / 2`` defeats that: the text between the two
divisions looks like a regex literal. awk itself decides whether ``/`` opens a regex or
divides by the token before it (after an operand it divides), so this lexer does the same,
and the decisions below work on tokens, never on text.

Reported: ``system`` (runs a command), any ``|`` or ``|&`` (a pipe to or from a command:
``print | "sh"``, ``"cmd" | getline``), ``getline <`` (reads a file the program names),
``>``/``>>`` inside a ``print``/``printf`` statement (writes a file), ``ARGV``/``ARGC``
(can change which files are read), ``@`` (gawk directives and indirect calls, which can
reach ``system`` by name), and anything the lexer cannot read (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass

from deepseek_eyes.terminal.policy.analysis import Effect

__all__ = ["AwkToken", "judge_awk_program", "tokenize_awk"]

_MAX_TOKENS = 50_000
_OPERATORS = (
    "|&", "||", "&&", "==", "!=", "<=", ">=", ">>", "!~", "++", "--", "+=", "-=", "*=",
    "/=", "%=", "^=", "**=", "**",
)
_SINGLE = set("{}()[];,<>|!~+-*/%^?:=$")
# After these tokens a "/" divides; after anything else it opens a regex literal. This is
# mawk's own list (scan.c, can_precede_div): numbers, strings, ")", names, regexes, "]",
# fields such as $1 (a "$" then a number here), getline, and ++/--. A "$" alone does not
# precede a division: "$/re/" is the field numbered by the match.
_OPERAND_END_KINDS = ("name", "number", "string", "regex", "funcname")
_OPERAND_END_PUNCT = (")", "]", "++", "--")
_KEYWORDS = frozenset({
    "BEGIN", "END", "BEGINFILE", "ENDFILE", "function", "func", "if", "else", "while", "for",
    "do", "break", "continue", "next", "nextfile", "exit", "return", "delete", "in",
    "getline", "print", "printf",
})


@dataclass(frozen=True)
class AwkToken:
    kind: str  # name, keyword, number, string, regex, op, newline
    text: str


class AwkLexError(ValueError):
    pass


def _string_end(src: str, i: int) -> int:
    """Index just past the string literal starting at ``src[i] == '"'``."""
    j = i + 1
    while j < len(src):
        ch = src[j]
        if ch == "\\":
            j += 2
            continue
        if ch == '"':
            return j + 1
        if ch == "\n":
            break
        j += 1
    raise AwkLexError("an unterminated string literal")


def _regex_end(src: str, i: int) -> int:
    """Index just past the regex literal starting at ``src[i] == '/'`` (brackets respected)."""
    j = i + 1
    in_bracket = False
    while j < len(src):
        ch = src[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "\n":
            break
        if in_bracket:
            if ch == "]" and src[j - 1] not in "[^":
                in_bracket = False
        elif ch == "[":
            in_bracket = True
            if src[j + 1 : j + 2] == "^":
                j += 1
            if src[j + 1 : j + 2] == "]":
                j += 1  # a leading ] is a literal member
        elif ch == "/":
            return j + 1
        j += 1
    raise AwkLexError("an unterminated regex literal")


def _divides(previous: AwkToken | None) -> bool:
    if previous is None:
        return False
    if previous.kind in _OPERAND_END_KINDS or previous.text == "getline":
        return True
    return previous.kind == "op" and previous.text in _OPERAND_END_PUNCT


def tokenize_awk(src: str) -> list[AwkToken]:
    """The program's tokens (comments and blanks dropped).

    Raises:
        AwkLexError: an unterminated literal, a character awk has no token for, or a
            program too long to read.
    """
    tokens: list[AwkToken] = []
    i = 0
    n = len(src)
    while i < n:  # bounded: every branch advances i
        if len(tokens) > _MAX_TOKENS:
            raise AwkLexError("the program is too long to read")
        ch = src[i]
        previous = tokens[-1] if tokens else None
        if ch in " \t\r":
            i += 1
        elif ch == "\\" and src[i + 1 : i + 2] == "\n":
            i += 2  # a continued line
        elif ch == "\\" and src[i + 1 : i + 3] == "\r\n":
            i += 3
        elif ch == "\n":
            tokens.append(AwkToken("newline", "\n"))
            i += 1
        elif ch == "#":
            end = src.find("\n", i)
            i = n if end < 0 else end
        elif ch == '"':
            end = _string_end(src, i)
            tokens.append(AwkToken("string", src[i:end]))
            i = end
        elif ch == "/" and not _divides(previous):
            end = _regex_end(src, i)
            tokens.append(AwkToken("regex", src[i:end]))
            i = end
        elif ch.isdigit() or (ch == "." and src[i + 1 : i + 2].isdigit()):
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "."):
                j += 1
            if j < n and src[j] in "+-" and src[j - 1] in "eE" and not src[i:j].startswith(
                ("0x", "0X")
            ):
                j += 1
                while j < n and src[j].isdigit():
                    j += 1
            tokens.append(AwkToken("number", src[i:j]))
            i = j
        elif ch.isalpha() or ch == "_":
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            word = src[i:j]
            kind = "keyword" if word in _KEYWORDS else (
                "funcname" if src[j : j + 1] == "(" else "name"
            )
            tokens.append(AwkToken(kind, word))
            i = j
        else:
            op = next((o for o in _OPERATORS if src.startswith(o, i)), None)
            if op is None and ch in _SINGLE:
                op = ch
            if op is None and ch == "@":
                raise AwkLexError("it uses a gawk directive or indirect call (@)")
            if op is None:
                raise AwkLexError(f"the character {ch!r} is not awk")
            tokens.append(AwkToken("op", op))
            i += len(op)
    return tokens


def judge_awk_program(program: str) -> list[tuple[Effect, str]]:
    """Effects of ``program`` beyond reading its input, each with a reason."""
    try:
        tokens = tokenize_awk(program)
    except AwkLexError as exc:
        return [(Effect.UNKNOWN, f"the awk program cannot be read: {exc}")]
    found: list[tuple[Effect, str]] = []

    def note(effect: Effect, reason: str) -> None:
        if (effect, reason) not in found:
            found.append((effect, reason))

    depth = 0
    print_depth: int | None = None  # paren depth of the print statement being read
    for k, tok in enumerate(tokens):
        text = tok.text
        if tok.kind in ("name", "funcname") and text == "system":
            note(Effect.EXEC, "the awk program calls system()")
        elif tok.kind == "op" and text in ("|", "|&"):
            note(Effect.EXEC, "the awk program pipes to or from a command")
        elif tok.kind == "keyword" and text == "getline":
            following = tokens[k + 1 : k + 3]
            if any(t.kind == "op" and t.text == "<" for t in following):
                note(Effect.UNKNOWN, "the awk program reads a file it names (getline <)")
        elif tok.kind in ("name", "funcname") and text in ("ARGV", "ARGC"):
            note(Effect.UNKNOWN, "the awk program uses ARGV/ARGC, which can change the files "
                                 "it reads")
        elif tok.kind == "keyword" and text in ("print", "printf"):
            print_depth = depth
        elif tok.kind == "op" and text in ("(", "["):
            depth += 1
        elif tok.kind == "op" and text in (")", "]"):
            depth -= 1
        elif tok.kind == "newline" or (tok.kind == "op" and text in (";", "{", "}")):
            print_depth = None
        elif (tok.kind == "op" and text in (">", ">>") and print_depth is not None
              and depth == print_depth):
            note(Effect.WRITE, "the awk program redirects print output to a file")
    return found

