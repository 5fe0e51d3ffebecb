"""The program catalogue: what each known executable does, and a GNU-style option reader.

Programs are classed by what they can do to the machine: read, write, run code (interpreters,
build tools, editors and pagers that can spawn shells), use the network, or act with
privilege. A program not in the catalogue is *unknown*, which the engine treats like code
execution: it never runs in read-only mode and always needs approval elsewhere. That is the
lesson of the safe-command lists that were bypassed: a list of "safe" names is only as good
as its reading of each program's flags, so a program is known here only together with the
flags that change its class (``sort -o``, ``sort --compress-program``, ``tree -o``,
``rg --pre``, ``date -s``, ``xxd`` with two operands …).

GNU ``getopt_long`` accepts any unique prefix of a long option (``--compress-prog=sh``);
:func:`read_options` treats a prefix of a dangerous option as that option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deepseek_eyes.terminal.policy.analysis import Effect, Findings
from deepseek_eyes.terminal.policy.getopt import parse_argv
from deepseek_eyes.terminal.policy.options import OPTION_TABLES

__all__ = [
    "EXEC_PROGRAMS",
    "NETWORK_PROGRAMS",
    "PRIVILEGE_PROGRAMS",
    "SIMPLE_TOOLS",
    "ToolSpec",
    "looks_like_path",
    "normalize_name",
    "read_options",
]

_VERSION_TAIL = re.compile(r"[0-9.\-]+$")
_ALIASES = {
    "gawk": "awk", "mawk": "awk", "nawk": "awk", "original-awk": "awk",
    "egrep": "grep", "fgrep": "grep",  # rgrep (grep -r in a script) stays unknown
    "vim": "vim", "nvim": "vim", "vi": "vim", "view": "vim", "ex": "vim", "rvim": "vim",
    "gtar": "tar", "bsdtar": "tar", "gsed": "sed", "gfind": "find", "gmake": "make",
    "python": "python", "pypy": "python", "dir": "ls", "vdir": "ls",
    "g++": "gcc", "c++": "gcc", "cc": "gcc", "clang++": "clang",
    "ncat": "nc", "netcat": "nc", "nc.openbsd": "nc", "nc.traditional": "nc",
    "sha1sum": "sha256sum", "sha224sum": "sha256sum", "sha384sum": "sha256sum",
    "sha512sum": "sha256sum", "md5sum": "sha256sum", "b2sum": "sha256sum",
    "[": "test",
}


def normalize_name(basename: str) -> str:
    """``python3.11`` → ``python``, ``vim.basic`` → ``vim``, ``mawk`` → ``awk``."""
    if basename in _ALIASES:
        return _ALIASES[basename]
    name = basename.split(".", 1)[0] if not basename.startswith(".") else basename
    if name in _ALIASES:
        return _ALIASES[name]
    stripped = _VERSION_TAIL.sub("", name) or name
    return _ALIASES.get(stripped, stripped)


def looks_like_path(value: str) -> bool:
    """Whether an option value we know nothing about might name a file outside."""
    return value.startswith(("/", "~", "./", "../")) or "/../" in value or value == ".."


@dataclass(frozen=True)
class ToolSpec:
    """One program's option *roles*: which options change its class or name its paths.

    How the argv is split into options, values and operands comes from the program's own
    getopt table (:data:`.options.OPTION_TABLES`); this spec only says what each option
    *means*. An option the table has but the spec does not name is a harmless flag or
    value; an option the table does not have makes the command unknown (fail closed).

    ``operands``: ``paths`` (every operand is a path read), ``none`` (operands are text),
    ``pattern`` (the first operand is a pattern unless a pattern option was given, the rest
    are paths), ``write`` (every operand is a path written), ``second-write`` (the second
    operand is written: ``uniq in out``, ``xxd in out``).
    """

    effect: Effect = Effect.READ
    operands: str = "paths"
    values: frozenset[str] = frozenset()  # options that take a plain value
    pattern_values: frozenset[str] = frozenset()  # options that take the pattern (grep -e)
    path_values: frozenset[str] = frozenset()  # options whose value is a path that is read
    write_values: frozenset[str] = frozenset()  # options whose value is a path written
    exec_options: frozenset[str] = frozenset()  # options that run another program
    write_flags: frozenset[str] = frozenset()  # flags that make the program write
    privilege_options: frozenset[str] = frozenset()  # flags that change the system
    operands_privilege: bool = False  # any operand changes the system (hostname NAME)
    file_lists: frozenset[str] = frozenset()  # value: a file of file names (--files0-from)
    follow: frozenset[str] = frozenset()  # options that follow symlinks (-L, -R, …)
    recursive: frozenset[str] = frozenset()  # options that descend into directories
    recursive_values: tuple[tuple[str, str], ...] = ()  # (option, value) that recurse
    recursive_by_default: bool = False  # du: always descends
    follows_by_default: bool = False  # diff: follows symlinks unless told not to
    default_operand: str | None = None  # what the program reads with no operand (".")
    file_list_flags: frozenset[str] = frozenset()  # make every operand a list of files (-c)
    obsolete_first: str = ""  # a regex: a first word read before getopt (head -5c)
    response_files: bool = False  # an operand "@FILE" is replaced by FILE's words
    setting_operands: bool = False  # an operand not starting with "+" changes the system
    colon_path_values: frozenset[str] = frozenset()  # value: paths joined by ":" (file -m)


def _fs(*names: str) -> frozenset[str]:
    return frozenset(names)


def _kind_of(spec: ToolSpec, option: str) -> str:
    """The option's role: exact match first, then (long options) every option it prefixes."""
    tables = (
        ("exec", spec.exec_options),
        ("privilege", spec.privilege_options),
        ("filelist", spec.file_lists),
        ("write", spec.write_values),
        ("path", spec.path_values),
        ("pattern", spec.pattern_values),
        ("value", spec.values),
        ("writeflag", spec.write_flags),
        ("follow", spec.follow),
        ("recursive", spec.recursive),
    )
    for kind, table in tables:
        if option in table:
            return kind
    if option.startswith("--") and len(option) > 3:
        for kind, table in tables:  # the most dangerous interpretation of an abbreviation
            if any(known.startswith(option) and known.startswith("--") for known in table):
                return kind
    return "flag"


