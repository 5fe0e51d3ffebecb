"""The boundary proved by observation: generated read-only plans run under strace.

For every catalogued read-only program with a getopt table, ``hypothesis`` writes argv from
that program's own option grammar (bundles, attached values, unique abbreviations, options
after operands, ``--``) with values drawn from an arena full of traps: symlinks out of the
workspace, NUL- and newline-separated file lists naming a canary outside, and a protected
data directory (a stand-in receipt keyring) *inside* the workspace. Every plan the policy
allows in read-only mode is then run exactly as the service runs it, under
``strace -f -e trace=execve,openat``, and the test fails on any program executed beyond the
planned one, any file opened outside the workspace and the system directories, any open
inside the protected directory, or a canary in the output.

The same arena proves the sandbox on its own: commands the policy would refuse are run inside
bubblewrap, and they still cannot see the keyring, the user's home or the canary.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepseek_eyes.terminal.execution.sandbox import SandboxPlan, child_environment, wrap_argv
from deepseek_eyes.terminal.policy.analysis import Effect
from deepseek_eyes.terminal.policy.getopt import ArgKind, OptionTable
from deepseek_eyes.terminal.policy.options import OPTION_TABLES
from deepseek_eyes.terminal.policy.programs import SIMPLE_TOOLS
from terminal.support import require_bwrap, require_executable, require_module
from terminal.tripwire import (
    Arena,
    assert_contained,
    build_arena,
    run_as_planned,
    trace_command,
)

hypothesis = require_module("hypothesis")
st = hypothesis.strategies

# Programs that never end or flood by design; they add nothing to what is proved.
_EXCLUDED = frozenset({"yes", "sleep", "tail", "seq", "shuf", "factor"})


@pytest.fixture(params=["data-inside", "data-outside"])
def arena(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Arena]:
    """The arena, with the protected data directory inside the workspace or beside it."""
    require_executable("strace")
    made = build_arena(tmp_path, protected_inside=request.param == "data-inside")
    yield made
    shutil.rmtree(made.home, ignore_errors=True)


def _values(arena: Arena) -> list[str]:
    return ["a.txt", "sub", "out-link", "out-link/secret.txt", "file-link", "deep", "list0",
            "list", str(arena.outside / "secret.txt"), ".", "..", "1", "x", "-",
            ".eyes-data", ".eyes-data/terminal/keyring.json", "e", "/"]


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def _programs() -> list[str]:
    names = []
    for name, spec in sorted(SIMPLE_TOOLS.items()):
        path = shutil.which(name)
        if (name in OPTION_TABLES and spec.effect is Effect.READ and name not in _EXCLUDED
                and path and _is_elf(os.path.realpath(path))):
            names.append(name)
    return names


PROGRAMS = _programs()


def _abbreviation(table: OptionTable, name: str) -> str:
    """The shortest unique prefix getopt accepts for ``--name``."""
    longs = table.long_names()
    for size in range(1, len(name) + 1):
        prefix = name[:size]
        if [n for n in longs if n.startswith(prefix)] == [name] or prefix == name:
            return prefix
    return name


def _focus(name: str) -> frozenset[str]:
    """The options that change what a program reaches (the spec's roles): drawn more often,
    so few examples still combine -R with -L; hypothesis draws the rest of the table too."""
    spec = SIMPLE_TOOLS[name]
    return (spec.follow | spec.recursive | spec.file_lists | spec.path_values
            | spec.write_values | spec.exec_options | spec.file_list_flags
            | frozenset(o for o, _ in spec.recursive_values))


@st.composite
def option_words(draw: st.DrawFn, table: OptionTable, values: list[str],
                 focus: frozenset[str] = frozenset()) -> list[str]:
    """One option as a person or an attacker might spell it."""
    value = draw(st.sampled_from(values))
    longs = table.long
    shorts = table.short
    focused_long = tuple((n, k) for n, k in longs if f"--{n}" in focus)
    focused_short = tuple((c, k) for c, k in shorts if f"-{c}" in focus)
    if (focused_long or focused_short) and draw(st.booleans()):
        longs = focused_long
        shorts = focused_short
    if longs and (not shorts or draw(st.booleans())):
        name, kind = draw(st.sampled_from(longs))
        spelled = "--" + (_abbreviation(table, name) if draw(st.booleans()) else name)
        if kind is ArgKind.NONE:
            return [spelled]
        if kind is ArgKind.OPTIONAL:
            return [f"{spelled}={value}"] if draw(st.booleans()) else [spelled]
        return [f"{spelled}={value}"] if draw(st.booleans()) else [spelled, value]
    flags = [c for c, k in shorts if k is ArgKind.NONE]
    bundle = "".join(draw(st.lists(st.sampled_from(flags), max_size=2))) if flags else ""
    letter, kind = draw(st.sampled_from(shorts))
    if kind is ArgKind.NONE:
        return ["-" + bundle + letter]
    if kind is ArgKind.OPTIONAL:
        return ["-" + bundle + letter + (value if draw(st.booleans()) else "")]
    if draw(st.booleans()):
        return ["-" + bundle + letter + value]
    return ["-" + bundle + letter, value]


@st.composite
def argvs(draw: st.DrawFn, name: str, values: list[str]) -> list[str]:
    table = OPTION_TABLES[name]
    words: list[str] = [name]
    for _ in range(draw(st.integers(0, 4))):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            words.append(draw(st.sampled_from(values)))
        elif choice == 1 and draw(st.booleans()):
            words.append("--")
        else:
            words += draw(option_words(table, values, _focus(name)))
    return words


@pytest.mark.parametrize("name", PROGRAMS)
def test_generated_read_only_plans_stay_inside(tmp_path: Path, name: str) -> None:
    """Catalogued programs, generated from their option grammar, observed under strace."""
    require_executable("strace")
    arena = build_arena(tmp_path)
    values = _values(arena)
    planned = {os.path.realpath(shutil.which(name) or name)}
    stats = {"allowed": 0, "refused": 0}

    @hypothesis.settings(max_examples=30, deadline=None, database=None,
                         derandomize=os.environ.get("CI", "").lower() == "true",
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(argv=argvs(name, values))
    def check(argv: list[str]) -> None:
        trace = run_as_planned(arena, argv, None)
        if trace is None:
            stats["refused"] += 1
            return
        stats["allowed"] += 1
        assert_contained(arena, argv, trace, planned)

    try:
        check()
    finally:
        shutil.rmtree(arena.home, ignore_errors=True)
    assert stats["allowed"] + stats["refused"] > 0


def test_the_catalogue_is_actually_exercised() -> None:
    """The generator covers the catalogue, not a handful of programs."""
    require_executable("strace")
    assert len(PROGRAMS) >= 20, PROGRAMS


@pytest.mark.parametrize("argv", [
    ["cat", "a.txt", "sub/c.txt"],
    ["grep", "-rn", "beta", "."],
    ["ls", "-laR", "."],
    ["du", "-a", "."],
    ["wc", "-l", "a.txt", "b.txt"],
    ["sort", "-u", "a.txt"],
    ["find", ".", "-name", "*.txt"],
    ["sed", "-n", "1p", "a.txt"],
    ["awk", "{print $1}", "a.txt"],
    ["head", "-n1", "a.txt"],
])
def test_everyday_reads_run_and_stay_inside(arena: Arena, argv: list[str]) -> None:
    """The tripwire is not vacuous: ordinary reads are allowed, run, and pass it. With the
    data directory inside the workspace, a read that would walk into it is refused."""
    trace = run_as_planned(arena, argv, None)
    walks = (argv[0] in ("grep", "ls", "du", "find") and argv[-1] == ".") or argv[0] == "find"
    if walks and arena.protected.parent == arena.ws:
        assert trace is None, f"{argv} walks into the data directory and must be refused"
        return
    assert trace is not None, f"{argv} should be allowed in read-only mode"
    assert trace.returncode == 0, trace.stderr
    planned = {os.path.realpath(shutil.which(argv[0]) or argv[0])}
    assert_contained(arena, argv, trace, planned)


def test_the_tripwire_fires_on_a_real_escape(arena: Arena) -> None:
    """Run an escape directly, bypassing the policy: the checks above must see it."""
    env = child_environment(arena.home, (str(arena.ws),))
    grep = os.path.realpath(shutil.which("grep") or "grep")
    trace = trace_command([grep, "-R", "CANARY", "."], cwd=str(arena.ws), env=env,
                          log_dir=arena.logs)
    with pytest.raises(AssertionError, match="opened"):
        assert_contained(arena, ["grep", "-R"], trace, {grep})


@pytest.mark.parametrize("argv", [
    ["cat", "{protected}/terminal/keyring.json"],
    ["grep", "-R", "CANARY", "/tmp", "/etc", "/var", "/run", "/root", "{home}",  # noqa: S108
     "{outside}"],
    ["cat", "{outside}/secret.txt"],
    ["ls", "-la", "{home}"],
    ["cat", "/etc/shadow"],
    ["find", "/", "-path", "/usr", "-prune", "-o", "-path", "/proc", "-prune", "-o",
     "-name", "keyring.json", "-print"],
])
def test_the_sandbox_is_the_boundary(arena: Arena, argv: list[str]) -> None:
    """Commands the policy refuses, run inside bubblewrap anyway: nothing secret is
    visible, even with the protected directory inside the workspace."""
    bwrap = require_bwrap()
    user_home = os.path.expanduser("~")
    argv = [a.format(protected=arena.protected, outside=arena.outside, home=user_home)
            for a in argv]
    exe = os.path.realpath(shutil.which(argv[0]) or argv[0])
    plan = SandboxPlan("bwrap", network=False, workspace_writable=False)
    spawn, _ = wrap_argv(argv, exe, str(arena.ws), arena.home, (str(arena.ws),), plan, bwrap,
                         (str(arena.protected),))
    env = child_environment(arena.home, (str(arena.ws),))
    trace = trace_command(spawn, cwd=str(arena.ws), env=env, log_dir=arena.logs, timeout=60)
    for canary in arena.canaries:
        assert canary not in trace.stdout + trace.stderr
    leaked = [p for p in trace.opens
              if p.startswith((str(arena.protected) + "/", str(arena.outside), "/etc/shadow"))
              or (p.startswith(user_home + "/") and not p.startswith(str(arena.ws)))]
    assert not leaked, leaked
