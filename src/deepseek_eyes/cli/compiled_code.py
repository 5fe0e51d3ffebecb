"""The compiled code of the source texts libraries compile at every start, kept like a .pyc.

Two libraries compile source text while modules are imported, not only on first use. On
Python 3.11 ``@dataclass`` writes each method it adds (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``) as text
and runs it with ``exec``; ``typing.ForwardRef`` compiles each annotation written as a
string (every field of pydantic-core's hundred TypedDicts, every settings field under
``from __future__ import annotations``). A cached ``see`` compiled about 370 texts of the
first kind and 1,130 of the second on every start: 181 and about 60 of its 968 million
instructions (counted by callgrind). The import system keeps the compiled code of modules
in ``__pycache__``; nothing kept that of these texts.

:class:`CompiledCode` keeps it. :mod:`dataclasses` is given a twin of ``exec`` and
:mod:`typing` a twin of ``compile`` that look the text up in a table of code objects and
compile only a text they have not seen. The key is the exact text and its mode, and a text
is compiled with the flags those modules' own calls give it (neither inherits a
``__future__`` flag), so a hit is the very code the library would have compiled; the
library then does with it what it did before.

Two decisions a newcomer would otherwise undo:

* The table is one file per command, beside this package's own ``.pyc`` files (in their
  ``__pycache__``, or under ``sys.pycache_prefix``): whoever can write it can write those,
  so it adds no code a user did not already trust. It is written as a ``.pyc`` is: only
  when bytecode writing is on, atomically, silently not when the directory is read-only,
  and it starts with the interpreter's bytecode magic number and ``-O`` level (another
  interpreter's table, or one compiled under another level, is ignored). One file per
  command, not one for all: a table is read whole at each start (about 3 ms for the
  thousand texts of ``see``), and ``see`` should not read what ``serve`` compiled.
* Only the command line's own process installs it (:func:`deepseek_eyes.cli.main` with no
  arguments), as it pauses the garbage collector; a caller in process keeps its
  :mod:`dataclasses` and :mod:`typing` as they are.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import typing
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["MAX_ENTRIES", "CompiledCode", "install", "table_path"]

#: Texts one table holds at most; past them a text is compiled and not kept (a command
#: compiles a few thousand, so this only bounds a table that something unforeseen fills).
MAX_ENTRIES = 16384

#: A table's first bytes: our format, the interpreter's bytecode magic number and its
#: optimization level (``-O`` compiles other code, as its ``.opt-1.pyc`` files say).
_HEADER = (b"deepseek-eyes compiled code 1\n" + importlib.util.MAGIC_NUMBER
           + bytes([sys.flags.optimize]))


def table_path(command: str) -> Path:
    """Where ``command``'s table lives: beside this module's own ``.pyc``."""
    own_pyc = Path(importlib.util.cache_from_source(__file__))
    return own_pyc.with_name(f"compiled-code.{command}.{sys.implementation.cache_tag}.bin")


class CompiledCode:
    """A table of (mode, source text) -> compiled code, read from ``path`` (an absent,
    foreign or damaged file is an empty table) and written back by :meth:`save` when it
    grew."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._code = _read(path)
        self._added = 0

    def __len__(self) -> int:
        return len(self._code)

    def code(self, source: str, mode: str) -> CodeType:
        """The code of ``source`` compiled in ``mode`` with no inherited flags, from the
        table when it has been seen. Raises SyntaxError as ``compile`` does."""
        key = (mode, source)
        code = self._code.get(key)
        if code is None:
            # dont_inherit: this module's `annotations` future must not reach the code (it
            # would turn a generated method's annotations into strings).
            code = builtins.compile(source, "<string>", mode, dont_inherit=True)
            if len(self._code) < MAX_ENTRIES:
                self._code[key] = code
                self._added += 1
        return code

    def exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:
        """:mod:`dataclasses`' ``exec(source, globals, locals)``."""
        if isinstance(source, str):
            source = self.code(source, "exec")
        builtins.exec(source, globals, locals)  # noqa: S102 (what dataclasses would have run)

    def compile(self, source: Any, filename: Any, mode: str, flags: int = 0,
                dont_inherit: bool = False,  # noqa: ARG002 (compile's signature; see below)
                optimize: int = -1) -> Any:
        """:mod:`typing`'s ``compile``. A call other than its own (``'<string>'``, no
        flags) is passed on as it is; with ``dont_inherit`` always, as :mod:`typing`, the
        only caller, has no ``__future__`` flag to inherit and this module's must not be."""
        if isinstance(source, str) and filename == "<string>" and not flags and optimize == -1:
            return self.code(source, mode)
        return builtins.compile(source, filename, mode, flags, dont_inherit=True,
                                optimize=optimize)

    def save(self) -> None:
        """Write the table when it grew and bytecode writing is on; atomically (a reader
        sees the old table or the new one), and never an error: a table not written is
        compiled again next time."""
        if not self._added or sys.dont_write_bytecode:
            return
        data = _HEADER + marshal.dumps(self._code)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
            self._added = 0
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _read(path: Path) -> dict[tuple[str, str], CodeType]:
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if not data.startswith(_HEADER):
        return {}
    try:
        # Code from the directory our .pyc files are read from, with their trust (module doc).
        table = marshal.loads(data[len(_HEADER):])  # noqa: S302
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {
        key: code for key, code in table.items()
        if isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)
        and isinstance(code, CodeType)
    }


def install(command: str) -> CompiledCode | None:
    """Give :mod:`dataclasses` its twin of ``exec`` and :mod:`typing` its twin of
    ``compile`` over ``command``'s table, saved when the process exits. None (nothing
    installed) on an interpreter whose modules do not compile through those names (3.11's
    do), or when a table is installed already."""
    if sys.version_info[:2] != (3, 11) or not hasattr(dataclasses, "_create_fn"):
        return None
    if "exec" in vars(dataclasses) or "compile" in vars(typing):
        return None
    try:
        path = table_path(command)
    except NotImplementedError:  # an interpreter that keeps no bytecode cache
        return None
    table = CompiledCode(path)
    dataclasses.exec = table.exec  # type: ignore[attr-defined]  # shadows the builtin there
    typing.compile = table.compile  # type: ignore[attr-defined]  # likewise
    atexit.register(table.save)
    return table