def _handle(name: str, kind: str, option: str, value: str | None, f: Findings) -> None:
    if kind == "exec":
        f.add(Effect.EXEC, f"{name} {option} runs another program")
    elif kind == "privilege":
        f.add(Effect.PRIVILEGE, f"{name} {option} changes the system")
    elif kind == "filelist":
        f.add(Effect.UNKNOWN, f"{name} {option} takes the names of the files it reads from "
                              "a file the policy does not read")
        if value is not None:
            f.path(value)
    elif kind == "write":
        f.add(Effect.WRITE, f"{name} {option} writes a file")
        if value is not None:
            f.path(value, write=True)
    elif kind == "path" and value is not None:
        f.path(value)
    elif kind == "writeflag":
        f.add(Effect.WRITE, f"{name} {option} modifies files")
    elif value is not None and (kind == "unnamed" or (kind == "flag" and looks_like_path(value))):
        f.path(value)


def read_options(
    name: str, spec: ToolSpec, args: list[str], f: Findings, *, program: str | None = None
) -> list[str]:
    """Walk ``args`` with ``spec``: record effects and paths in ``f``; return the operands.

    With a getopt table for ``program`` (the real basename, e.g. ``b2sum``) or for ``name``
    (its normalized name) the argv is split exactly as the program splits it; without one
    (programs that parse by hand) the reader below is used.
    """
    table = OPTION_TABLES.get(program or name) or OPTION_TABLES.get(name)
    if spec.obsolete_first and args and re.fullmatch(spec.obsolete_first, args[0]):
        args = args[1:]  # head -5c FILE, tail +3 FILE: a count read before getopt
    if table is None:
        operands = _read_options_by_hand(name, spec, args, f)
        follows = spec.follows_by_default or _mentions(args, spec.follow)
        recursive = spec.recursive_by_default or follows or _mentions(args, spec.recursive)
        _reach(spec, operands, follows, recursive, f)
        return operands
    parsed = parse_argv(table, args)
    for problem in parsed.problems:
        f.add(Effect.UNKNOWN, f"{name}: {problem}")
    pattern_given = False
    recursive = spec.recursive_by_default
    follows = spec.follows_by_default
    for use in parsed.uses:
        kind = _kind_of(spec, use.option)
        if kind == "pattern" or use.option in spec.pattern_values:
            pattern_given = True
        elif kind == "follow":
            follows = True
            recursive = recursive or use.option in spec.recursive
        elif kind == "recursive":
            recursive = True
        if (use.option, use.value) in spec.recursive_values:
            recursive = True
        if use.option in spec.colon_path_values and use.value is not None:
            for piece in use.value.split(":"):
                f.path(piece)
            continue
        if kind == "flag" and use.value is not None:
            # The table says it takes a value, the spec names no role for it (a long alias
            # of a role option, as hexdump's --format-file of -f): checked as a path.
            kind = "unnamed"
        _handle(name, kind, use.option, use.value, f)
    if spec.file_list_flags and parsed.has(*spec.file_list_flags):
        f.add(Effect.UNKNOWN, f"{name} with {sorted(spec.file_list_flags)[0]} reads the files "
                              "named inside its operands, which the policy does not read")
    operands = _judge_operands(name, spec, parsed.operands, pattern_given, f)
    _reach(spec, operands, follows, recursive, f)
    return operands


