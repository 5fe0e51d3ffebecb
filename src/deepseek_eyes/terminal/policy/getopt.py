"""Read an argv exactly as glibc's ``getopt_long`` would, from the program's own option table.

Why a faithful reader rather than a list of "dangerous flags": every bypass of the old policy
came from reading the argv differently from the program. ``sed -ne '1e id' p`` is ``-n`` and
``-e '1e id'`` (``e`` takes the rest of the bundle or the next word); ``git grep -Oid`` is
``-O`` with the attached value ``id``; ``--files0`` is ``--files0-from`` because getopt
accepts any unique prefix; an option after the first operand is still an option (GNU
permutes). Parsing with the program's real table makes the policy see the same options,
values and operands the program will.

Table syntax, as in C:

* ``short`` is a getopt option string: a letter alone takes no argument, ``x:`` requires
  one (attached, ``-xVALUE``, or the next word), ``x::`` takes an optional one (attached
  only). A leading ``+`` stops at the first operand (no permutation, as ``env`` or
  ``xargs`` do). ``W;`` makes ``-W foo`` mean ``--foo`` (gawk).
* ``long`` is a space-separated list of long names: ``name`` takes no argument,
  ``name=`` requires one (``--name=V`` or ``--name V``), ``name[=]`` takes an optional one
  (``--name=V`` only).

Anything getopt would reject (an unknown option, an ambiguous abbreviation, a missing or
unexpected argument) is reported as a *problem*: the caller treats the command as one it
cannot read, which fails closed. The reader never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

__all__ = ["ArgKind", "OptionTable", "Parsed", "Use", "parse_argv"]


class ArgKind(StrEnum):
    NONE = "none"
    REQUIRED = "required"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class OptionTable:
    """One program's options: short letters and long names with their argument kinds."""

    short: tuple[tuple[str, ArgKind], ...]
    long: tuple[tuple[str, ArgKind], ...]
    permute: bool = True
    w_long: bool = False  # "W;": -W name is --name

    @classmethod
    def of(cls, short: str = "", long: str = "") -> OptionTable:
        """Build a table from C-style specs (see the module docstring).

        Raises:
            ValueError: a malformed spec (a programming error in a table).
        """
        return _table(short, long)

    def short_kind(self, letter: str) -> ArgKind | None:
        return dict(self.short).get(letter)

    def long_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.long)

    def names(self) -> frozenset[str]:
        """Every option spelling: ``-x`` and ``--name``."""
        return frozenset({f"-{c}" for c, _ in self.short} | {f"--{n}" for n, _ in self.long})


@lru_cache(maxsize=512)
def _table(short: str, long: str) -> OptionTable:
    permute = True
    if short.startswith("+"):
        permute, short = False, short[1:]
    shorts: list[tuple[str, ArgKind]] = []
    w_long = False
    i = 0
    while i < len(short):
        letter = short[i]
        if letter in ":;":
            raise ValueError(f"malformed short option spec {short!r}")
        i += 1
        if letter == "W" and short[i : i + 1] == ";":
            w_long = True
            i += 1
            shorts.append(("W", ArgKind.REQUIRED))
            continue
        if short[i : i + 2] == "::":
            shorts.append((letter, ArgKind.OPTIONAL))
            i += 2
        elif short[i : i + 1] == ":":
            shorts.append((letter, ArgKind.REQUIRED))
            i += 1
        else:
            shorts.append((letter, ArgKind.NONE))
    longs: list[tuple[str, ArgKind]] = []
    for word in long.split():
        if word.endswith("[=]"):
            longs.append((word[:-3], ArgKind.OPTIONAL))
        elif word.endswith("="):
            longs.append((word[:-1], ArgKind.REQUIRED))
        else:
            longs.append((word, ArgKind.NONE))
    names = [n for n, _ in longs]
    if len(set(names)) != len(names) or any(not n or n.startswith("-") for n in names):
        raise ValueError(f"malformed or duplicate long option spec {long!r}")
    return OptionTable(tuple(shorts), tuple(longs), permute, w_long)


@dataclass(frozen=True)
class Use:
    """One option as the program will see it: its full spelling and its value."""

    option: str  # "-n" or "--lines" (an abbreviation is given by its full name)
    value: str | None
    given: str  # the word(s) as written, for reasons


@dataclass
class Parsed:
    uses: list[Use] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def has(self, *options: str) -> bool:
        return any(u.option in options for u in self.uses)

    def values(self, *options: str) -> list[str]:
        return [u.value for u in self.uses if u.option in options and u.value is not None]


def _long(
    table: OptionTable, body: str, args: list[str], i: int, out: Parsed, given: str
) -> int:
    """Read one long option (``body`` is the text after ``--``); returns the next index."""
    name, eq, value = body.partition("=")
    kinds = dict(table.long)
    if name in kinds:
        full = name
    else:
        matches = [n for n in kinds if n.startswith(name)] if name else []
        if not matches:
            out.problems.append(f"{given!r} is not an option the program has")
            return i
        if len(matches) > 1:
            out.problems.append(f"{given!r} is ambiguous ({', '.join('--' + m for m in matches)})")
            return i
        full = matches[0]
    kind = kinds[full]
    if kind is ArgKind.NONE:
        if eq:
            out.problems.append(f"--{full} takes no value, but {given!r} gives one")
            return i
        out.uses.append(Use(f"--{full}", None, given))
        return i
    if eq:
        out.uses.append(Use(f"--{full}", value, given))
        return i
    if kind is ArgKind.OPTIONAL:
        out.uses.append(Use(f"--{full}", None, given))
        return i
    if i >= len(args):
        out.problems.append(f"--{full} needs a value")
        return i
    out.uses.append(Use(f"--{full}", args[i], f"{given} {args[i]}"))
    return i + 1


def parse_argv(table: OptionTable, args: list[str]) -> Parsed:
    """Split ``args`` (without the program name) into option uses and operands."""
    out = Parsed()
    i = 0
    while i < len(args):  # bounded: every branch advances i
        arg = args[i]
        i += 1
        if arg == "--":
            out.operands.extend(args[i:])
            break
        if arg == "-" or not arg.startswith("-"):
            out.operands.append(arg)
            if not table.permute:
                out.operands.extend(args[i:])
                break
            continue
        if arg.startswith("--"):
            i = _long(table, arg[2:], args, i, out, arg)
            continue
        shorts = dict(table.short)
        j = 1
        while j < len(arg):
            letter = arg[j]
            kind = shorts.get(letter)
            if kind is None:
                out.problems.append(f"'-{letter}' (in {arg!r}) is not an option the program has")
                j += 1
                continue
            if kind is ArgKind.NONE:
                out.uses.append(Use(f"-{letter}", None, arg))
                j += 1
                continue
            attached = arg[j + 1 :]
            if kind is ArgKind.OPTIONAL:
                out.uses.append(Use(f"-{letter}", attached or None, arg))
                break
            if attached:
                value = attached
            elif i < len(args):
                value = args[i]
                i += 1
            else:
                out.problems.append(f"-{letter} needs a value")
                break
            if letter == "W" and table.w_long:
                i = _long(table, value, args, i, out, f"-W {value}")
            else:
                out.uses.append(Use(f"-{letter}", value, arg if attached else f"{arg} {value}"))
            break
    return out
