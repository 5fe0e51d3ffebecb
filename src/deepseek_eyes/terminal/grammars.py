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

from deepseek_eyes.terminal.analysis import Effect, Findings
from deepseek_eyes.terminal.programs import ToolSpec, looks_like_path, read_options
from deepseek_eyes.terminal.transfer import (
    curl_grammar,
    dd_grammar,
    rsync_grammar,
    scp_grammar,
    ssh_grammar,
    tar_grammar,
    wget_grammar,
)

__all__ = ["GRAMMARS", "awk_program_problem", "rg_grammar", "sed_script_problem"]

Grammar = Callable[[list[str], Findings], None]


# -- find ---------------------------------------------------------------------------------

_FIND_VALUE_TESTS = frozenset({
    "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
    "-lname", "-ilname", "-type", "-xtype", "-perm", "-user", "-group", "-uid", "-gid",
    "-size", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-maxdepth",
    "-mindepth", "-links", "-inum", "-used", "-printf", "-regextype", "-fstype", "-context",
})
_FIND_PATH_TESTS = frozenset({"-newer", "-anewer", "-cnewer", "-samefile", "-files0-from"})
_FIND_FLAGS = frozenset({
    "-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-empty", "-readable",
    "-writable", "-executable", "-nouser", "-nogroup", "-depth", "-d", "-mount", "-xdev",
    "-noleaf", "-daystart", "-ignore_readdir_race", "-noignore_readdir_race", "-a", "-and",
    "-o", "-or", "-not", "!", "(", ")", ",", "-H", "-P",
})


def find_grammar(args: list[str], f: Findings) -> None:
    i = 0
    while i < len(args) and args[i] in ("-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3"):
        if args[i] == "-L":
            f.add(Effect.UNKNOWN, "find -L follows symlinks, which may lead outside the workspace")
        i += 1
    if i < len(args) and args[i] == "-D":
        i += 2
    starts = 0
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("(", ")", "!", ","):
        f.path(args[i])
        starts += 1
        i += 1
    if starts == 0:
        f.path(".")
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
        elif tok in ("-L", "-follow"):
            f.add(Effect.UNKNOWN, "find -L follows symlinks, which may lead outside the workspace")
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
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://|ext::)")
_URLISH = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://|[^/:]+:|ext::)")


def git_grammar(args: list[str], f: Findings) -> None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt, eq, value = args[i].partition("=")
        i += 1
        if opt in ("-c", "--config-env", "--exec-path", "--super-prefix"):
            f.add(Effect.EXEC, f"git {opt} can make git run any program")
            if opt == "-c" and not eq:
                i += 1
        elif opt in _GIT_GLOBAL_VALUE:
            if not eq:
                value = args[i] if i < len(args) else ""
                i += 1
            f.path(value)
        elif opt.startswith("--list-cmds") or opt in _GIT_GLOBAL_FLAGS:
            continue
        else:
            f.add(Effect.UNKNOWN, f"git option {opt!r} is not one the policy knows")
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
        elif opt == "-O" and sub == "grep":
            f.add(Effect.EXEC, "git grep -O opens a pager program")
        elif opt == "--remote":
            f.add(Effect.NETWORK, f"git {sub} --remote talks to a remote")
        elif eq and looks_like_path(value):
            f.path(value)


# -- sed ----------------------------------------------------------------------------------

_SED_SIMPLE = set("pdDnNPhHgGxl=qQzF")


def _sed_skip_delimited(script: str, i: int, delim: str) -> int:
    """Index just past the next unescaped ``delim`` from ``i``, or -1."""
    while i < len(script):
        ch = script[i]
        if ch == "\\":
            i += 2
            continue
        if ch == delim:
            return i + 1
        i += 1
    return -1