def _reach(spec: ToolSpec, operands: list[str], follows: bool, recursive: bool,
           f: Findings) -> None:
    """A recursive or link-following read is judged on what it reaches (its operands, or
    the directory it reads when it has none)."""
    if not (follows or recursive):
        return
    targets = operands if spec.operands != "none" else []
    if not targets and spec.default_operand is not None:
        targets = [spec.default_operand]
    for target in targets:
        f.reach_path(target, follow=follows)


def _mentions(args: list[str], options: frozenset[str]) -> bool:
    """Whether a hand-parsed argv may use one of ``options``: a long option by its name or
    any prefix of it, a short one alone or anywhere in a bundle (over-reading is safe)."""
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if any(o.startswith(name) and o.startswith("--") for o in options):
                return True
        elif arg.startswith("-") and any(f"-{c}" in options for c in arg[1:]):
            return True
    return False


def _judge_operands(
    name: str, spec: ToolSpec, operands: list[str], pattern_given: bool, f: Findings
) -> list[str]:
    if spec.operands_privilege and operands:
        f.add(Effect.PRIVILEGE, f"{name} with an operand changes the system")
    if spec.setting_operands and any(not op.startswith("+") for op in operands):
        f.add(Effect.PRIVILEGE, f"{name} with an operand that is not a +FORMAT changes the "
                                "system")
    if spec.response_files and any(op.startswith("@") for op in operands):
        f.add(Effect.UNKNOWN, f"{name} reads more arguments from an @FILE the policy does "
                              "not read")
    mode = spec.operands
    if mode == "pattern" and not pattern_given and operands:
        operands = operands[1:]
    if mode in ("paths", "pattern"):
        for op in operands:
            f.path(op)
    elif mode == "write":
        for op in operands:
            f.path(op, write=True)
    elif mode == "second-write":
        for k, op in enumerate(operands):
            f.path(op, write=k >= 1)
        if len(operands) >= 2:
            f.add(Effect.WRITE, f"{name} writes its second operand")
    return operands


