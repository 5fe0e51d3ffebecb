"""The compiled code of the methods ``@dataclass`` generates, kept between runs like a .pyc.

On Python 3.11 ``@dataclass`` writes each method it adds (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``) as source
text and compiles it with ``exec``: a cached ``see`` creates 84 dataclasses (pydantic's and
annotated_types' among them) and compiled about 370 such texts on every start, nearly a
fifth of its instructions (181 of 968 million, counted by callgrind). The import system
keeps the compiled code of modules in ``__pycache__``; nothing kept that of these methods.

:class:`DataclassCode` keeps it. The ``exec`` that :mod:`dataclasses` calls is given a twin
that looks the source text up in a table of code objects and compiles only a text it has
not seen; the key is the exact text, and a text is compiled with the flags ``exec`` gives it
in :mod:`dataclasses` (no ``__future__`` flag inherited), so a hit is the very code
``exec`` would have compiled. The class is then made by :mod:`dataclasses` as before.

Two decisions a newcomer would otherwise undo:

* The table is one file per command, beside this package's own ``.pyc`` files (in their
  ``__pycache__``, or under ``sys.pycache_prefix``): whoever can write it can write those,
  so it adds no code a user did not already trust. It is written as a ``.pyc`` is: only
  when bytecode writing is on, atomically, silently not when the directory is read-only,
  and it starts with the interpreter's bytecode magic number (another interpreter's table
  is ignored). One file per command, not one for all: a table is read whole at each
  start, and ``see`` should not read what ``serve`` compiled.
* Only the command line's own process installs it (:func:`deepseek_eyes.cli.main` with no
  arguments), as it pauses the garbage collector; a caller in process keeps its
  :mod:`dataclasses` as they are.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["MAX_ENTRIES", "DataclassCode", "install", "table_path"]

#: Texts one table holds at most; past them a text is compiled and not kept (a command
#: creates a few hundred, so this only bounds a table that something unforeseen fills).
MAX_ENTRIES = 4096

#: A table's first bytes: our format, then the interpreter's bytecode magic number.
_HEADER = b"deepseek-eyes dataclass code 1\n" + importlib.util.MAGIC_NUMBER


def table_path(command: str) -> Path:
    """Where ``command``'s table lives: beside this module's own ``.pyc``."""
    own_pyc = Path(importlib.util.cache_from_source(__file__))
    return own_pyc.with_name(f"dataclass-code.{command}.{sys.implementation.cache_tag}.bin")


class DataclassCode:
    """A table of source text -> compiled code, read from ``path`` (an absent, foreign or
    damaged file is an empty table) and written back by :meth:`save` when it grew."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._code = _read(path)
        self._added = 0

    def __len__(self) -> int:
        return len(self._code)

    def exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:
        """``exec(source, globals, locals)``, with the code of a source text it has seen
        taken from the table instead of compiled again."""
        if not isinstance(source, str):
            exec(source, globals, locals)  # noqa: S102 (the caller's own code object)
            return
        code = self._code.get(source)
        if code is None:
            # dont_inherit: exec in dataclasses compiles with that module's flags, none;
            # this module's `annotations` future would turn the annotations into strings.
            code = compile(source, "<string>", "exec", dont_inherit=True)
            if len(self._code) < MAX_ENTRIES:
                self._code[source] = code
                self._added += 1
        exec(code, globals, locals)  # noqa: S102 (what dataclasses would have run)

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


def _read(path: Path) -> dict[str, CodeType]:
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
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def install(command: str) -> DataclassCode | None:
    """Give :mod:`dataclasses` the twin of ``exec`` over ``command``'s table, saved when
    the process exits; None (nothing installed) on an interpreter whose :mod:`dataclasses`
    does not compile through a module-level ``exec`` (3.11's does), or when another table
    is installed already."""
    if sys.version_info[:2] != (3, 11) or not hasattr(dataclasses, "_create_fn"):
        return None
    if "exec" in vars(dataclasses):
        return None
    try:
        path = table_path(command)
    except NotImplementedError:  # an interpreter that keeps no bytecode cache
        return None
    table = DataclassCode(path)
    dataclasses.exec = table.exec  # type: ignore[attr-defined]  # shadows the builtin there
    atexit.register(table.save)
    return table
