"""The policy corpus: dangerous commands never run unasked, everyday reads always run."""

# ruff: noqa: S108 - the /tmp paths are attack strings and expected values, never used
from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepseek_eyes.terminal.policy.analysis import Effect, Findings
from deepseek_eyes.terminal.policy.engine import PolicyEngine
from deepseek_eyes.terminal.policy.grammars import (
    awk_program_problem,
    rg_grammar,
    sed_script_problem,
)
from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.policy.transfer import rsync_grammar, ssh_grammar, tar_grammar


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "data.csv").write_text("a,b\n1,2\n")
    (root / "archive.tar").write_bytes(b"")
    (root / "etc-link").symlink_to("/etc")
    (root / "passwd-link").symlink_to("/etc/passwd")
    (root / "ls").symlink_to("/usr/bin/rm")  # a symlink named like a safe program
    (root / "up").symlink_to("..")
    run = root / "run.sh"
    run.write_text("#!/bin/sh\necho hi\n")
    run.chmod(0o755)
    return root


@pytest.fixture
def engine(ws: Path) -> PolicyEngine:
    return PolicyEngine(Workspace.of([ws]))


# Each entry is an argv list or a command string. None may run in read-only mode, and none
# may run in confirm mode without an approval.
DANGEROUS: list[list[str] | str] = [
    # shell composition in a command string
    "ls; rm -rf /",
    "ls && rm -rf .",
    "ls || rm -rf .",
    "cat README.md | sh",
    "echo $(id)",
    "echo `id`",
    "echo $HOME",
    "echo ${HOME}",
    "cat README.md > /tmp/x",
    "cat < /etc/passwd",
    "ls\nrm -rf .",
    "ls\rrm -rf .",
    "ls &",
    "rm -rf *",
    "cat ~/.ssh/id_rsa",
    "ls # comment",
    "FOO=bar ls",
    'echo "$(id)"',
    'echo "`id`"',
    "ls {a,b}",
    "echo 'unterminated",
    "(ls)",
    # NUL, control and invisible characters
    ["ls", "a\x00b"],
    ["ls\u200b"],
    ["l\u202es"],
    ["cat", "README\u202e.md"],
    ["lś"],
    ["ls", "-la\x1b[2J"],
    # absolute paths, symlinks, .., /proc, /dev/fd outside the workspace
    ["cat", "/etc/passwd"],
    ["/bin/cat", "/etc/shadow"],
    ["cat", "../../../../etc/passwd"],
    ["cat", "etc-link/passwd"],
    ["cat", "passwd-link"],
    ["cat", "up/outside.txt"],
    ["cat", "/proc/self/environ"],
    ["cat", "/proc/self/root/etc/passwd"],
    ["cat", "/dev/fd/0"],
    ["head", "/dev/sda"],
    ["grep", "-r", "root", "/etc"],
    ["grep", "-f", "/etc/passwd", "README.md"],
    ["ls", "--ignore-backups", "/"],
    ["cat", "-v/etc/passwd"],
    # programs outside the system directories, and symlinks named like safe programs
    ["/tmp/evil"],
    ["./ls", "-rf", "src"],
    ["./run.sh"],
    ["./up/ws/run.sh"],
    # find
    ["find", ".", "-exec", "sh", "-c", "id", ";"],
    ["find", ".", "-name", "*.py", "-exec", "rm", "{}", "+"],
    ["find", ".", "-execdir", "cat", "{}", ";"],
    ["find", ".", "-ok", "rm", "{}", ";"],
    ["find", ".", "-delete"],
    ["find", ".", "-fprint", "/tmp/out"],
    ["find", "/", "-name", "id_rsa"],
    ["find", "-L", ".", "-name", "x"],
    ["find", ".", "-exec", "id"],
    # git
    ["git", "-c", "core.pager=sh -c id", "log"],
    ["git", "-c", "core.fsmonitor=touch /tmp/pwn", "status"],
    ["git", "--config-env=core.pager=X", "log"],
    ["git", "--exec-path=/tmp", "status"],
    ["git", "fetch", "--upload-pack=touch /tmp/pwn", "origin"],
    ["git", "ls-remote", "--upload-pack", "sh -c id", "x"],
    ["git", "clone", "ext::sh -c touch% /tmp/pwn", "dir"],
    ["git", "log", "--output=/tmp/x"],
    ["git", "diff", "--ext-diff"],
    ["git", "grep", "-O", "foo"],
    ["git", "config", "core.pager", "sh"],
    ["git", "push", "origin", "main"],
    ["git", "commit", "-m", "x"],
    ["git", "-C", "/", "status"],
    ["git", "my-alias"],
    ["git", "branch", "-D", "main"],
    ["git", "rebase", "--exec", "id", "HEAD~1"],
    ["git", "submodule", "foreach", "id"],
    # sed, awk
    ["sed", "-i", "s/a/b/", "README.md"],
    ["sed", "s/a/id/e", "README.md"],
    ["sed", "1e id", "README.md"],
    ["sed", "w /tmp/out", "README.md"],
    ["sed", "s/a/b/w /tmp/out", "README.md"],
    ["sed", "r /etc/passwd", "README.md"],
    ["sed", "-f", "script.sed", "README.md"],
    ["sed", "--in-place=.bak", "s/a/b/", "README.md"],
    ["awk", 'BEGIN { system("id") }'],
    ["awk", '{ print | "sh" }', "README.md"],
    ["awk", '{ print > "/tmp/out" }', "README.md"],
    ["awk", 'BEGIN { while ((getline line < "/etc/passwd") > 0) print line }'],
    ["awk", 'BEGIN { ARGV[1] = "/etc/passwd"; ARGC = 2 } { print }'],
    ["awk", "-f", "prog.awk", "README.md"],
    # tar, sort, tree-like writers
    ["tar", "-xf", "archive.tar"],
    ["tar", "xf", "archive.tar"],
    ["tar", "-cf", "out.tar", "src"],
    ["tar", "-tf", "archive.tar", "--to-command=sh"],
    ["tar", "-cf", "x.tar", "--checkpoint=1", "--checkpoint-action=exec=id", "src"],
    ["tar", "-tf", "archive.tar", "-I", "sh"],
    ["tar", "-tf", "archive.tar", "--use-compress-prog=sh"],
    ["tar", "-tf", "/etc/archive.tar"],
    ["sort", "-o", "/tmp/out", "data.csv"],
    ["sort", "--output=data.csv", "data.csv"],
    ["sort", "--compress-program=sh", "data.csv"],
    ["sort", "--compress-prog=sh", "data.csv"],
    ["uniq", "data.csv", "out.csv"],
    ["xxd", "README.md", "out.bin"],
    ["shuf", "-o", "/tmp/x", "data.csv"],
    ["date", "-s", "2020-01-01"],
    ["hostname", "evil"],
    ["dd", "if=/dev/zero", "of=README.md"],
    # wrappers judged by what they run
    ["env", "sh", "-c", "id"],
    ["env", "LD_PRELOAD=/tmp/x.so", "ls"],
    ["env", "PATH=/tmp", "ls"],
    ["env", "-S", "sh -c id"],
    ["timeout", "5", "sh", "-c", "id"],
    ["timeout", "-s", "KILL", "5", "python3", "-c", "1"],
    ["nice", "-n", "5", "rm", "-rf", "src"],
    ["nohup", "perl", "-e", "1"],
    ["xargs", "rm"],
    ["xargs", "-a", "data.csv", "cat"],
    ["stdbuf", "-o0", "bash"],
    ["ionice", "-p", "1"],
    ["setsid", "ls"],
    ["flock", "-c", "id", "lock"],
    ["timeout", "1", "timeout", "1", "timeout", "1", "timeout", "1", "timeout", "1", "ls"],
    ["sudo", "ls"],
    ["su", "-c", "id"],
    ["doas", "ls"],
    ["pkexec", "ls"],
    # interpreters, build tools, shells, editors, pagers
    ["python3", "-c", "import os; os.system('id')"],
    ["perl", "-e", "system('id')"],
    ["bash", "-c", "id"],
    ["sh", "-c", "id"],
    ["dash"],
    ["make"],
    ["gcc", "src/app.c"],
    ["vim", "-c", ":!id"],
    ["less", "README.md"],
    # network
    ["curl", "http://127.0.0.1:1/"],
    ["curl", "-o", "/tmp/x", "http://127.0.0.1:1/"],
    ["wget", "http://127.0.0.1:1/"],
    ["ssh", "localhost", "id"],
    ["scp", "README.md", "host:/tmp/"],
    ["nc", "-l", "4444"],
    ["rsync", "-e", "sh -c id", "a", "b"],
    # system and other processes
    ["kill", "-9", "1"],
    ["pkill", "python"],
    ["mount", "/dev/sda", "src"],
    ["systemctl", "stop", "x"],
    ["crontab", "-l"],
    ["apt-get", "install", "x"],
    # program unknown to the policy, and caps
    ["unknown-program-xyz"],
    ["ls", *["x"] * 300],
    ["echo", "x" * 10_000],
    "",
    [],
]