def _sed_address(script: str, i: int) -> int:
    """Skip one address at ``i`` (returns ``i`` unchanged when there is none; -1 on error)."""
    if i < len(script) and script[i].isdigit():
        while i < len(script) and (script[i].isdigit() or script[i] == "~"):
            i += 1
    elif i < len(script) and script[i] == "$":
        i += 1
    elif i < len(script) and script[i] in "/\\":
        delim = "/"
        if script[i] == "\\":
            if i + 1 >= len(script):
                return -1
            delim = script[i + 1]
            i += 1
        i = _sed_skip_delimited(script, i + 1, delim)
        if i < 0:
            return -1
        while i < len(script) and script[i] in "IM":
            i += 1
    return i


def sed_script_problem(script: str) -> tuple[Effect, str] | None:
    """Why a sed script is not plainly a filter, or ``None`` when it is.

    Only a known subset is accepted: addresses, ``s`` with flags ``gpiImM`` and digits,
    ``y``, the plain commands, braces, labels and branches, ``a``/``i``/``c`` text. ``e``,
    ``w``/``W``, ``r``/``R``, the ``e``/``w`` flags of ``s`` and anything unrecognised are
    reported.
    """
    i = 0
    steps = 0
    while i < len(script):
        steps += 1
        if steps > 10_000:
            return Effect.UNKNOWN, "the sed script is too long to read"
        ch = script[i]
        if ch in " \t;{}!":
            i += 1
            continue
        start = i
        i = _sed_address(script, i)
        if i < 0:
            return Effect.UNKNOWN, "an unterminated sed address"
        if i > start and i < len(script) and script[i] == ",":
            i += 1
            if i < len(script) and script[i] in "+~":
                i += 1
            i = _sed_address(script, i)
            if i < 0:
                return Effect.UNKNOWN, "an unterminated sed address"
        while i < len(script) and script[i] in " \t!":
            i += 1
        if i >= len(script):
            break
        cmd = script[i]
        i += 1
        if cmd in "{};":
            continue
        if cmd in _SED_SIMPLE:
            while i < len(script) and script[i].isdigit():
                i += 1
            continue
        if cmd in "s":
            if i >= len(script) or script[i] in "\\\n":
                return Effect.UNKNOWN, "a sed s command without a delimiter"
            delim = script[i]
            i = _sed_skip_delimited(script, i + 1, delim)
            i = _sed_skip_delimited(script, i, delim) if i >= 0 else -1
            if i < 0:
                return Effect.UNKNOWN, "an unterminated sed s command"
            while i < len(script) and script[i] not in ";} \t":
                flag = script[i]
                if flag == "e":
                    return Effect.EXEC, "sed s///e runs the pattern space as a command"
                if flag in "wW":
                    return Effect.WRITE, "sed s///w writes a file"
                if flag not in "gpiImM0123456789":
                    return Effect.UNKNOWN, f"sed s flag {flag!r} is not one the policy knows"
                i += 1
            continue
        if cmd == "y":
            if i >= len(script):
                return Effect.UNKNOWN, "a sed y command without a delimiter"
            delim = script[i]
            i = _sed_skip_delimited(script, i + 1, delim)
            i = _sed_skip_delimited(script, i, delim) if i >= 0 else -1
            if i < 0:
                return Effect.UNKNOWN, "an unterminated sed y command"
            continue
        if cmd in "btT:":
            while i < len(script) and script[i] not in ";}":
                i += 1
            continue
        if cmd in "aic":
            return None  # GNU one-line text: the rest of the script is text to print
        if cmd == "e":
            return Effect.EXEC, "sed e runs a command"
        if cmd in "wW":
            return Effect.WRITE, "sed w writes a file"
        if cmd in "rR":
            return Effect.UNKNOWN, "sed r reads a file the policy cannot check"
        return Effect.UNKNOWN, f"sed command {cmd!r} is not one the policy knows"
    return None


_SED_SPEC = ToolSpec(
    operands="none",
    values=frozenset({"-l", "--line-length"}),
    pattern_values=frozenset({"-e", "--expression", "-f", "--file"}),
    write_flags=frozenset({"-i", "--in-place"}),
)


