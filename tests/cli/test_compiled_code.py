"""The table of compiled source texts the command line keeps between runs
(cli/compiled_code.py): a hit is the code the library would have compiled, a class or a
forward reference made through it is the same, and the table is written like a ``.pyc``
or not at all."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import deepseek_eyes
from deepseek_eyes.cli import compiled_code
from deepseek_eyes.cli.compiled_code import CompiledCode

SRC = Path(deepseek_eyes.__file__).resolve().parents[1]

_SOURCE = "def __create_fn__(_type_x):\n def f(self, x: _type_x) -> None:\n  self.x = x\n return f"


def _made(table: CompiledCode | None, monkeypatch: pytest.MonkeyPatch) -> type:
    """A frozen dataclass with a default, made through ``table`` (None: as Python does)."""
    if table is not None:
        monkeypatch.setattr(dataclasses, "exec", table.exec, raising=False)

    # Annotations as objects (this module's own are strings): the generated __init__ then
    # annotates with the objects, unless a `from __future__ import annotations` leaked
    # into its compilation.
    point = dataclasses.make_dataclass(
        "Point", [("x", int), ("label", str, dataclasses.field(default="p"))], frozen=True)
    monkeypatch.delattr(dataclasses, "exec", raising=False)
    return point


def test_a_seen_text_runs_the_code_compile_would_make(tmp_path: Path) -> None:
    table = CompiledCode(tmp_path / "t.bin")
    first: dict[str, object] = {}
    table.exec(_SOURCE, {}, first)
    again: dict[str, object] = {}
    table.exec(_SOURCE, {}, again)
    assert len(table) == 1  # compiled once, then taken from the table
    expected = compile(_SOURCE, "<string>", "exec", dont_inherit=True)
    assert table._code["exec", _SOURCE] == expected
    assert first["__create_fn__"].__code__ == again["__create_fn__"].__code__  # type: ignore[attr-defined]


def test_a_class_made_through_the_table_is_the_class_python_makes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = CompiledCode(tmp_path / "t.bin")
    plain = _made(None, monkeypatch)
    cached = [_made(table, monkeypatch) for _ in range(2)][-1]  # the second from the table
    assert len(table) > 0
    assert table._added == len(table)
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        assert getattr(cached, name).__code__ == getattr(plain, name).__code__, name
    assert cached.__init__.__annotations__ == plain.__init__.__annotations__
    assert cached.__init__.__annotations__["x"] is int
    assert str(inspect.signature(cached)) == str(inspect.signature(plain))
    point = cached(1)
    assert repr(point).endswith("Point(x=1, label='p')")
    assert point == cached(1)
    assert hash(point) == hash(cached(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]


def test_a_saved_table_is_read_back_and_only_a_grown_one_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "cache" / "t.bin"
    table = CompiledCode(path)
    table.save()
    assert not path.exists()  # nothing compiled, nothing written
    table.exec(_SOURCE, {}, {})
    table.save()
    again = CompiledCode(path)
    assert again._code == table._code
    assert again._added == 0
    written = path.stat().st_mtime_ns
    again.save()
    assert path.stat().st_mtime_ns == written
    assert [p.name for p in path.parent.iterdir()] == ["t.bin"]  # no temp file left


def test_no_table_is_written_when_bytecode_writing_is_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    table = CompiledCode(tmp_path / "t.bin")
    table.exec(_SOURCE, {}, {})
    table.save()
    assert not (tmp_path / "t.bin").exists()


def test_an_unwritable_place_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    table = CompiledCode(blocker / "t.bin")  # its directory is a file
    table.exec(_SOURCE, {}, {})
    table.save()
    assert blocker.read_bytes() == b""


@pytest.mark.parametrize("content", [
    b"",
    b"not a table",
    b"deepseek-eyes compiled code 1\n\x00\x00\x0d\x0a\x00" + b"\xe3",  # another interpreter's
])
def test_a_foreign_or_damaged_table_is_an_empty_one(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "t.bin"
    path.write_bytes(content)
    assert len(CompiledCode(path)) == 0


def test_a_table_compiled_under_another_optimization_level_is_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "t.bin"
    table = CompiledCode(path)
    table.exec(_SOURCE, {}, {})
    table.save()
    assert len(CompiledCode(path)) == 1
    data = bytearray(path.read_bytes())
    level = len(compiled_code._HEADER) - 1
    data[level] = 2  # what `python -OO` would have written
    path.write_bytes(bytes(data))
    assert len(CompiledCode(path)) == 0


def test_a_truncated_table_is_an_empty_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "t.bin"
    table = CompiledCode(path)
    table.exec(_SOURCE, {}, {})
    table.save()
    path.write_bytes(path.read_bytes()[:-7])
    assert len(CompiledCode(path)) == 0


_PROBE = """
import dataclasses, json, sys, typing
sys.argv = ["deepseek-eyes", *sys.argv[1:]]
from deepseek_eyes.cli import main
try:
    main()