def _read_options_by_hand(name: str, spec: ToolSpec, args: list[str], f: Findings) -> list[str]:
    """The reader for programs without a getopt table (they parse their argv by hand)."""
    operands: list[str] = []
    pattern_given = False
    i = 0
    end_of_options = False

    def handle(kind: str, option: str, value: str | None) -> None:
        nonlocal pattern_given
        if kind == "pattern" or option in spec.pattern_values:
            pattern_given = True
        _handle(name, kind, option, value, f)

    valued = ("exec", "write", "path", "pattern", "value", "privilege", "filelist")
    while i < len(args):  # bounded by len(args); every branch advances i
        arg = args[i]
        i += 1
        if end_of_options or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
            continue
        if arg == "--":
            end_of_options = True
            continue
        if arg.startswith("--"):
            option, eq, value = arg.partition("=")
            kind = _kind_of(spec, option)
            if eq:
                handle(kind, option, value)
            elif kind in valued and kind not in ("exec", "privilege"):
                handle(kind, option, args[i] if i < len(args) else None)
                i += 1
            else:
                handle(kind, option, None)
            continue
        whole = _kind_of(spec, arg)  # single-dash long options: zip -TT, xxd -cols
        if whole != "flag" and len(arg) > 2:
            if whole in valued and whole not in ("exec", "privilege"):
                handle(whole, arg, args[i] if i < len(args) else None)
                i += 1
            else:
                handle(whole, arg, None)
            continue
        j = 1
        while j < len(arg):  # a bundle of short options: -rn, -A3, -oFILE
            option = "-" + arg[j]
            kind = _kind_of(spec, option)
            if kind in valued:
                value = arg[j + 1 :]
                if not value:
                    value = args[i] if i < len(args) else ""
                    i += 1
                handle(kind, option, value)
                break
            if arg[j] == "/":  # "-x/etc/passwd" with an undeclared -x: fail closed
                f.path(arg[j:])
                break
            handle(kind, option, None)
            j += 1
    return _judge_operands(name, spec, operands, pattern_given, f)


_READ = Effect.READ
_WRITE = Effect.WRITE

