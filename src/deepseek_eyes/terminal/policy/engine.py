"""The policy engine: argv in, a decision with a risk level and reasons out.

Order of judgement, each step able only to add restrictions:

1. **Parse.** A command string is split without shell semantics; shell composition, NUL,
   control or invisible characters, and oversize input are refused (:mod:`.commandline`).
2. **Where.** The working directory must resolve inside a workspace root.
3. **What runs.** The executable is found through a fixed ``PATH`` and resolved to its real
   file; the program is judged by *that* name (a symlink called ``ls`` pointing at ``rm`` is
   ``rm``). Wrappers (``env``, ``timeout``, ``nice``, ``xargs`` …) are unwrapped and the
   command they run is judged too, to a bounded depth.
4. **How.** The program's grammar records its effects and which arguments are paths.
5. **Paths.** Every path argument is resolved (symlinks, ``..``, ``/proc``, ``/dev/fd``) and
   must stay inside the workspace.
6. **Mode.** ``read-only`` runs reads only; ``confirm`` runs reads and asks approval for
   anything else; ``trusted`` also runs writes and code without asking, but still asks for
   network use and for anything the engine was unsure about. Privilege is refused always.

Uncertainty fails closed: an unknown program, flag or script is :attr:`Effect.UNKNOWN`, which
never runs in read-only mode and always needs approval. The engine is triage; the sandbox
(:mod:`.sandbox`) is the boundary.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from deepseek_eyes.terminal.policy.analysis import Effect, Findings, risk_of
from deepseek_eyes.terminal.policy.commandline import (
    ArgvProblem,
    check_argv,
    make_visible,
    split_command,
)
from deepseek_eyes.terminal.policy.gitrepo import repository_risks
from deepseek_eyes.terminal.policy.grammars import GRAMMARS, read_git_globals
from deepseek_eyes.terminal.policy.paths import ResolvedExecutable, Workspace, resolve_executable
from deepseek_eyes.terminal.policy.programs import (
    EXEC_PROGRAMS,
    NETWORK_PROGRAMS,
    PRIVILEGE_PROGRAMS,
    SIMPLE_TOOLS,
    normalize_name,
    read_options,
)
from deepseek_eyes.terminal.records import DecisionView, ResolutionView

__all__ = ["MODES", "Decision", "Mode", "PolicyEngine", "PolicyResult", "Resolution"]

Mode = Literal["read-only", "confirm", "trusted"]
MODES: tuple[Mode, ...] = ("read-only", "confirm", "trusted")
MAX_WRAPPER_DEPTH = 4

# Environment variables that change which code a program loads or runs.
_DANGEROUS_ENV = re.compile(
    r"^(PATH|LD_.*|DYLD_.*|.*PRELOAD.*|BASH_ENV|ENV|SHELLOPTS|BASHOPTS|PS4|IFS|PYTHON.*|"
    r"PERL5.*|PERLLIB|RUBY.*|NODE_OPTIONS|NODE_PATH|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|GIT_.*|"
    r"GCONV_PATH|LOCPATH|HOSTALIASES|EDITOR|VISUAL|PAGER|MANPAGER|LESSOPEN|LESSCLOSE|"
    r"TAR_OPTIONS|GREP_OPTIONS|SSH_.*|BROWSER|TMPDIR|HOME|XDG_.*|LUA_.*|GEM_.*|CARGO_.*|"
    r"RUSTC.*|GOFLAGS|CC|CXX|MAKEFLAGS|SUDO_.*|GLIBC_TUNABLES|MALLOC_.*|GZIP|BZIP2?|XZ_.*|"
    r"ZIPOPT|UNZIP(OPT)?|ZSTD_.*|RIPGREP_CONFIG_PATH|WGETRC|CURL_HOME|SHELL|POSIXLY_CORRECT|"
    r"_POSIX2_VERSION|MAGIC|NLSPATH|TZDIR|TERMINFO.*|RES_OPTIONS|LOCALDOMAIN)$"
)
# Variables a command may be given through ``env NAME=value``: display and locale only.
# Any other name is unknown (many variables add options or name files: GZIP, MAGIC, TZ=:/x).
_HARMLESS_ENV = re.compile(
    r"^(LANG|LANGUAGE|LC_[A-Z]+|NO_COLOR|FORCE_COLOR|CLICOLOR(_FORCE)?|COLUMNS|LINES|TERM|"
    r"LS_COLORS|GREP_COLORS?|TIME_STYLE|QUOTING_STYLE|(DF_|DU_|LS_)?BLOCK_?SIZE)$"
)


_EFFECT_ORDER = {effect.value: index for index, effect in enumerate(Effect)}
_WHAT = {
    Effect.WRITE: "write", Effect.EXEC: "run code", Effect.NETWORK: "use the network",
    Effect.UNKNOWN: "the policy cannot fully read", Effect.PRIVILEGE: "need privilege",
    Effect.READ: "read",
}


@dataclass(frozen=True)
class Decision:
    """The verdict on one command under one mode."""

    mode: Mode
    allowed: bool
    requires_approval: bool
    risk: str
    effects: tuple[str, ...]
    reasons: tuple[str, ...]
    network: bool = False
    writes: bool = False

    def to_dict(self) -> DecisionView:
        return {
            "mode": self.mode,
            "allowed": self.allowed,
            "requires_approval": self.requires_approval,
            "risk": self.risk,
            "effects": list(self.effects),
            "reasons": list(self.reasons),
            "network": self.network,
            "writes": self.writes,
        }


@dataclass(frozen=True)
class Resolution:
    """What the plan resolved to; re-checked at execute time."""

    cwd: str
    executable: str
    executable_sha256: str
    paths: tuple[tuple[str, str], ...]  # (argument, real path)

    def to_dict(self) -> ResolutionView:
        return {
            "cwd": self.cwd,
            "executable": self.executable,
            "executable_sha256": self.executable_sha256,
            "paths": [list(p) for p in self.paths],
        }


@dataclass(frozen=True)
class PolicyResult:
    argv: tuple[str, ...]  # empty when the input could not be parsed
    display: str  # argv joined for people, invisible characters made visible
    decision: Decision
    resolution: Resolution | None  # None when refused before resolution
    inner_executables: tuple[tuple[str, str], ...] = field(default=())  # (real path, sha256)


def _display(argv: Sequence[str]) -> str:
    return make_visible(shlex.join(argv))


class PolicyEngine:
    """Judges commands for one workspace. Stateless apart from the workspace roots."""

    def __init__(self, workspace: Workspace, mode: Mode = "confirm") -> None:
        self.workspace = workspace
        self.mode: Mode = mode

    # -- public ---------------------------------------------------------------------------

    def evaluate(
        self,
        *,
        argv: Sequence[str] | None = None,
        command: str | None = None,
        cwd: str | None = None,
        mode: Mode | None = None,
    ) -> PolicyResult:
        """Judge ``argv`` (or ``command``, parsed without shell semantics) run in ``cwd``."""
        mode = mode or self.mode
        if mode not in MODES:
            return self._refused((), mode if mode in MODES else "read-only",
                                 [f"unknown mode {mode!r}"])
        try:
            if (argv is None) == (command is None):
                raise ArgvProblem("give exactly one of argv or command")
            words = check_argv(list(argv)) if argv is not None else split_command(str(command))
        except ArgvProblem as exc:
            return self._refused((), mode, [exc.reason], raw=command)
        real_cwd = os.path.realpath(cwd or self.workspace.roots[0])
        if not os.path.isdir(real_cwd) or not self.workspace.contains(real_cwd):
            return self._refused(tuple(words), mode,
                                 [f"the working directory {cwd!r} is not inside the workspace"])
        f = Findings()
        inner_exes: list[ResolvedExecutable] = []
        exe = self._analyze(words, real_cwd, f, 0, inner_exes)
        resolved_paths: list[tuple[str, str]] = []
        for arg in [*f.paths, *f.write_paths]:
            real, reason = self.workspace.resolve(arg, real_cwd)
            if real is None:
                f.block(reason)
            elif (arg, real) not in resolved_paths:
                resolved_paths.append((arg, real))
        self._judge_reach(f, dict(resolved_paths))
        resolution = None
        if exe is not None:
            resolution = Resolution(real_cwd, exe.real_path, exe.sha256, tuple(resolved_paths))
        decision = self._decide(f, mode)
        return PolicyResult(
            tuple(words), _display(words), decision, resolution,
            tuple((e.real_path, e.sha256) for e in inner_exes),
        )

    # -- analysis -------------------------------------------------------------------------

    def _refused(
        self, argv: tuple[str, ...], mode: Mode, reasons: list[str], raw: str | None = None
    ) -> PolicyResult:
        decision = Decision(mode, False, False, "critical", (), tuple(reasons))
        display = _display(argv) if argv else make_visible(raw or "")[:512]
        return PolicyResult(argv, display, decision, None)

    def _analyze(
        self,
        argv: list[str],
        cwd: str,
        f: Findings,
        depth: int,
        inner_exes: list[ResolvedExecutable],
    ) -> ResolvedExecutable | None:
        if depth > MAX_WRAPPER_DEPTH:
            f.block("wrappers are nested too deeply")
            return None
        if not argv:
            f.block("a wrapper without a command")
            return None
        if depth:  # evaluate checked the outer argv; a wrapped command is checked here
            try:
                check_argv(argv)
            except ArgvProblem as exc:
                f.block(exc.reason)
                return None
        given_name = normalize_name(os.path.basename(argv[0]))
        if given_name in PRIVILEGE_PROGRAMS:
            f.add(Effect.PRIVILEGE, f"{given_name} acts with privilege or on the system")
        exe, reason = resolve_executable(argv[0], cwd, self.workspace)
        if exe is None:
            f.block(reason)
            return None
        if depth:
            inner_exes.append(exe)
        name = normalize_name(os.path.basename(exe.real_path))
        args = argv[1:]
        if exe.in_workspace:
            f.add(Effect.EXEC, f"{argv[0]} is a program from the workspace (project code)")
            return exe
        wrapper = _WRAPPERS.get(name)
        if wrapper is not None:
            inner = wrapper(args, f)
            if inner:
                self._analyze(inner, cwd, f, depth + 1, inner_exes)
            elif not f.effects:
                f.add(Effect.READ, f"{name} without a command only prints")
        elif name in GRAMMARS:
            GRAMMARS[name](args, f)
            if not f.effects:
                f.add(Effect.READ, f"{name} reads files inside the workspace")
            if name == "git":
                self._judge_git_repository(args, cwd, f)
        elif name in SIMPLE_TOOLS:
            spec = SIMPLE_TOOLS[name]
            read_options(name, spec, args, f, program=os.path.basename(exe.real_path))
            if spec.effect is Effect.WRITE:
                f.add(Effect.WRITE, f"{name} changes files")
            elif not f.effects:
                f.add(Effect.READ, f"{name} only reads")
        elif name in PRIVILEGE_PROGRAMS:
            f.add(Effect.PRIVILEGE, f"{name} acts with privilege or on the system")
        elif name in NETWORK_PROGRAMS:
            f.add(Effect.NETWORK, f"{name} uses the network")
        elif name in EXEC_PROGRAMS:
            f.add(Effect.EXEC, f"{name} runs code (interpreter, build tool, shell or pager)")
        else:
            f.add(Effect.UNKNOWN, f"{name} is not a program the policy knows")
            for arg in args:  # paths are still checked: fail closed on escapes
                if not arg.startswith("-"):
                    f.path(arg)
        for inner in f.inner[:]:
            f.inner.remove(inner)
            self._analyze(inner, cwd, f, depth + 1, inner_exes)
        return exe

    def _judge_git_repository(self, args: list[str], cwd: str, f: Findings) -> None:
        """git also obeys the repository it runs in: judge its location and config."""
        directory = cwd
        for opt, value in read_git_globals(args).values:
            if opt == "-C" and value:
                directory = os.path.realpath(os.path.join(directory, value))
            elif opt in ("--git-dir", "--work-tree"):
                f.add(Effect.UNKNOWN, f"git {opt} points git at a repository the policy does "
                                      "not check")
        refusals, unknowns = repository_risks([directory], self.workspace)
        for reason in refusals:
            f.block(reason)
        for reason in unknowns:
            f.add(Effect.UNKNOWN, reason)

    def _judge_reach(self, f: Findings, resolved: dict[str, str]) -> None:
        """A recursive read is judged on everything it will open, not only its argument.
        ``resolved``: argument → real path, for the paths that resolved inside (every
        reach path is also a path; one that did not resolve is already refused)."""
        for arg, follow in f.reach:
            real = resolved.get(arg)
            if real is None:
                continue
            verdict = self.workspace.reach(real, follow=follow)
            if verdict.ok is False:
                f.block(f"{arg!r} would be read recursively, and {verdict.reason}")
            elif verdict.ok is None:
                f.add(Effect.UNKNOWN, f"what a recursive read of {arg!r} reaches could not be "
                                      f"checked: {verdict.reason}")

    @staticmethod
    def _decide(f: Findings, mode: Mode) -> Decision:
        effects = set(f.effects) or {Effect.READ}
        reasons = list(f.blocked) + [r for r in f.reasons if r not in f.blocked]
        blocked = bool(f.blocked)
        if Effect.PRIVILEGE in effects:
            blocked = True
            reasons.insert(0, "privileged or system-wide programs are refused in every mode")
        beyond_read = effects - {Effect.READ}
        if not blocked and mode == "read-only" and beyond_read:
            blocked = True
            names = ", ".join(sorted(_WHAT[e] for e in beyond_read))
            reasons.insert(0, f"read-only mode refuses commands that {names}")
        requires_approval = False
        if not blocked:
            if mode == "confirm":
                requires_approval = bool(beyond_read)
            elif mode == "trusted":
                requires_approval = bool(effects & {Effect.NETWORK, Effect.UNKNOWN})
            if requires_approval:
                reasons.append(f"{mode} mode asks for approval before this runs")
        ordered = sorted((e.value for e in effects), key=_EFFECT_ORDER.__getitem__)
        return Decision(
            mode=mode,
            allowed=not blocked,
            requires_approval=requires_approval,
            risk=risk_of(effects, blocked),
            effects=tuple(ordered),
            reasons=tuple(reasons) or ("only reads",),
            network=Effect.NETWORK in effects,
            writes=bool(effects & {Effect.WRITE, Effect.EXEC, Effect.UNKNOWN}),
        )


# -- wrappers -----------------------------------------------------------------------------
# Each returns the argv it runs (or [] when it runs nothing) and records its own effects.


#: A wrapper program's argument reader: the wrapped command's argv, findings noted in ``f``.
_Wrapper = Callable[[list[str], Findings], list[str]]


def _env_wrapper(args: list[str], f: Findings) -> list[str]:
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"):
            i += 1
        elif a in ("-u", "--unset"):
            i += 2
        elif a.startswith(("--unset=", "-u")):
            i += 1
        elif a in ("-C", "--chdir") or a.startswith(("--chdir=", "-C")):
            f.add(Effect.UNKNOWN, "env -C changes the directory the policy resolved paths in")
            i += 1 if "=" in a or len(a) > 2 else 2
        elif a in ("-S", "--split-string") or a.startswith(("-S", "--split-string")):
            f.block("env -S splits a string like a shell; give the argv instead")
            return []
        elif a.startswith("-") and a != "--":
            f.add(Effect.UNKNOWN, f"env option {a!r} is not one the policy knows")
            i += 1
        elif a == "--":
            i += 1
            break
        elif "=" in a:
            name, value = a.split("=", 1)
            if _DANGEROUS_ENV.match(name):
                f.add(Effect.EXEC, f"env sets {name}, which changes what code programs load")
            elif (name == "TZ" or _HARMLESS_ENV.match(name)) and not value.startswith(
                ":"
            ) and "/" not in value:
                pass  # a zone, locale or display name; with a "/" it would name a file
            else:
                f.add(Effect.UNKNOWN, f"env sets {name}, which the policy does not know to be "
                                      "harmless (variables can add options or name files)")
            i += 1
        else:
            break
    return args[i:]


def _options_then_command(
    value_opts: frozenset[str], flags: frozenset[str], privileged: frozenset[str] = frozenset(),
    positional: int = 0,
) -> _Wrapper:
    def wrapper(args: list[str], f: Findings) -> list[str]:
        i = 0
        while i < len(args) and args[i].startswith("-") and args[i] != "-":
            a = args[i]
            opt = a.split("=", 1)[0]
            if a == "--":
                i += 1
                break
            if opt in privileged:
                f.add(Effect.PRIVILEGE, f"{a} acts on other processes")
                i += 1
            elif opt in value_opts:
                i += 1 if "=" in a else 2
            elif opt in flags or re.fullmatch(r"-\d+", a):
                i += 1
            elif any(opt.startswith(v) and len(v) == 2 for v in value_opts):
                i += 1  # -n10, -s9: value attached to a short option
            else:
                f.add(Effect.UNKNOWN, f"wrapper option {a!r} is not one the policy knows")
                i += 1
        return args[i + positional :] if len(args) > i + positional else []
    return wrapper


def _xargs_wrapper(args: list[str], f: Findings) -> list[str]:
    inner = _XARGS(args, f)
    if any(a in ("-a", "--arg-file") or a.startswith(("--arg-file=", "-a")) for a in args):
        f.add(Effect.UNKNOWN, "xargs -a adds arguments from a file the policy cannot read")
    f.add(Effect.READ, "xargs reads stdin, which is /dev/null: it adds no arguments")
    return inner or ["echo"]


def _flock_wrapper(args: list[str], f: Findings) -> list[str]:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in ("-c", "--command"):
            f.block("flock -c runs a shell command string")
            return []
        i += 2 if a in ("-w", "--timeout", "-E", "--conflict-exit-code") else 1
    if i < len(args):
        f.path(args[i], write=True)
        f.add(Effect.WRITE, "flock creates its lock file")
    return args[i + 1 :]


def _setsid_wrapper(args: list[str], f: Findings) -> list[str]:
    f.add(Effect.UNKNOWN, "setsid leaves the process group the timeout would kill")
    return [a for a in args if a not in ("-c", "--ctty", "-f", "--fork", "-w", "--wait")][:]


_XARGS = _options_then_command(
    frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines",
               "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars",
               "--process-slot-var"}),
    frozenset({"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-x", "--exit",
               "-p", "--interactive", "-o", "--open-tty", "--show-limits", "-e", "-i", "-l"}),
)

_WRAPPERS: dict[str, _Wrapper] = {
    "env": _env_wrapper,
    "timeout": _options_then_command(
        frozenset({"-s", "--signal", "-k", "--kill-after"}),
        frozenset({"--preserve-status", "--foreground", "-v", "--verbose"}),
        positional=1,
    ),
    "nice": _options_then_command(frozenset({"-n", "--adjustment"}), frozenset()),
    "nohup": _options_then_command(frozenset(), frozenset()),
    "ionice": _options_then_command(
        frozenset({"-c", "--class", "-n", "--classdata"}), frozenset({"-t", "--ignore"}),
        privileged=frozenset({"-p", "--pid", "-P", "--pgid", "-u", "--uid"}),
    ),
    "stdbuf": _options_then_command(
        frozenset({"-i", "--input", "-o", "--output", "-e", "--error"}), frozenset()
    ),
    "time": _options_then_command(
        frozenset({"-f", "--format"}), frozenset({"-p", "--portability", "-v", "--verbose",
                                                  "-a", "--append", "-q", "--quiet"}),
    ),
    "taskset": _options_then_command(
        frozenset(), frozenset({"-c", "--cpu-list", "-a", "--all-tasks"}),
        privileged=frozenset({"-p", "--pid"}), positional=1,
    ),
    "chrt": _options_then_command(
        frozenset(), frozenset({"-b", "-d", "-f", "-i", "-o", "-r", "-R", "-m", "-v",
                                "--batch", "--fifo", "--idle", "--other", "--rr"}),
        privileged=frozenset({"-p", "--pid", "-a", "--all-tasks"}), positional=1,
    ),
    "xargs": _xargs_wrapper,
    "flock": _flock_wrapper,
    "setsid": _setsid_wrapper,
}
