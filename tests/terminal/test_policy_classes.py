"""The read-only escapes, as classes with many spellings each.

Each class below was a real bypass (issue: "read-only must mean read-only"): option bundles
and attached values, awk's division/regex ambiguity, program text from files, link-following
reads, file-name lists, metadata of outside paths, the data directory inside a workspace,
and a repository whose own config runs programs. Every variant must be refused in
read-only mode and need approval (at least) in confirm mode; the everyday spelling next to
each class must still run.
"""


from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from deepseek_eyes.terminal.policy.analysis import Effect
from deepseek_eyes.terminal.policy.awkprogram import judge_awk_program, tokenize_awk
from deepseek_eyes.terminal.policy.engine import PolicyEngine
from deepseek_eyes.terminal.policy.getopt import OptionTable, parse_argv
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.policy.sedscript import read_sed_script


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.txt").write_text("beta\n")
    (root / "etc-link").symlink_to("/etc")
    (root / "sub" / "out").symlink_to(tmp_path / "outside")
    (root / "list0").write_bytes(b"/etc/passwd\0")
    (root / "list").write_text("/etc/passwd\n")
    (root / "prog.awk").write_text('BEGIN { system("id") }\n')
    (root / "script.sed").write_text("1e id\n")
    data = root / ".eyes-data" / "terminal"
    data.mkdir(parents=True)
    (data / "keyring.json").write_text("{}")
    (root / "key-link").symlink_to(data / "keyring.json")
    return root


@pytest.fixture
def engine(ws: Path) -> PolicyEngine:
    return PolicyEngine(Workspace.of([ws], [ws / ".eyes-data"]))