SAFE: list[list[str] | str] = [
    "ls",
    "ls -la",
    "ls -la src",
    "pwd",
    "cat README.md",
    "head -n 5 README.md",
    "tail -n 2 README.md",
    "wc -l README.md src/app.py",
    "grep -rn hello .",
    "grep -e '/usr' README.md",
    "find . -name '*.py'",
    "find src -type f -maxdepth 2",
    "git status",
    "git log --oneline -n 5",
    "git diff HEAD",
    "git branch -a",
    "git show HEAD:README.md",
    "git tag -l 'v*'",
    "sed -n 1,3p README.md",
    "sed 's/hello/bye/g' README.md",
    "awk -F, '{ print $1 }' data.csv",
    "awk '$1 > 5 { print }' data.csv",
    "sort data.csv",
    "sort -t, -k2 data.csv",
    "cut -d, -f1 data.csv",
    "diff README.md data.csv",
    "stat README.md",
    "file README.md",
    "du -sh src",
    "tar -tf archive.tar",
    "sha256sum README.md",
    "echo hello world",
    "date",
    "whoami",
    "uname -a",
    "env",
    "timeout 5 ls",
    "nice -n 5 cat README.md",
    "jq . data.csv",
    "xxd README.md",
    "cat passwd-link/../README.md",
    ["grep", "-n", "a b", "README.md"],
    ["ls", "--color=never", "src"],
]