except SystemExit:
    pass
table = getattr(vars(dataclasses).get("exec"), "__self__", None)
assert table is getattr(vars(typing).get("compile"), "__self__", None)
print(json.dumps(None if table is None else {"entries": len(table), "added": table._added,
                                             "path": str(table.path)}))
"""


def _run(tmp_path: Path, *args: str) -> object:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(SRC), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"),
               DEEPSEEK_EYES_HOME=str(tmp_path / "home"))
    done = subprocess.run(  # noqa: S603 (this interpreter, our own probe)
        [sys.executable, "-c", _PROBE, *args], env=env, capture_output=True, text=True,
        check=True, timeout=60)
    return json.loads(done.stdout.splitlines()[-1])


def test_the_command_line_keeps_a_table_per_command_beside_its_bytecode(tmp_path: Path) -> None:
    first = _run(tmp_path, "see", "--help")
    assert isinstance(first, dict)
    assert first["entries"] > 0
    assert first["added"] == first["entries"]
    path = Path(first["path"])
    assert path.is_relative_to(tmp_path / "pycache")  # where this interpreter's .pyc go
    assert path.name == f"compiled-code.see.{sys.implementation.cache_tag}.bin"
    assert path.exists()
    second = _run(tmp_path, "see", "--help")
    assert second == {**first, "added": 0}  # every method's code came from the table
    assert _run(tmp_path, "--version") is None  # no command, no table


def test_a_caller_in_process_keeps_dataclasses_as_they_are(
        capsys: pytest.CaptureFixture[str]) -> None:
    from deepseek_eyes.cli import main

    main(["see", "--help"])
    assert "Usage:" in capsys.readouterr().out
    assert "exec" not in vars(dataclasses)
    assert "compile" not in vars(typing)


def test_one_table_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second install (a command line started again in the same process) keeps the
    first table rather than wrapping it."""
    monkeypatch.setattr(compiled_code, "table_path", lambda command: tmp_path / command)
    monkeypatch.setattr(compiled_code.atexit, "register", lambda function: function)
    monkeypatch.delattr(dataclasses, "exec", raising=False)
    monkeypatch.delattr(typing, "compile", raising=False)
    first = compiled_code.install("see")
    assert first is not None
    assert dataclasses.exec == first.exec  # type: ignore[attr-defined]
    assert typing.compile == first.compile  # type: ignore[attr-defined]
    assert compiled_code.install("ask") is None
    monkeypatch.delattr(dataclasses, "exec")
    monkeypatch.delattr(typing, "compile")


def test_a_forward_reference_made_through_the_table_is_the_one_python_makes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = CompiledCode(tmp_path / "t.bin")
    monkeypatch.setattr(typing, "compile", table.compile, raising=False)
    cached = [typing.ForwardRef("dict[str, int] | None") for _ in range(2)][-1]
    star = typing.ForwardRef("*tuple[int, str]")
    with pytest.raises(SyntaxError, match="Forward reference must be an expression"):
        typing.ForwardRef("not an expression")
    monkeypatch.delattr(typing, "compile")
    assert len(table) == 2  # the refused text was not kept
    plain = typing.ForwardRef("dict[str, int] | None")
    assert cached.__forward_code__ == plain.__forward_code__
    assert star.__forward_code__ == typing.ForwardRef("*tuple[int, str]").__forward_code__
    assert typing._eval_type(cached, {}, {}) == dict[str, int] | None  # type: ignore[attr-defined]


def test_a_call_typing_does_not_make_is_passed_on(tmp_path: Path) -> None:
    table = CompiledCode(tmp_path / "t.bin")
    code = table.compile("x = 1", "file.py", "exec")
    assert code.co_filename == "file.py"
    assert len(table) == 0