#: Programs read with :func:`read_options`. Everything not listed (and not a grammar,
#: wrapper or class set below) is unknown.
SIMPLE_TOOLS: dict[str, ToolSpec] = {
    # reading files
    "cat": ToolSpec(),
    "tac": ToolSpec(values=_fs("-s", "--separator")),
    "nl": ToolSpec(values=_fs("-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w")),
    "head": ToolSpec(values=_fs("-n", "-c", "--lines", "--bytes"),
                     obsolete_first=r"-\d+[bcklmqvz]*"),
    "tail": ToolSpec(obsolete_first=r"[-+]\d+[bcl]?f?",
                     values=_fs("-n", "-c", "--lines", "--bytes", "-s", "--pid",
                                "--sleep-interval", "--max-unchanged-stats")),
    "wc": ToolSpec(file_lists=_fs("--files0-from")),
    "stat": ToolSpec(values=_fs("-c", "--format", "--printf", "-t")),
    "file": ToolSpec(values=_fs("-F", "-e", "-P"), colon_path_values=_fs("-m", "--magic-file"),
                     file_lists=_fs("-f", "--files-from"), write_flags=_fs("-C", "--compile")),
    "du": ToolSpec(values=_fs("-d", "--max-depth", "-B", "--block-size", "-t", "--threshold",
                              "--exclude", "--time-style", "--time"),
                   path_values=_fs("-X", "--exclude-from"), file_lists=_fs("--files0-from"),
                   follow=_fs("-L", "--dereference"), recursive_by_default=True,
                   default_operand="."),
    "df": ToolSpec(values=_fs("-B", "--block-size", "-t", "--type", "-x", "--exclude-type",
                              "--output")),
    "ls": ToolSpec(values=_fs("-I", "--ignore", "--hide", "-w", "--width", "-T", "--tabsize",
                              "--color", "--format", "--sort", "--time", "--time-style",
                              "--block-size", "--quoting-style", "--indicator-style"),
                 follow=_fs("-L", "--dereference"), recursive=_fs("-R", "--recursive"),
                 default_operand="."),
    "tree": ToolSpec(values=_fs("-L", "-P", "-I", "--filelimit", "--charset", "-H",
                                "--sort", "--timefmt"),
                     write_values=_fs("-o"), file_lists=_fs("--fromfile"),
                     follow=_fs("-l"), recursive_by_default=True, default_operand="."),
    "diff": ToolSpec(values=_fs("-L", "--label", "-I", "--ignore-matching-lines", "-x",
                                "--exclude", "-F", "--show-function-line", "-U", "-C",
                                "--unified", "--context", "-W", "--width", "--color",
                                "--palette", "--line-format", "--old-line-format",
                                "--new-line-format", "--unchanged-line-format",
                                "--old-group-format", "--new-group-format",
                                "--changed-group-format", "--unchanged-group-format",
                                "--horizon-lines", "--tabsize"),
                     path_values=_fs("-X", "--exclude-from", "--from-file", "--to-file"),
                     recursive=_fs("-r", "--recursive"), follows_by_default=True,
                     exec_options=_fs("-l", "--paginate")),
    "cmp": ToolSpec(values=_fs("-i", "--ignore-initial", "-n", "--bytes")),
    "comm": ToolSpec(values=_fs("--output-delimiter")),
    "join": ToolSpec(values=_fs("-a", "-e", "-j", "-o", "-t", "-v", "-1", "-2")),
    "paste": ToolSpec(values=_fs("-d", "--delimiters")),
    "cut": ToolSpec(values=_fs("-b", "-c", "-d", "-f", "--bytes", "--characters",
                               "--delimiter", "--fields", "--output-delimiter")),
    "fold": ToolSpec(values=_fs("-w", "--width")),
    "fmt": ToolSpec(values=_fs("-w", "--width", "-g", "--goal", "-p", "--prefix")),
    "expand": ToolSpec(values=_fs("-t", "--tabs")),
    "unexpand": ToolSpec(values=_fs("-t", "--tabs")),
    "rev": ToolSpec(),
    "od": ToolSpec(values=_fs("-A", "-j", "-N", "-S", "-t", "-w", "--address-radix",
                              "--skip-bytes", "--read-bytes", "--strings", "--format",
                              "--width")),
    "hexdump": ToolSpec(values=_fs("-e", "-n", "-s", "--format", "--length", "--skip"),
                        path_values=_fs("-f", "--format-file")),
    "xxd": ToolSpec(operands="second-write",
                    values=_fs("-c", "-g", "-l", "-o", "-s", "-n", "-cols", "-len", "-seek",
                               "-name")),
    "strings": ToolSpec(values=_fs("-n", "-t", "-e", "--bytes", "--radix", "--encoding",
                                   "-s", "--output-separator"), response_files=True),
    "sha256sum": ToolSpec(file_list_flags=_fs("-c", "--check")),
    "cksum": ToolSpec(values=_fs("-a", "--algorithm", "-l", "--length"),
                      file_list_flags=_fs("-c", "--check")),
    "sum": ToolSpec(),
    "base32": ToolSpec(values=_fs("-w", "--wrap")),
    "base64": ToolSpec(values=_fs("-w", "--wrap")),
    "basenc": ToolSpec(values=_fs("-w", "--wrap")),
    "grep": ToolSpec(operands="pattern",
                     values=_fs("-m", "--max-count", "-A", "-B", "-C", "--after-context",
                                "--before-context", "--context", "--include", "--exclude",
                                "--exclude-dir", "--color", "--colour", "--label",
                                "-d", "--directories", "-D", "--devices", "--binary-files",
                                "--group-separator"),
                     pattern_values=_fs("-e", "--regexp", "-f", "--file"),
                     path_values=_fs("--exclude-from", "-f", "--file"),
                     follow=_fs("-R", "--dereference-recursive"),
                     recursive=_fs("-r", "--recursive", "-R", "--dereference-recursive"),
                     recursive_values=(("-d", "recurse"), ("--directories", "recurse")),
                     default_operand="."),
    "jq": ToolSpec(operands="pattern",
                   values=_fs("--indent", "--arg", "--argjson", "--tab"),
                   path_values=_fs("-L", "-f", "--from-file"),
                   pattern_values=_fs("-f", "--from-file")),
    "sort": ToolSpec(values=_fs("-k", "--key", "-t", "--field-separator", "-S",
                                "--buffer-size", "--parallel", "--batch-size", "--sort"),
                     write_values=_fs("-o", "--output", "-T", "--temporary-directory"),
                     path_values=_fs("--random-source"), file_lists=_fs("--files0-from"),
                     exec_options=_fs("--compress-program")),
    "uniq": ToolSpec(operands="second-write",
                     values=_fs("-f", "-s", "-w", "--skip-fields", "--skip-chars",
                                "--check-chars", "--group", "--all-repeated")),
    "column": ToolSpec(values=_fs("-s", "-c", "-o", "-t", "-N", "-R", "-T", "-E", "-H", "-W",
                                  "--separator", "--output-separator", "--table-columns",
                                  "--output-width")),
    "shuf": ToolSpec(values=_fs("-n", "--head-count", "-i", "--input-range"),
                     write_values=_fs("-o", "--output"),
                     path_values=_fs("--random-source")),
    "tr": ToolSpec(operands="none"),
    # text and facts, no files
    "echo": ToolSpec(operands="none"),
    "printf": ToolSpec(operands="none"),
    "true": ToolSpec(operands="none"),
    "false": ToolSpec(operands="none"),
    "pwd": ToolSpec(operands="none"),
    "basename": ToolSpec(operands="none", values=_fs("-s", "--suffix")),
    "dirname": ToolSpec(operands="none"),
    # Metadata is a read too: realpath, readlink and test on a path outside the workspace
    # tell what is outside, so their operands are paths like any reader's.
    "realpath": ToolSpec(path_values=_fs("--relative-to", "--relative-base")),
    "readlink": ToolSpec(),
    "date": ToolSpec(operands="none", values=_fs("-d", "--date", "-I", "--iso-8601",
                                                  "--rfc-3339", "--resolution"),
                     path_values=_fs("-f", "--file", "-r", "--reference"),
                     privilege_options=_fs("-s", "--set"), setting_operands=True),
    "whoami": ToolSpec(operands="none"),
    "id": ToolSpec(operands="none"),
    "groups": ToolSpec(operands="none"),
    "uname": ToolSpec(operands="none"),
    "hostname": ToolSpec(operands="none", operands_privilege=True,
                         privilege_options=_fs("-F", "--file", "-b", "--boot")),
    "nproc": ToolSpec(operands="none"),
    "arch": ToolSpec(operands="none"),
    "printenv": ToolSpec(operands="none"),
    "seq": ToolSpec(operands="none", values=_fs("-f", "-s", "--format", "--separator")),
    "sleep": ToolSpec(operands="none"),
    "yes": ToolSpec(operands="none"),
    "test": ToolSpec(),  # operands and operators alike are checked as paths: fail closed
    "expr": ToolSpec(operands="none"),
    "factor": ToolSpec(operands="none"),
    "numfmt": ToolSpec(operands="none"),
    # locale -m runs gzip to read the compressed charmaps (seen by the strace tripwire)
    "locale": ToolSpec(operands="none", exec_options=_fs("-m", "--charmaps")),
    "getconf": ToolSpec(),  # getconf VAR PATH stats PATH: operands are checked as paths
    "which": ToolSpec(),  # which /x/y tests a path: operands are checked as paths
    "tty": ToolSpec(operands="none"),
    "uptime": ToolSpec(operands="none"),
    "free": ToolSpec(operands="none"),
    "cal": ToolSpec(operands="none"),
    "lsb_release": ToolSpec(operands="none"),
    # writing files inside the workspace
    "rm": ToolSpec(_WRITE, "write"),
    "rmdir": ToolSpec(_WRITE, "write"),
    "unlink": ToolSpec(_WRITE, "write"),
    "shred": ToolSpec(_WRITE, "write", values=_fs("-n", "-s", "--iterations", "--size"),
                      path_values=_fs("--random-source")),
    "mkdir": ToolSpec(_WRITE, "write", values=_fs("-m", "--mode", "--context")),
    "touch": ToolSpec(_WRITE, "write", values=_fs("-d", "--date", "-t", "--time"),
                      path_values=_fs("-r", "--reference")),
    "cp": ToolSpec(_WRITE, "write", values=_fs("--backup", "-S", "--suffix", "--sparse",
                                                "--reflink", "--preserve", "--no-preserve",
                                                "--update"),
                   write_values=_fs("-t", "--target-directory"),
                   follow=_fs("-L", "--dereference"),
                   recursive=_fs("-r", "-R", "--recursive", "-a", "--archive")),
    "mv": ToolSpec(_WRITE, "write", values=_fs("--backup", "-S", "--suffix", "--update"),
                   write_values=_fs("-t", "--target-directory")),
    "ln": ToolSpec(_WRITE, "write", values=_fs("--backup", "-S", "--suffix"),
                   write_values=_fs("-t", "--target-directory")),
    "install": ToolSpec(_WRITE, "write", values=_fs("-m", "--mode", "-o", "--owner", "-g",
                                                     "--group", "-S", "--suffix",
                                                     "--backup", "--strip-program"),
                        write_values=_fs("-t", "--target-directory")),
    "chmod": ToolSpec(_WRITE, "write", path_values=_fs("--reference"),
                      recursive=_fs("-R", "--recursive")),
    "chgrp": ToolSpec(_WRITE, "write", path_values=_fs("--reference"),
                      recursive=_fs("-R", "--recursive"), follow=_fs("-L")),
    "chown": ToolSpec(_WRITE, "write", path_values=_fs("--reference"),
                      recursive=_fs("-R", "--recursive"), follow=_fs("-L")),
    "truncate": ToolSpec(_WRITE, "write", values=_fs("-s", "--size"),
                         path_values=_fs("-r", "--reference")),
    "tee": ToolSpec(_WRITE, "write", values=_fs("--output-error")),
    "mktemp": ToolSpec(_WRITE, "write", values=_fs("--suffix"),
                       write_values=_fs("-p", "--tmpdir")),
    "split": ToolSpec(_WRITE, "write", values=_fs("-a", "-b", "-C", "-l", "-n", "-t",
                                                   "--additional-suffix", "--numeric-suffixes",
                                                   "--hex-suffixes", "--suffix-length",
                                                   "--bytes", "--line-bytes", "--lines",
                                                   "--number", "--separator"),
                      exec_options=_fs("--filter")),
    "csplit": ToolSpec(_WRITE, "write", values=_fs("-b", "-f", "-n", "--suffix-format",
                                                    "--prefix", "--digits")),
    "patch": ToolSpec(_WRITE, "write", values=_fs("-p", "--strip", "-F", "--fuzz", "-z",
                                                   "--suffix", "-V", "--version-control",
                                                   "-D", "--ifdef"),
                      path_values=_fs("-i", "--input"),
                      write_values=_fs("-o", "--output", "-d", "--directory", "-B",
                                       "--prefix", "-r", "--reject-file")),
    "mkfifo": ToolSpec(_WRITE, "write", values=_fs("-m", "--mode")),
    "gzip": ToolSpec(_WRITE, "write", values=_fs("-S", "--suffix")),
    "gunzip": ToolSpec(_WRITE, "write", values=_fs("-S", "--suffix")),
    "bzip2": ToolSpec(_WRITE, "write"),
    "xz": ToolSpec(_WRITE, "write", values=_fs("-T", "--threads", "-S", "--suffix")),
    "zstd": ToolSpec(_WRITE, "write", values=_fs("-T", "--threads"),
                     write_values=_fs("-o", "--output-dir-flat", "--output-dir-mirror")),
    "unzip": ToolSpec(_WRITE, "write", write_values=_fs("-d")),
    "zip": ToolSpec(_WRITE, "write", exec_options=_fs("-TT", "--unzip-command")),
}