def _evaluate(engine: PolicyEngine, case: list[str] | str, mode: str) -> object:
    if isinstance(case, str):
        return engine.evaluate(command=case, mode=mode)  # type: ignore[arg-type]
    return engine.evaluate(argv=case, mode=mode)  # type: ignore[arg-type]


def test_corpus_sizes() -> None:
    assert len(DANGEROUS) >= 80
    assert len(SAFE) >= 20


@pytest.mark.parametrize("case", DANGEROUS, ids=lambda c: repr(c)[:60])
def test_dangerous_never_runs_unasked(
    engine: PolicyEngine, ws: Path, case: list[str] | str
) -> None:
    os.chdir(ws)
    ro = engine.evaluate(**_kwargs(case), cwd=str(ws), mode="read-only")
    assert not ro.decision.allowed, ro.decision
    assert ro.decision.reasons
    confirm = engine.evaluate(**_kwargs(case), cwd=str(ws), mode="confirm")
    assert not confirm.decision.allowed or confirm.decision.requires_approval, confirm.decision
    assert confirm.decision.risk in ("medium", "high", "critical")


@pytest.mark.parametrize("case", SAFE, ids=lambda c: repr(c)[:60])
def test_everyday_reads_run_in_read_only(
    engine: PolicyEngine, ws: Path, case: list[str] | str
) -> None:
    result = engine.evaluate(**_kwargs(case), cwd=str(ws), mode="read-only")
    assert result.decision.allowed, result.decision
    assert not result.decision.requires_approval
    assert result.decision.risk == "low"
    assert result.decision.reasons
    assert result.resolution is not None
    assert result.resolution.executable.startswith("/")
    assert len(result.resolution.executable_sha256) == 64


def _kwargs(case: list[str] | str) -> dict[str, object]:
    return {"command": case} if isinstance(case, str) else {"argv": case}


HARD_REFUSALS: list[list[str] | str] = [
    "ls; id", "echo $(id)", ["cat", "/etc/passwd"], ["sudo", "ls"], ["env", "-S", "sh -c id"],
    ["cat", "etc-link/passwd"], ["ls\u200b"], ["kill", "1"], ["/tmp/evil"],
]


@pytest.mark.parametrize("case", HARD_REFUSALS, ids=lambda c: repr(c)[:40])
def test_hard_refusals_hold_in_trusted_mode(
    engine: PolicyEngine, ws: Path, case: list[str] | str
) -> None:
    result = engine.evaluate(**_kwargs(case), cwd=str(ws), mode="trusted")
    assert not result.decision.allowed
    assert result.decision.risk == "critical"


def test_modes(engine: PolicyEngine, ws: Path) -> None:
    write = ["touch", "new.txt"]
    assert not engine.evaluate(argv=write, cwd=str(ws), mode="read-only").decision.allowed
    confirm = engine.evaluate(argv=write, cwd=str(ws), mode="confirm").decision
    assert confirm.allowed
    assert confirm.requires_approval
    assert confirm.risk == "medium"
    trusted = engine.evaluate(argv=write, cwd=str(ws), mode="trusted").decision
    assert trusted.allowed
    assert not trusted.requires_approval
    assert trusted.writes
    net = engine.evaluate(argv=["curl", "http://127.0.0.1:1/"], cwd=str(ws), mode="trusted")
    assert net.decision.requires_approval
    assert net.decision.network
    code = engine.evaluate(argv=["python3", "-V"], cwd=str(ws), mode="trusted").decision
    assert code.allowed
    assert not code.requires_approval
    assert code.risk == "high"