def _never_unasked(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    ro = engine.evaluate(argv=argv, cwd=str(ws), mode="read-only")
    assert not ro.decision.allowed, (argv, ro.decision)
    confirm = engine.evaluate(argv=argv, cwd=str(ws), mode="confirm")
    assert not confirm.decision.allowed or confirm.decision.requires_approval, (
        argv, confirm.decision)


def _runs(engine: PolicyEngine, ws: Path, argv: list[str], cwd: Path | None = None) -> None:
    ro = engine.evaluate(argv=argv, cwd=str(cwd or ws), mode="read-only")
    assert ro.decision.allowed, (argv, ro.decision)
    assert not ro.decision.requires_approval, (argv, ro.decision)


# -- class 1: the argv as the program reads it ------------------------------------------------

SED_EXEC = [
    ["sed", "-ne", "1e id", "p", "a.txt"],
    ["sed", "-n", "-e", "1e id", "a.txt"],
    ["sed", "-sne", "$e id", "a.txt"],
    ["sed", "--expression=1e id", "a.txt"],
    ["sed", "--expr", "1e id", "a.txt"],
    ["sed", "--e=1e id", "a.txt"],
    ["sed", "a.txt", "-e", "1!e id"],  # an option after an operand is still an option
    ["sed", "-e", "p", "-e", "e id", "a.txt"],
    ["sed", "-E", "s/x/y/e", "a.txt"],
    ["sed", "--quiet", "s/a/b/w out.txt", "a.txt"],
    ["sed", "-n", "/e/ { s/a/b/ ; w out.txt", "-e", "}", "a.txt"],
    ["sed", "-f", "script.sed", "a.txt"],
    ["sed", "-fscript.sed", "a.txt"],
    ["sed", "--file=script.sed", "a.txt"],
    ["sed", "-n", "r /etc/passwd", "a.txt"],
    ["sed", "-i", "s/a/b/", "a.txt"],
    ["sed", "-i.bak", "p", "a.txt"],
    ["sed", "--in-place=.bak", "p", "a.txt"],
    ["sed", "--", "e id", "a.txt"],
    ["sed", "y/a/b/;e", "a.txt"],
    ["sed", "--s", "p", "a.txt"],  # ambiguous abbreviation: sed itself would refuse it
]


@pytest.mark.parametrize("argv", SED_EXEC, ids=repr)
def test_sed_variants_never_run_unasked(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _never_unasked(engine, ws, argv)


@pytest.mark.parametrize("argv", [
    ["sed", "-n", "1p", "a.txt"], ["sed", "-ne", "s/e/w/p", "a.txt"],
    ["sed", "-E", "s/(a)/[\\1]/g", "a.txt"], ["sed", "1a e w r", "a.txt"],
    ["sed", "-n", "/e/{p;q}", "a.txt"], ["sed", ":a;N;$!ba;s/\\n/ /g", "a.txt"],
    ["sed", "--quiet", "--regexp-extended", "$=", "a.txt"],
], ids=repr)
def test_sed_filters_still_run(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _runs(engine, ws, argv)


AWK_ESCAPES = [
    ["awk", 'BEGIN{a = 4 / 2; system("id"); b = a / 2}'],
    ["awk", 'BEGIN { x = 10 / 5 ; system ("id") ; y = x / 2 }'],
    ["awk", '{ n = NR / 2 } END { system("id") }'],
    ["awk", 'BEGIN{s="/"; system("id"); t="/"}'],
    ["awk", '$1 / 2 { print }  END { system("id") }  # /'],
    ["awk", '{ print $1 | "sh" }', "a.txt"],
    ["awk", 'BEGIN { "id" | getline x; print x }'],
    ["awk", 'BEGIN { while (("id" |& getline line) > 0) print line }'],
    ["awk", '{ printf "%s", $0 > "out.txt" }', "a.txt"],
    ["awk", '{ print >> "out.txt" }', "a.txt"],
    ["awk", 'BEGIN { getline l < "/etc/passwd"; print l }'],
    ["awk", 'BEGIN { ARGV[1] = "/etc/passwd"; ARGC = 2 } { print }', "a.txt"],
    ["awk", '@load "filefuncs"; BEGIN { }'],
    ["awk", 'BEGIN { f = "system"; @f("id") }'],
    ["awk", "-f", "prog.awk"],
    ["awk", "-fprog.awk"],
    ["awk", "-W", "exec", "prog.awk"],
    ["awk", "-Wexec", "prog.awk"],
    ["awk", "-We", "prog.awk"],
    ["awk", "-E", "prog.awk"],
    ["awk", "--exec=prog.awk"],
    ["awk", "-i", "prog"],
    ["awk", "-l", "lib"],
    ["awk", "-v", "x=1", "-f", "prog.awk", "a.txt"],
    ["awk", "-e", 'BEGIN { system("id") }'],
    ["awk", "--source", 'BEGIN { system("id") }'],
    ["awk", "{ print }", "/etc/passwd"],
]


@pytest.mark.parametrize("argv", AWK_ESCAPES, ids=repr)
def test_awk_variants_never_run_unasked(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _never_unasked(engine, ws, argv)


@pytest.mark.parametrize("argv", [
    ["awk", "{ print $1 / 2 }", "a.txt"], ["awk", "/alpha|beta/ { n++ } END { print n }", "a.txt"],
    ["awk", "-F:", "{ print $1 }", "a.txt"], ["awk", "-v", "x=1", "{ print x, $0 }", "a.txt"],
    ["awk", '{ print "system(1) | x > y" }', "a.txt"], ["awk", "{ if ($1 > 1) print }", "a.txt"],
    ["awk", "{ print length / 2 }", "a.txt"],
], ids=repr)
def test_awk_reads_still_run(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _runs(engine, ws, argv)


@pytest.mark.parametrize("argv", [
    ["git", "grep", "-Oid", "root"], ["git", "grep", "-nOid", "root"],
    ["git", "grep", "-iO", "root"], ["git", "grep", "-O", "root"],
    ["git", "grep", "--open-files-in-pager=id", "root"], ["git", "grep", "--open", "root"],
    ["git", "-c", "core.pager=id", "log"], ["git", "diff", "--ext-diff"],
    ["git", "log", "--output=x.txt"], ["git", "diff", "-Oorder.txt"],
    ["git", "--git-dir=/tmp/other", "log"],
], ids=repr)
def test_git_variants_never_run_unasked(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _never_unasked(engine, ws, argv)


# -- class 2: a read is a read of everything it will open --------------------------------------

LINK_FOLLOWING = [
    ["grep", "--dereference-recursive", "root", "."],
    ["grep", "-R", "root", "."],
    ["grep", "-R", "root"],  # no operand: grep -R reads "."
    ["grep", "-nR", "root", "sub"],
    ["grep", "--dere", "root", "."],
    ["grep", "-r", "-R", "root", "."],
    ["ls", "-RL", "."],
    ["ls", "-L", "-R"],
    ["ls", "--dereference", "--recursive", "sub"],
    ["ls", "-lL", "sub"],
    ["du", "-L", "."],
    ["du", "--dereference", "sub"],
    ["find", "-L", ".", "-name", "passwd"],
    ["find", "sub", "-follow", "-name", "secret.txt"],
    ["diff", "-r", "sub", "a.txt"],
    ["cp", "-rL", "sub", "copy"],
]


@pytest.mark.parametrize("argv", LINK_FOLLOWING, ids=repr)
def test_link_following_reads_are_judged_on_what_they_reach(
    engine: PolicyEngine, ws: Path, argv: list[str]
) -> None:
    _never_unasked(engine, ws, argv)


@pytest.mark.parametrize("argv", [
    ["sort", "--files0-from=list0"], ["sort", "--files0=list0"], ["sort", "--files0-f", "list0"],
    ["wc", "--files0-from=list0"], ["wc", "--files0-from", "list0"],
    ["du", "--files0-from=list0"], ["file", "-f", "list"], ["file", "--files-from=list"],
    ["find", "-files0-from", "list0"],
], ids=repr)
def test_file_lists_need_approval(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _never_unasked(engine, ws, argv)


@pytest.mark.parametrize("argv", [
    ["realpath", "/etc"], ["realpath", "etc-link"], ["realpath", "--relative-to=/etc", "a.txt"],
    ["readlink", "-f", "etc-link"], ["readlink", "/etc/alternatives/awk"],
    ["test", "-e", "/etc/shadow"], ["[", "-e", "/etc/passwd", "]"], ["stat", "/etc/passwd"],
    ["ls", "-la", "etc-link/"],
], ids=repr)
def test_metadata_outside_is_outside(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _never_unasked(engine, ws, argv)


@pytest.mark.parametrize("argv", [
    ["cat", ".eyes-data/terminal/keyring.json"], ["cat", "key-link"],
    ["ls", ".eyes-data"], ["grep", "-r", "key", "."], ["grep", "-r", "key"],
    ["find", ".", "-name", "*.json"], ["du", "-a", "."], ["ls", "-R"],
    ["head", "./.eyes-data/../.eyes-data/terminal/keyring.json"],
], ids=repr)
def test_the_data_directory_is_never_reachable(
    engine: PolicyEngine, ws: Path, argv: list[str]
) -> None:
    _never_unasked(engine, ws, argv)
    trusted = engine.evaluate(argv=argv, cwd=str(ws), mode="trusted")
    assert not trusted.decision.allowed


@pytest.mark.parametrize("argv", [
    ["grep", "-rn", "alpha", "sub"], ["grep", "-R", "alpha", "a.txt"], ["ls", "-la"],
    ["ls", "-R", "sub"], ["du", "-sh", "sub"], ["find", "sub", "-name", "*.txt"],
    ["sort", "a.txt"], ["wc", "-l", "a.txt"], ["realpath", "sub/b.txt"], ["test", "-e", "a.txt"],
    ["cat", "a.txt"],
], ids=repr)
def test_the_everyday_spellings_still_run(engine: PolicyEngine, ws: Path, argv: list[str]) -> None:
    _runs(engine, ws, argv)


# -- class 3: the repository is part of what git reads -----------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,  # noqa: S603, S607
                   env={"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"})


def test_a_repository_config_that_runs_programs_needs_approval(
    engine: PolicyEngine, ws: Path
) -> None:
    _git(ws, "init", "-q")
    _runs(engine, ws, ["git", "log", "-p"])
    with (ws / ".git" / "config").open("a") as fh:
        fh.write('[diff "x"]\n\ttextconv = sh -c id\n')
    (ws / ".gitattributes").write_text("* diff=x\n")
    _never_unasked(engine, ws, ["git", "log", "-p"])
    _never_unasked(engine, ws, ["git", "-C", "sub", "diff"])


def test_a_workspace_inside_a_larger_repository_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "inner").mkdir(parents=True)
    _git(repo, "init", "-q")
    engine = PolicyEngine(Workspace.of([repo / "inner"]))
    result = engine.evaluate(argv=["git", "status"], cwd=str(repo / "inner"), mode="trusted")
    assert not result.decision.allowed
    assert "outside the workspace" in " ".join(result.decision.reasons)


# -- the readers themselves ---------------------------------------------------------------------


def test_getopt_reads_like_glibc() -> None:
    table = OptionTable.of("nse:f:i::", "quiet silent expression= file= in-place[=] separate")
    parsed = parse_argv(table, ["-ne", "1e id", "p", "-i", "x", "--", "-e"])
    assert [(u.option, u.value) for u in parsed.uses] == [("-n", None), ("-e", "1e id"),
                                                          ("-i", None)]
    assert parsed.operands == ["p", "x", "-e"]
    assert parse_argv(table, ["--expr=p"]).uses[0].option == "--expression"
    assert parse_argv(table, ["--s"]).problems  # silent / separate: ambiguous
    assert parse_argv(table, ["--quiet=1"]).problems
    assert parse_argv(table, ["-e"]).problems
    assert parse_argv(table, ["-x"]).problems
    assert parse_argv(OptionTable.of("+n"), ["a", "-n"]).operands == ["a", "-n"]


def test_the_awk_lexer_divides_where_awk_divides() -> None:
    kinds = [t.kind for t in tokenize_awk('BEGIN{a = 4 / 2; system("id"); b = a / 2}')]
    assert "regex" not in kinds
    assert [t.kind for t in tokenize_awk("$0 ~ /a\\/b[/]/")][-1] == "regex"
    assert judge_awk_program('{ x = /[/]/ ; print x }') == []


def test_the_sed_reader_names_files() -> None:
    reading = read_sed_script("1r in.txt\ns/a/b/w out.txt\n$W other.txt")
    assert reading.reads == ["in.txt"]
    assert reading.writes == ["out.txt", "other.txt"]
    assert [e for e, _ in read_sed_script("1{p").effects] == [Effect.UNKNOWN]


@pytest.mark.parametrize(("argv", "runs"), [
    (["env", "LANG=C.UTF-8", "cat", "a.txt"], True),
    (["env", "TZ=UTC", "date"], True),
    (["env", "LC_ALL=/tmp/evil-locale", "cat", "a.txt"], False),  # a path: loads a file
    (["env", "TZ=:/etc/shadow", "date"], False),
    (["env", "GZIP=-S.x", "cat", "a.txt"], False),  # adds options to another program
    (["env", "GLIBC_TUNABLES=glibc.malloc.check=3", "cat", "a.txt"], False),
    (["env", "MAGIC=/tmp/m", "file", "a.txt"], False),
    (["env", "SOMETHING=1", "cat", "a.txt"], False),  # unknown names are not harmless
], ids=repr)
def test_env_assignments_only_for_display_and_locale(
    engine: PolicyEngine, ws: Path, argv: list[str], runs: bool
) -> None:
    if runs:
        _runs(engine, ws, argv)
    else:
        _never_unasked(engine, ws, argv)


def test_a_dotdot_after_a_symlink_is_resolved_as_the_kernel_does(
    engine: PolicyEngine, ws: Path, tmp_path: Path
) -> None:
    """``sub/out/../x`` is ``x`` beside the link's target (outside), not ``sub/x``."""
    (tmp_path / "x.txt").write_text("outside\n")
    (ws / "sub" / "x.txt").write_text("inside\n")
    _never_unasked(engine, ws, ["cat", "sub/out/../x.txt"])
    _runs(engine, ws, ["cat", "sub/../sub/x.txt"])


@pytest.mark.parametrize("argv", [
    ["hexdump", "--format-file=.eyes-data/terminal/keyring.json", "a.txt"],
    ["hexdump", "--format-f", "/etc/passwd", "a.txt"],
    ["rg", "-L", "root"], ["rg", "--follow", "root", "."], ["rg", "key"],
], ids=repr)
def test_long_aliases_and_own_parsers_are_judged_like_the_rest(
    engine: PolicyEngine, ws: Path, argv: list[str]
) -> None:
    """A valued option whose role the spec does not name is a path (hexdump's
    --format-file, found by the tripwire); rg follows links with -L and reads "." (with
    the data directory in it) when given no path (where rg is not installed, it is refused
    as not found)."""
    _never_unasked(engine, ws, argv)
