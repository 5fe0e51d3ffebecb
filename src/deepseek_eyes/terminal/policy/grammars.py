"""Flag grammars for the programs that can run code or write through their options.

Each function reads one program's argv (without the program name) into :class:`Findings`.
They are deliberately conservative: anything a grammar does not recognise in a place where
it could matter is recorded as :attr:`Effect.UNKNOWN` ("could not be sure"), which the
engine treats like code execution. The bypasses these grammars exist for: ``find -exec`` /
``-delete`` / ``-fprint``, ``git -c core.pager=…`` and ``--upload-pack``, ``sed e`` / ``w`` and
``-i``, ``awk 'BEGIN{system(…)}'``, ``rg --pre``. Archives and transfers live in
:mod:`.transfer`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from deepseek_eyes.terminal.policy.analysis import Effect, Findings
from deepseek_eyes.terminal.policy.awkprogram import judge_awk_program
from deepseek_eyes.terminal.policy.getopt import parse_argv
from deepseek_eyes.terminal.policy.options import OPTION_TABLES
from deepseek_eyes.terminal.policy.programs import ToolSpec, looks_like_path, read_options
from deepseek_eyes.terminal.policy.sedscript import read_sed_script
from deepseek_eyes.terminal.policy.transfer import (
    curl_grammar,
    dd_grammar,
    rsync_grammar,
    scp_grammar,
    ssh_grammar,
    tar_grammar,
    wget_grammar,
)

__all__ = [
    "GRAMMARS", "GitGlobals", "awk_program_problem", "read_git_globals", "rg_grammar",
    "sed_script_problem",
]


Grammar = Callable[[list[str], Findings], None]


# -- find ---------------------------------------------------------------------------------

_FIND_VALUE_TESTS = frozenset({
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
    "-lname", "-ilname", "-type", "-xtype", "-perm", "-user", "-group", "-uid", "-gid",
    "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-maxdepth",
    "-mindepth", "-links", "-inum", "-used", "-printf", "-regextype", "-fstype", "-context",
})
_FIND_PATH_TESTS = frozenset({"-newer", "-anewer", "-cnewer", "-samefile"})
_FIND_FLAGS = frozenset({
    "-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-empty", "-readable",
    "-writable", "-executable", "-nouser", "-nogroup", "-depth", "-d", "-mount", "-xdev",
    "-noleaf", "-daystart", "-ignore_readdir_race", "-noignore_readdir_race", "-a", "-and",
    "-o", "-or", "-not", "!", "(", ")", ",", "-H", "-P",
})


def find_grammar(args: list[str], f: Findings) -> None:
    """findutils find: leading options, start points, then the expression. A find walks
    every start point, following symlinks with ``-L``/``-follow``: what it reaches is
    checked (:meth:`Findings.reach_path`), not only the start points."""
    i = 0
    follow = False
    while i < len(args) and (args[i] in ("-H", "-L", "-P", "-D") or re.fullmatch(
        r"-O\d*", args[i]
    )):
        follow = (follow or args[i] == "-L") and args[i] != "-P"
        i += 2 if args[i] == "-D" else 1
    starts: list[str] = []
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("(", ")", "!", ","):
        starts.append(args[i])
        i += 1
    if "-files0-from" in args[i:]:
        f.add(Effect.UNKNOWN, "find -files0-from takes its start points from a file the policy "
                              "does not read")
    follow = follow or "-follow" in args[i:]
    for start in starts or ["."]:
        f.reach_path(start, follow=follow)
    while i < len(args):  # bounded: every branch advances i
        tok = args[i]
        i += 1
        if tok in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[str] = []
            while i < len(args) and args[i] not in (";", "+"):
                inner.append(args[i])
                i += 1
            if i >= len(args) or not inner:
                f.block(f"find {tok} without a command and its ';' or '+' terminator")
                return
            i += 1
            f.add(Effect.EXEC, f"find {tok} runs {inner[0]} on every match")
            f.inner.append([a.replace("{}", ".") for a in inner])
        elif tok == "-delete":
            f.add(Effect.WRITE, "find -delete removes files")
        elif tok in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            target = args[i] if i < len(args) else ""
            f.add(Effect.WRITE, f"find {tok} writes a file")
            f.path(target, write=True)
            i += 2 if tok == "-fprintf" else 1
        elif tok in _FIND_PATH_TESTS or tok.startswith("-newer"):
            if i < len(args):
                f.path(args[i])
            i += 1
        elif tok in _FIND_VALUE_TESTS:
            i += 1
        elif tok == "-files0-from":
            if i < len(args):
                f.path(args[i])
            i += 1
        elif tok == "-follow":
            continue  # judged above: the start points are walked following links
        elif tok not in _FIND_FLAGS:
            f.add(Effect.UNKNOWN, f"find expression {tok!r} is not one the policy knows")


# -- git ----------------------------------------------------------------------------------

_GIT_READ = frozenset({
    "status", "log", "diff", "show", "rev-parse", "ls-files", "ls-tree", "cat-file", "blame",
    "annotate", "describe", "shortlog", "rev-list", "for-each-ref", "name-rev", "merge-base",
    "count-objects", "version", "whatchanged", "show-ref", "show-branch", "diff-tree",
    "diff-files", "diff-index", "var", "check-ignore", "check-attr", "check-ref-format",
    "cherry", "range-diff", "fsck", "grep", "verify-commit", "verify-tag", "verify-pack",
    "get-tar-commit-id", "column", "stripspace", "ls-remote-local",
})
_GIT_WRITE = frozenset({
    "add", "commit", "checkout", "switch", "restore", "reset", "rm", "mv", "merge", "rebase",
    "cherry-pick", "revert", "init", "clean", "apply", "am", "notes", "gc", "prune", "repack",
    "pack-refs", "update-index", "update-ref", "symbolic-ref", "read-tree", "write-tree",
    "commit-tree", "mktag", "mktree", "hash-object", "replace", "sparse-checkout",
    "format-patch", "bundle", "stage", "mailsplit", "mailinfo", "checkout-index", "merge-file",
    "rerere", "multi-pack-index", "commit-graph", "prune-packed", "unpack-objects", "reflog",
})
_GIT_NETWORK = frozenset({
    "fetch", "pull", "push", "clone", "ls-remote", "send-email", "request-pull", "svn", "p4",
    "cvsimport", "cvsexportcommit", "fetch-pack", "send-pack", "http-fetch", "http-push",
})
_GIT_EXEC = frozenset({
    "filter-branch", "filter-repo", "difftool", "mergetool", "instaweb", "daemon", "gui",
    "citool", "gitk", "shell", "upload-pack", "receive-pack", "upload-archive",
    "http-backend", "credential", "credential-store", "credential-cache", "web--browse",
    "maintenance", "help", "submodule", "worktree", "config", "bisect", "remote", "hook",
})
_GIT_EXEC_OPTIONS = ("--upload-pack", "--receive-pack", "--exec", "--ext-diff",
                     "--open-files-in-pager", "--config", "--template", "--textconv")
_GIT_LIST_ONLY = {
    "branch": frozenset({"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--list",
                         "-l", "--show-current", "--contains", "--no-contains", "--merged",
                         "--no-merged", "--sort", "--format", "--color", "--no-color",
                         "--points-at", "--column", "--no-column", "-i", "--ignore-case"}),
    "tag": frozenset({"-l", "--list", "-n", "--contains", "--no-contains", "--sort",
                      "--format", "--points-at", "--merged", "--no-merged", "--column",
                      "--color", "-i", "--ignore-case", "-v", "--verify"}),
}
_GIT_LISTING_WITH_OPERANDS = frozenset({
    "-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at",
    "-v", "--verify",
})
_GIT_GLOBAL_VALUE = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_GIT_GLOBAL_FLAGS = frozenset({
    "--no-pager", "-P", "-p", "--paginate", "--bare", "--no-replace-objects",
    "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
    "--no-optional-locks", "--version", "--help", "--no-lazy-fetch", "--no-advice",
})
_GIT_DIFFING = frozenset({"diff", "log", "show", "diff-tree", "diff-index", "diff-files",
                          "whatchanged", "format-patch", "range-diff"})
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://|ext::)")
_URLISH = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://|[^/:]+:|ext::)")


@dataclass(frozen=True)
class GitGlobals:
    """git's own options, before the subcommand: read once, for the grammar (effects and
    paths) and for the engine (which repository git will run in)."""

    runs: tuple[str, ...]  # -c, --config-env, --exec-path, --super-prefix
    values: tuple[tuple[str, str], ...]  # (-C | --git-dir | --work-tree | --namespace, value)
    unknown: tuple[str, ...]
    sub_index: int  # where the subcommand starts (len(args) when there is none)


def read_git_globals(args: list[str]) -> GitGlobals:
    runs: list[str] = []
    values: list[tuple[str, str]] = []
    unknown: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt, eq, value = args[i].partition("=")
        i += 1
        if opt in ("-c", "--config-env", "--exec-path", "--super-prefix"):
            runs.append(opt)
            if opt == "-c" and not eq:
                i += 1
        elif opt in _GIT_GLOBAL_VALUE:
            if not eq:
                value = args[i] if i < len(args) else ""
                i += 1
            values.append((opt, value))
        elif not (opt.startswith("--list-cmds") or opt in _GIT_GLOBAL_FLAGS):
            unknown.append(opt)
    return GitGlobals(tuple(runs), tuple(values), tuple(unknown), i)


def git_grammar(args: list[str], f: Findings) -> None:
    globals_ = read_git_globals(args)
    for opt in globals_.runs:
        f.add(Effect.EXEC, f"git {opt} can make git run any program")
    for _, value in globals_.values:
        f.path(value)
    for opt in globals_.unknown:
        f.add(Effect.UNKNOWN, f"git option {opt!r} is not one the policy knows")
    i = globals_.sub_index
    if i >= len(args):
        return
    sub = args[i]
    rest = args[i + 1 :]
    if sub in _GIT_READ:
        f.add(Effect.READ, f"git {sub} reads the repository")
    elif sub in _GIT_LIST_ONLY:
        opts = [a.split("=", 1)[0] for a in rest if a.startswith("-")]
        operands = [a for a in rest if not a.startswith("-")]
        listing = all(o in _GIT_LIST_ONLY[sub] for o in opts) and (
            not operands or any(o in _GIT_LISTING_WITH_OPERANDS for o in opts)
        )
        if listing:
            f.add(Effect.READ, f"git {sub} lists")
        else:
            f.add(Effect.WRITE, f"git {sub} with these arguments changes the repository")
    elif sub == "stash":
        if not rest or rest[0] in ("list", "show"):
            f.add(Effect.READ, "git stash list/show reads stashes")
        else:
            f.add(Effect.WRITE, "git stash changes the working tree")
    elif sub in _GIT_WRITE:
        f.add(Effect.WRITE, f"git {sub} changes the repository or the working tree")
    elif sub in _GIT_NETWORK:
        f.add(Effect.NETWORK, f"git {sub} talks to a remote")
        f.add(Effect.WRITE, f"git {sub} may change the repository")
    elif sub in _GIT_EXEC:
        f.add(Effect.EXEC, f"git {sub} can run configured programs or change git's config")
    else:
        f.add(Effect.UNKNOWN, f"git {sub!r} is not a git command the policy knows (an alias?)")
    if sub == "reflog" and (not rest or rest[0] in ("show", "list")):
        f.effects.discard(Effect.WRITE)
        f.add(Effect.READ, "git reflog shows history")
    after_dashdash = False
    for k, arg in enumerate(rest):
        if after_dashdash or not arg.startswith("-"):
            remote_like = _URLISH.match(arg) if sub in _GIT_NETWORK else _SCHEME.match(arg)
            if remote_like and not after_dashdash:
                f.add(Effect.NETWORK, f"git argument {arg!r} names a remote")
            else:
                f.path(arg)
            continue
        if arg == "--":
            after_dashdash = True
            continue
        opt, eq, value = arg.partition("=")
        if (opt.startswith("--") and len(opt) > 3 and any(
            known.startswith(opt) for known in _GIT_EXEC_OPTIONS
        )) or (opt in ("-u", "-x") and sub in ("fetch", "pull", "clone", "ls-remote", "rebase",
                                                "archive")):
            f.add(Effect.EXEC, f"git {sub} {opt} runs another program")
        elif opt.startswith("--ou") or (opt == "-o" and sub == "archive"):
            f.add(Effect.WRITE, f"git {sub} {opt} writes a file")
            target = value if eq else (rest[k + 1] if k + 1 < len(rest) else "")
            f.path(target, write=True)
        elif sub == "grep" and not opt.startswith("--") and "O" in opt:
            # -O[<pager>] takes an optional attached value and bundles (-nOid, -Oid):
            # any O in a short-option word may be it. Over-reading a pattern is the safe side.
            f.add(Effect.EXEC, f"git grep {arg!r} may open files in a pager program (-O)")
        elif sub in _GIT_DIFFING and not opt.startswith("--") and opt.startswith("-O"):
            f.add(Effect.UNKNOWN, f"git {sub} {arg!r} reads an order file (-O<file>)")
        elif opt == "--remote":
            f.add(Effect.NETWORK, f"git {sub} --remote talks to a remote")
        elif eq and looks_like_path(value):
            f.path(value)


# -- sed ----------------------------------------------------------------------------------

def sed_script_problem(script: str) -> tuple[Effect, str] | None:
    """The first effect of a sed ``script`` beyond filtering (see :mod:`.sedscript`)."""
    reading = read_sed_script(script)
    found = [(e, r) for e, r in reading.effects if e is not Effect.READ]
    if found:
        return found[0]
    if reading.reads:
        return Effect.UNKNOWN, "sed r reads a file"
    return None


def sed_grammar(args: list[str], f: Findings) -> None:
    """GNU sed: options by its getopt table; the script read by :mod:`.sedscript`."""
    parsed = parse_argv(OPTION_TABLES["sed"], args)
    for problem in parsed.problems:
        f.add(Effect.UNKNOWN, f"sed: {problem}")
    pieces: list[str] = []
    in_place = False
    from_file = False
    for use in parsed.uses:
        if use.option in ("-e", "--expression") and use.value is not None:
            pieces.append(use.value)
        elif use.option in ("-f", "--file"):
            from_file = True
            f.add(Effect.UNKNOWN, "sed -f reads its script from a file the policy does not read")
        elif use.option in ("-i", "--in-place"):
            in_place = True
        elif use.option == "--follow-symlinks" and in_place:
            f.add(Effect.WRITE, "sed --follow-symlinks -i writes through symlinks")
    operands = list(parsed.operands)
    if not pieces and not from_file:
        if not operands:
            f.block("sed without a script")
            return
        pieces.append(operands.pop(0))
    if pieces:
        reading = read_sed_script("\n".join(pieces))
        for effect, reason in reading.effects:
            if effect is not Effect.READ:
                f.add(effect, reason)
        for name in reading.reads:
            f.path(name)
        for name in reading.writes:
            f.path(name, write=True)
    if in_place:
        f.add(Effect.WRITE, "sed -i edits files in place")
    for path in operands:
        f.path(path, write=in_place)


# -- awk ----------------------------------------------------------------------------------


def awk_program_problem(program: str) -> tuple[Effect, str] | None:
    """The first effect of ``program`` beyond reading (see :mod:`.awkprogram`), or None."""
    found = judge_awk_program(program)
    return found[0] if found else None


def awk_grammar(args: list[str], f: Findings) -> None:
    """awk (mawk here, gawk elsewhere): only ``-F``, ``-v``, ``-e``/``--source`` and the
    version flags are read; any other option (``-f``, mawk's ``-W exec``, gawk's ``-i``,
    ``-l``, ``-E``, ``-o`` …) loads or writes something the policy does not read."""
    i = 0
    programs: list[str] = []
    from_file = False
    while i < len(args):  # bounded: every branch advances i
        a = args[i]
        if a == "--":
            i += 1
            break
        if a == "-" or not a.startswith("-"):
            break
        letter = a[1:2]
        if a.startswith("--"):
            opt, eq, value = a.partition("=")
            if opt == "--source":
                if not eq:
                    value = args[i + 1] if i + 1 < len(args) else ""
                    i += 1
                programs.append(value)
            elif a not in ("--version", "--help"):
                f.add(Effect.UNKNOWN, f"awk option {a!r} is not one the policy reads")
        elif letter in ("F", "v", "f", "e"):
            value = a[2:]
            if not value:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            if letter == "f":
                from_file = True
                f.add(Effect.UNKNOWN, "awk -f reads its program from a file the policy does "
                                      "not read")
            elif letter == "e":
                programs.append(value)
            elif letter == "v" and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", value):
                f.add(Effect.UNKNOWN, f"awk -v {value!r} is not an assignment")
        elif a not in ("-V",):
            f.add(Effect.UNKNOWN, f"awk option {a!r} is not one the policy reads (mawk -W "
                                  "exec, gawk -i/-l/-E/-o … load or write files)")
        i += 1
    rest = args[i:]
    if not programs and not from_file:
        if not rest:
            f.block("awk without a program")
            return
        programs.append(rest[0])
        rest = rest[1:]
    for effect, reason in judge_awk_program("\n".join(programs)):
        f.add(effect, reason)
    for operand in rest:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", operand):
            continue  # a variable assignment operand
        f.path(operand)


# -- ripgrep ------------------------------------------------------------------------------

_RG_SPEC = ToolSpec(
    operands="pattern",
    values=frozenset({"-g", "--glob", "--iglob", "-t", "--type", "-T", "--type-not",
                      "--type-add", "--type-clear", "-m", "--max-count", "-A", "-B", "-C",
                      "--after-context", "--before-context", "--context", "-M",
                      "--max-columns", "-j", "--threads", "-d", "--max-depth", "--sort",
                      "--sortr", "--color", "--colors", "-E", "--encoding", "-r",
                      "--replace", "--path-separator", "--context-separator",
                      "--field-match-separator", "--field-context-separator",
                      "--max-filesize", "--dfa-size-limit", "--regex-size-limit", "--engine",
                      "--pre-glob", "--generate", "--hyperlink-format"}),
    pattern_values=frozenset({"-e", "--regexp", "-f", "--file"}),
    path_values=frozenset({"--ignore-file"}),
    exec_options=frozenset({"--pre", "--hostname-bin", "--search-zip", "-z"}),
    follow=frozenset({"-L", "--follow"}),
    recursive_by_default=True,
    default_operand=".",
)


def rg_grammar(args: list[str], f: Findings) -> None:
    for k, a in enumerate(args):
        if a in ("-f", "--file") and k + 1 < len(args):
            f.path(args[k + 1])
        elif a.startswith("--file="):
            f.path(a.split("=", 1)[1])
    read_options("rg", _RG_SPEC, args, f)


#: Program name → grammar. Names are normalized (:func:`programs.normalize_name`).
GRAMMARS: dict[str, Grammar] = {
    "find": find_grammar,
    "git": git_grammar,
    "sed": sed_grammar,
    "awk": awk_grammar,
    "tar": tar_grammar,
    "rg": rg_grammar,
    "ssh": ssh_grammar,
    "scp": scp_grammar,
    "sftp": scp_grammar,
    "rsync": rsync_grammar,
    "curl": curl_grammar,
    "wget": wget_grammar,
    "dd": dd_grammar,
}