#: Interpreters, compilers, build tools, shells, editors and pagers: they run code the
#: policy cannot read (a Makefile, a test suite, ``!sh`` in a pager).
EXEC_PROGRAMS = frozenset({
    "python", "pip", "pipx", "uv", "uvx", "poetry", "pdm", "hatch", "pytest", "tox", "nox",
    "coverage", "mypy", "ruff", "black", "flake8", "pylint", "ipython", "jupyter",
    "node", "nodejs", "npm", "npx", "yarn", "pnpm", "deno", "bun", "tsc", "ts-node",
    "ruby", "irb", "gem", "bundle", "bundler", "rake", "perl", "cpan", "php", "composer",
    "lua", "luajit", "tclsh", "wish", "Rscript", "R", "julia", "java", "javac", "jshell",
    "kotlin", "kotlinc", "scala", "sbt", "go", "gofmt", "cargo", "rustc", "rustup", "gcc",
    "clang", "ld", "as", "make", "cmake", "ctest", "ninja", "meson", "bazel", "bazelisk",
    "gradle", "gradlew", "mvn", "ant", "dotnet", "swift", "swiftc", "ghc", "ghci", "cabal",
    "stack", "erl", "escript", "elixir", "iex", "mix", "zig", "nim", "dart", "flutter",
    "bash", "sh", "dash", "zsh", "fish", "ksh", "mksh", "csh", "tcsh", "pwsh", "busybox",
    "toybox", "expect", "vim", "emacs", "nano", "ed", "pico", "joe", "less", "more", "most",
    "pg", "man", "info", "watch", "parallel", "script", "screen", "tmux", "gdb", "lldb",
    "strace", "ltrace", "valgrind", "perf", "docker", "podman", "buildah", "kubectl", "helm",
    "terraform", "ansible", "ansible-playbook", "vagrant", "xdg-open", "open", "sensible-browser",
    "x-www-browser", "w3m", "lynx", "links", "elinks", "env-exec", "run-parts", "eval",
    "gpg", "gpg2", "openssl", "sqlite3", "psql", "mysql", "redis-cli", "mongo", "mongosh",
    "m4", "cpp", "groff", "nroff", "troff", "pandoc", "latex", "pdflatex", "xelatex",
    "lualatex", "tex", "bc", "dc", "units", "shellcheck", "pre-commit", "direnv", "asdf",
    "nvm", "pyenv", "rbenv", "conda", "mamba", "micromamba", "wasmtime", "wasmer", "qemu",
})

