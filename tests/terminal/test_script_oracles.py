"""The sed and awk readers checked against the real programs, on generated scripts.

``hypothesis`` assembles sed scripts and awk programs from pieces chosen to confuse a reader
that is not the program's own: commands hidden in appended text, ``e`` after addresses,
divisions that look like regex delimiters, ``system`` inside strings and comments, pipes
inside regexes. Each is planned in read-only mode; whenever the policy allows it, the real
GNU sed or mawk runs it under strace, and the test fails if the program executed anything
or created the marker file. The program is the oracle; the policy's verdict is not trusted.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from terminal.support import require_executable, require_module
from terminal.tripwire import Arena, assert_contained, build_arena, run_as_planned

hypothesis = require_module("hypothesis")
st = hypothesis.strategies

_SETTINGS = hypothesis.settings(
    max_examples=60, deadline=None, database=None,
    derandomize=os.environ.get("CI", "").lower() == "true",
    suppress_health_check=list(hypothesis.HealthCheck),
)

_SED_ADDRESSES = ["", "1", "$", "/e/", "\\%w%", "1,2", "0,/a/", "2~1", "/a/,+1", "1!"]
_SED_COMMANDS = [
    "p", "d", "=", "l", "s/e/w/g", "s/a/b/2", "y/ew/we/", "{p}", "a e touch MARK",
    "i\\\ne touch MARK", "c w MARK", ":x", "bx", "n", "G", "h", "x", "q",
    "e touch MARK", "s/.*/touch MARK/e", "w MARK", "s/a/b/w MARK", "W MARK",
    "s/e/touch MARK/;e", "1e touch MARK", "s|/|w MARK|", "r ../outside/secret.txt",
]
_SED_SEPARATORS = [";", "\n", " ; ", ";\n"]


@st.composite
def sed_argvs(draw: st.DrawFn) -> list[str]:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        parts.append(draw(st.sampled_from(_SED_ADDRESSES)) + draw(st.sampled_from(_SED_COMMANDS)))
        parts.append(draw(st.sampled_from(_SED_SEPARATORS)))
    script = "".join(parts[:-1])
    spelling = draw(st.integers(0, 5))
    if spelling == 0:
        return ["sed", "-n", "-e", script, "a.txt"]
    if spelling == 1:
        return ["sed", "-ne", script, "a.txt"]
    if spelling == 2:
        return ["sed", f"--expression={script}", "a.txt"]
    if spelling == 3:
        return ["sed", "a.txt", "--expr", script]
    if spelling == 4:
        return ["sed", "-s", "-E", script, "a.txt"]
    return ["sed", script, "a.txt"]


_AWK_STATEMENTS = [
    "x = 4 / 2", "y = x / 2", 'system("touch MARK")', "print $1", 'print > "MARK"',
    '"touch MARK" | getline v', "n++", "print length / 2", 's = "/"', 't = "system(1)"',
    "if ($1 ~ /a\\/b/) print", "z = /e/ ? 1 : 0", 'getline line < "../outside/secret.txt"',
    'print "a" | "cat"', 'printf "%s", $0 > "MARK"', "w = NR / 3", 'print "|"',
    'q = "a" ; r = q / 1', "k = $1 / 2", "m = (1 > 0)", 'print (1 > 0) ? "y" : "n"',
    'system ("touch MARK")', 'ARGV[1] = "../outside/secret.txt"',
]


@st.composite
def awk_argvs(draw: st.DrawFn) -> list[str]:
    statements = draw(st.lists(st.sampled_from(_AWK_STATEMENTS), min_size=1, max_size=4))
    body = draw(st.sampled_from(["; ", "\n", " ;\n"])).join(statements)
    comment = draw(st.sampled_from(["", ' # system("touch MARK") /', " # /"]))
    shape = draw(st.integers(0, 2))
    if shape == 0:
        program = "BEGIN { " + body + " }" + comment
    elif shape == 1:
        program = "{ " + body + " }" + comment
    else:
        program = "/a/ { " + body + " } END { print NR / 2 }" + comment
    return ["awk", program, "a.txt"]


def _run(tmp_path: Path, argv: list[str], stats: dict[str, int]) -> None:
    arena: Arena = build_arena(tmp_path / f"case{stats['n']}")
    stats["n"] += 1
    try:
        trace = run_as_planned(arena, argv, None)
        if trace is None:
            stats["refused"] += 1
            return
        stats["allowed"] += 1
        planned = {os.path.realpath(shutil.which(argv[0]) or argv[0])}
        assert_contained(arena, argv, trace, planned)
        assert not (arena.ws / "MARK").exists(), f"{argv!r} was allowed and wrote MARK"
    finally:
        shutil.rmtree(arena.home, ignore_errors=True)


@pytest.mark.parametrize("strategy", [sed_argvs, awk_argvs], ids=["gnu-sed", "mawk"])
def test_generated_scripts_agree_with_the_real_program(
    tmp_path: Path, strategy: Callable[[], st.SearchStrategy[list[str]]]
) -> None:
    require_executable("strace")
    stats = {"n": 0, "allowed": 0, "refused": 0}

    @_SETTINGS
    @hypothesis.given(argv=strategy())
    def check(argv: list[str]) -> None:
        _run(tmp_path, argv, stats)

    check()
    assert stats["allowed"] > 0, stats  # the oracle ran real scripts, not only refusals
    assert stats["refused"] > 0, stats