def sed_grammar(args: list[str], f: Findings) -> None:
    scripts: list[str] = []
    in_place = False
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1])
        elif a.startswith("--expression="):
            scripts.append(a.split("=", 1)[1])
        elif a.startswith("-e") and not a.startswith("--") and len(a) > 2:
            scripts.append(a[2:])
        elif a in ("-f", "--file") or (a.startswith(("--file=", "-f")) and not a.startswith("--")):
            f.add(Effect.UNKNOWN, "sed -f reads its script from a file the policy cannot read")
        elif a.startswith(("-i", "--in-place")) or (
            a.startswith("-") and not a.startswith("--") and "i" in a[1:] and "e" not in a[1:]
        ):
            in_place = True
        elif a == "--":
            break
        i += 1
    operands = read_options("sed", _SED_SPEC, args, Findings())
    explicit = bool(scripts) or any(a.startswith(("-f", "--file")) for a in args)
    if not explicit and operands:
        scripts.append(operands[0])
        operands = operands[1:]
    for script in scripts:
        problem = sed_script_problem(script)
        if problem:
            f.add(*problem)
    files = operands
    if in_place:
        f.add(Effect.WRITE, "sed -i edits files in place")
    for path in files:
        f.path(path, write=in_place)


# -- awk ----------------------------------------------------------------------------------

_AWK_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_AWK_REGEX = re.compile(r"(^|[(,~!&|{;:?\s])/(?:[^/\\\n]|\\.)+/")
_AWK_PRINT_REDIRECT = re.compile(r"\bprintf?\b[^;{}]*>")


def awk_program_problem(program: str) -> tuple[Effect, str] | None:
    code = _AWK_STRING.sub('""', program)
    code = _AWK_REGEX.sub(r"\1//", code)
    if re.search(r"\bsystem\s*\(", code):
        return Effect.EXEC, "the awk program calls system()"
    if re.search(r"(?<!\|)\|(?!\|)", code):
        return Effect.EXEC, "the awk program pipes to or from a command"
    if "getline" in code:
        return Effect.UNKNOWN, "the awk program reads with getline"
    if re.search(r"\b(ARGV|ARGC|ENVIRON|PROCINFO)\b", code) and "=" in code:
        return Effect.UNKNOWN, "the awk program changes ARGV/ARGC or reads the environment"
    if _AWK_PRINT_REDIRECT.search(code):
        return Effect.WRITE, "the awk program redirects output to a file"
    if "@" in code:
        return Effect.UNKNOWN, "the awk program uses a gawk directive (@include, @load)"
    return None


def awk_grammar(args: list[str], f: Findings) -> None:
    i = 0
    program: str | None = None
    from_file = False
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a in ("-F", "-v", "-W") or a in ("--field-separator", "--assign"):
            i += 2
            continue
        if a.startswith(("-F", "-v", "-W", "--field-separator=", "--assign=")):
            i += 1
            continue
        if a in ("-f", "--file", "-E", "--exec", "-i", "--include") or a.startswith(
            ("-f", "--file=", "-E", "--exec=", "-i", "--include=")
        ):
            from_file = True
            f.add(Effect.UNKNOWN, "awk reads its program from a file the policy cannot read")
            i += 1 if "=" in a or (len(a) > 2 and not a.startswith("--")) else 2
            continue
        if a in ("-e", "--source"):
            program = (program or "") + "\n" + (args[i + 1] if i + 1 < len(args) else "")
            i += 2
            continue
        if a in ("-l", "--load") or a.startswith(("-l", "--load=")):
            f.add(Effect.EXEC, "awk -l loads a shared library")
        elif a.startswith(("-o", "-p", "-d", "--dump-variables", "--pretty-print",
                           "--profile")):
            f.add(Effect.WRITE, f"awk {a} writes a file")
        i += 1
    rest = args[i:]
    if program is None and not from_file:
        if not rest:
            f.block("awk without a program")
            return
        program, rest = rest[0], rest[1:]
    if program is not None:
        problem = awk_program_problem(program)
        if problem:
            f.add(*problem)
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