def test_symlink_named_like_a_safe_program_is_judged_by_its_target(
    engine: PolicyEngine, ws: Path
) -> None:
    result = engine.evaluate(argv=["./ls", "src"], cwd=str(ws), mode="confirm")
    assert result.resolution is not None
    assert result.resolution.executable.endswith("/rm")
    assert "write" in result.decision.effects


def test_cwd_outside_workspace_is_refused(engine: PolicyEngine, tmp_path: Path) -> None:
    result = engine.evaluate(argv=["ls"], cwd=str(tmp_path), mode="trusted")
    assert not result.decision.allowed
    assert "working directory" in result.decision.reasons[0]


def test_invisible_characters_are_shown_visibly(engine: PolicyEngine, ws: Path) -> None:
    result = engine.evaluate(argv=["cat", "a\u202eb"], cwd=str(ws))
    assert not result.decision.allowed
    assert "U+202E" in result.decision.reasons[0]


def test_resolution_records_real_paths(engine: PolicyEngine, ws: Path) -> None:
    result = engine.evaluate(argv=["cat", "src/../README.md"], cwd=str(ws), mode="read-only")
    assert result.resolution is not None
    assert ("src/../README.md", str(ws / "README.md")) in result.resolution.paths


# -- grammars for programs this machine may not have --------------------------------------


def _facts(grammar: object, args: list[str]) -> Findings:
    f = Findings()
    grammar(args, f)  # type: ignore[operator]
    return f


def test_rg_pre_and_paths() -> None:
    assert Effect.EXEC in _facts(rg_grammar, ["--pre", "sh", "foo"]).effects
    assert Effect.EXEC in _facts(rg_grammar, ["--pre=sh", "foo"]).effects
    f = _facts(rg_grammar, ["/usr", "src"])
    assert f.paths == ["src"]  # the first operand is the pattern
    assert "/etc" in _facts(rg_grammar, ["-e", "x", "/etc"]).paths


def test_rsync_and_ssh() -> None:
    f = _facts(rsync_grammar, ["-av", "src/", "host:/backup"])
    assert {Effect.NETWORK, Effect.WRITE} <= f.effects
    assert Effect.EXEC in _facts(rsync_grammar, ["--rsh=sh", "a", "b"]).effects
    f = _facts(ssh_grammar, ["-o", "ProxyCommand=sh -c id", "host"])
    assert {Effect.NETWORK, Effect.EXEC} <= f.effects


def test_tar_bundles_consume_values_in_order() -> None:
    # Old style (no dash): each letter that takes a value takes the next word, in order.
    f = _facts(tar_grammar, ["cfC", "out.tar", "dir", "file"])
    assert Effect.WRITE in f.effects
    assert set(f.write_paths) == {"out.tar", "dir"}
    assert f.reach == [("file", False)]
    # With a dash it is getopt: -f takes the rest of the word, so the archive is "C".
    f = _facts(tar_grammar, ["-cfC", "out.tar", "dir"])
    assert set(f.write_paths) == {"C"}
    assert {p for p, _ in f.reach} == {"out.tar", "dir"}


@pytest.mark.parametrize(
    ("script", "effect"),
    [("s/a/b/g", None), ("1,3p", None), ("/x/d;s|a|b|", None), ("$!N;P;D", None),
     ("s/a/b/e", Effect.EXEC), ("e", Effect.EXEC), ("1w out", Effect.WRITE),
     ("s/x/y/w f", Effect.WRITE), ("R f", Effect.UNKNOWN), ("k", Effect.UNKNOWN),
     ("s/unterminated", Effect.UNKNOWN)],
)
def test_sed_scripts(script: str, effect: Effect | None) -> None:
    problem = sed_script_problem(script)
    assert (problem[0] if problem else None) == effect


@pytest.mark.parametrize(
    ("program", "effect"),
    [("{ print $1 }", None), ("/a|b/ { print }", None), ('{ print "a|b" }', None),
     ("$1 > 5", None), ("{ if (a || b) print }", None),
     ('BEGIN{system("id")}', Effect.EXEC), ('{print | "cat"}', Effect.EXEC),
     ('{print > "f"}', Effect.WRITE), ("{getline x}", None),
         ('{getline x < "f"}', Effect.UNKNOWN)],
)
def test_awk_programs(program: str, effect: Effect | None) -> None:
    problem = awk_program_problem(program)
    assert (problem[0] if problem else None) == effect