#: Programs whose job is the network.
NETWORK_PROGRAMS = frozenset({
    "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "socat", "telnet", "ftp", "tftp",
    "lftp", "ping", "ping6", "traceroute", "tracepath", "mtr", "dig", "nslookup", "host",
    "whois", "ssh-keyscan", "http", "https", "aria2c", "nmap", "ncftp", "smbclient", "git-lfs",
    "gh", "glab", "aws", "gcloud", "az", "s3cmd", "rclone",
})

#: Programs that act beyond the user's files: privilege, system administration, package
#: management, other processes. Refused in every mode.
PRIVILEGE_PROGRAMS = frozenset({
    "sudo", "doas", "su", "pkexec", "runuser", "chroot", "setpriv", "unshare", "nsenter",
    "capsh", "setcap", "getcap", "mount", "umount", "losetup", "mkfs", "mke2fs", "mkswap",
    "swapon", "swapoff", "fdisk", "sfdisk", "cfdisk", "parted", "wipefs", "blkdiscard",
    "shutdown", "reboot", "poweroff", "halt", "init", "telinit", "systemctl", "service",
    "journalctl", "loginctl", "kill", "pkill", "killall", "skill", "snice", "crontab", "at",
    "batch", "atq", "atrm", "iptables", "ip6tables", "nft", "ip", "ifconfig", "route", "arp",
    "tc", "iw", "iwconfig", "modprobe", "insmod", "rmmod", "sysctl", "useradd", "userdel",
    "usermod", "groupadd", "groupdel", "passwd", "chpasswd", "chage", "visudo", "vipw",
    "chattr", "bwrap", "firejail", "systemd-run", "systemd-nspawn", "hwclock", "timedatectl",
    "hostnamectl", "localectl", "apt", "apt-get", "aptitude", "dpkg", "rpm", "yum", "dnf",
    "zypper", "pacman", "apk", "snap", "flatpak", "brew", "mknod", "debugfs", "dmsetup",
    "cryptsetup", "lvm", "mdadm", "ldconfig", "update-alternatives", "dd-rescue", "xinput",
})
