"""Grammars for the programs that move data: archives (``tar``), copies and transfers
(``rsync``, ``scp``/``sftp``, ``ssh``, ``curl``, ``wget``) and ``dd``.

Same contract as :mod:`.grammars`: each function only records effects and paths in
:class:`Findings`; anything it cannot read where it matters is :attr:`Effect.UNKNOWN`.
The bypasses these exist for: ``tar --to-command`` / ``-I`` / ``--checkpoint-action=exec``
and remote archives, ``rsync -e``, ``ssh -o ProxyCommand=…``, output files written by
downloaders, ``dd of=``.
"""

from __future__ import annotations

import re

from deepseek_eyes.terminal.policy.analysis import Effect, Findings
from deepseek_eyes.terminal.policy.getopt import ArgKind, parse_argv
from deepseek_eyes.terminal.policy.options import OPTION_TABLES
from deepseek_eyes.terminal.policy.programs import ToolSpec, looks_like_path, read_options

__all__ = [
    "curl_grammar",
    "dd_grammar",
    "rsync_grammar",
    "scp_grammar",
    "ssh_grammar",
    "tar_grammar",
    "wget_grammar",
]


# -- tar ----------------------------------------------------------------------------------

_TAR_WRITES = frozenset({"-c", "--create", "-r", "--append", "-u", "--update", "-A",
                         "--catenate", "--concatenate", "-x", "--extract", "--get",
                         "--delete", "--remove-files", "--backup"})
_TAR_CREATES = frozenset({"-c", "--create", "-r", "--append", "-u", "--update"})
_TAR_EXEC = frozenset({"-I", "--use-compress-program", "--to-command", "-F", "--info-script",
                       "--new-volume-script", "--rsh-command", "--rmt-command"})
_TAR_WRITE_VALUES = frozenset({"-g", "--listed-incremental", "--index-file", "--volno-file"})
_TAR_PATH_VALUES = frozenset({"-X", "--exclude-from", "--exclude-ignore",
                              "--exclude-ignore-recursive"})
_TAR_DATE_OR_FILE = frozenset({"-N", "--newer", "--after-date", "--newer-mtime"})
_TAR_OUTSIDE = frozenset({"-P", "--absolute-names"})


def _tar_words(args: list[str]) -> list[str]:
    """Expand an old-style first word (``tar xzf a.tgz``): each letter is an option, and each
    letter that takes a value takes the next unused word, in order (tar's own rule)."""
    if not args or args[0].startswith("-"):
        return list(args)
    table = OPTION_TABLES["tar"]
    bundle, rest = args[0], list(args[1:])
    words: list[str] = []
    for letter in bundle:
        if table.short_kind(letter) is ArgKind.REQUIRED:
            words += ["-" + letter, rest.pop(0) if rest else ""]
        else:
            words.append("-" + letter)
    return words + rest


def tar_grammar(args: list[str], f: Findings) -> None:
    """GNU tar, read with its own option table. Creating follows symlinks with ``-h`` and
    always recurses, so what it archives is judged on what it reaches; ``-T`` names the
    files to archive from a file the policy does not read."""
    parsed = parse_argv(OPTION_TABLES["tar"], _tar_words(args))
    for problem in parsed.problems:
        f.add(Effect.UNKNOWN, f"tar: {problem}")
    writes = parsed.has(*_TAR_WRITES)
    creates = parsed.has(*_TAR_CREATES)
    follow = parsed.has("-h", "--dereference")
    for use in parsed.uses:
        value = use.value
        if use.option in _TAR_EXEC:
            f.add(Effect.EXEC, f"tar {use.option} runs another program")
        elif use.option == "--checkpoint-action" and value and "exec" in value:
            f.add(Effect.EXEC, "tar --checkpoint-action=exec runs a command")
        elif use.option in ("-f", "--file") and value is not None:
            if re.match(r"^[^/]+:", value) and not parsed.has("--force-local"):
                f.add(Effect.NETWORK, "tar -f host:file uses a remote tape server")
            else:
                f.path(value, write=writes)
        elif use.option in ("-C", "--directory") and value is not None:
            f.path(value, write=writes)
        elif use.option in ("-T", "--files-from") and value is not None:
            f.path(value)
            if creates:
                f.add(Effect.UNKNOWN, "tar -T takes the names of the files to archive from a "
                                      "file the policy does not read")
        elif use.option in _TAR_WRITE_VALUES and value is not None:
            f.add(Effect.WRITE, f"tar {use.option} writes a file")
            f.path(value, write=True)
        elif value is not None and (use.option in _TAR_PATH_VALUES or (
            use.option in _TAR_DATE_OR_FILE and looks_like_path(value)
        )):
            f.path(value)
        elif use.option in _TAR_OUTSIDE:
            f.add(Effect.UNKNOWN, f"tar {use.option} keeps absolute names and may reach outside")
    for op in parsed.operands:
        if creates:
            f.reach_path(op, follow=follow)
        else:
            f.path(op, write=writes)
    if writes:
        f.add(Effect.WRITE, "tar creates or extracts files")
    else:
        f.add(Effect.READ, "tar lists or compares an archive")


# -- network tools ------------------------------------------------------------------------

_SSH_EXEC_WORDS = re.compile(
    r"(?i)(proxycommand|localcommand|permitlocalcommand|knownhostscommand|match|"
    r"remotecommand|proxyusefdpass|securitykeyprovider|pkcs11provider)"
)


def ssh_grammar(args: list[str], f: Findings) -> None:
    f.add(Effect.NETWORK, "ssh connects to another host")
    f.add(Effect.EXEC, "ssh runs a shell or command on another host")
    for k, a in enumerate(args):
        if a.startswith("-o") and _SSH_EXEC_WORDS.search(a + (args[k + 1] if a == "-o" and
                                                               k + 1 < len(args) else "")):
            f.add(Effect.EXEC, "an ssh -o option runs a local command")
        if a in ("-F", "-i", "-E", "-S") and k + 1 < len(args):
            f.path(args[k + 1])


def scp_grammar(args: list[str], f: Findings) -> None:
    f.add(Effect.NETWORK, "scp/sftp copy to or from another host")
    f.add(Effect.WRITE, "scp/sftp write files")
    skip = False
    for k, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-S", "-D") or (a.startswith("-o") and _SSH_EXEC_WORDS.search(
            a + (args[k + 1] if a == "-o" and k + 1 < len(args) else "")
        )):
            f.add(Effect.EXEC, f"scp {a} runs a local program")
        if a in ("-F", "-i", "-o", "-P", "-c", "-l", "-S", "-D", "-J", "-X", "-b"):
            skip = True
            if a in ("-F", "-i", "-b") and k + 1 < len(args):
                f.path(args[k + 1])
            continue
        if not a.startswith("-") and not re.match(r"^[^/]+:", a):
            f.path(a, write=True)


def rsync_grammar(args: list[str], f: Findings) -> None:
    f.add(Effect.WRITE, "rsync writes files")
    spec = ToolSpec(
        effect=Effect.WRITE,
        operands="none",
        values=frozenset({"--exclude", "--include", "--filter", "-f", "--chmod", "--chown",
                          "--usermap", "--groupmap", "--max-size", "--min-size", "--bwlimit",
                          "--timeout", "--contimeout", "--port", "--address", "-B",
                          "--block-size", "--compress-level", "--skip-compress",
                          "--out-format", "--log-file-format", "--modify-window",
                          "--iconv", "--suffix", "--info", "--debug", "--max-delete",
                          "--sockopts", "--protocol", "--checksum-choice", "--compress-choice",
                          "--outbuf", "--stop-after", "--stop-at", "--max-alloc"}),
        path_values=frozenset({"--files-from", "--exclude-from", "--include-from",
                               "--password-file", "--compare-dest", "--copy-dest",
                               "--link-dest", "--read-batch"}),
        write_values=frozenset({"--log-file", "--write-batch", "--only-write-batch",
                                "--backup-dir", "--partial-dir", "-T", "--temp-dir"}),
        exec_options=frozenset({"-e", "--rsh", "--rsync-path", "--daemon", "--config",
                                "-M", "--remote-option"}),
    )
    for op in read_options("rsync", spec, args, f):
        if "::" in op or op.startswith("rsync://") or re.match(r"^[^/]+:", op):
            f.add(Effect.NETWORK, "rsync copies to or from another host")
        else:
            f.path(op, write=True)


def curl_grammar(args: list[str], f: Findings) -> None:
    f.add(Effect.NETWORK, "curl transfers data over the network")
    spec = ToolSpec(
        operands="none",
        values=frozenset({"-X", "--request", "-H", "--header", "-A", "--user-agent", "-e",
                          "--referer", "-u", "--user", "-m", "--max-time", "--connect-timeout",
                          "-x", "--proxy", "-d", "--data", "--data-raw", "--data-binary",
                          "--data-urlencode", "--json", "-F", "--form", "-r", "--range",
                          "--retry", "-w", "--write-out", "-b", "--cookie", "--resolve",
                          "--connect-to", "-Y", "-y", "--limit-rate", "-z", "--oauth2-bearer"}),
        path_values=frozenset({"-T", "--upload-file", "-K", "--config", "--cacert",
                               "--capath", "-E", "--cert", "--key", "--netrc-file"}),
        write_values=frozenset({"-o", "--output", "--output-dir", "-D", "--dump-header",
                                "-c", "--cookie-jar", "--trace", "--trace-ascii", "--stderr",
                                "--libcurl", "--etag-save", "--hsts", "--alt-svc"}),
    )
    read_options("curl", spec, args, f)
    if any(a in ("-O", "--remote-name", "-J", "--remote-header-name", "--remote-name-all")
           or re.match(r"^-[a-zA-Z]*O", a) for a in args):
        f.add(Effect.WRITE, "curl -O writes a file named by the server")
    if any(a in ("-K", "--config") or a.startswith("--config=") for a in args):
        f.add(Effect.UNKNOWN, "curl -K reads options from a file the policy cannot read")


def wget_grammar(args: list[str], f: Findings) -> None:
    f.add(Effect.NETWORK, "wget downloads over the network")
    f.add(Effect.WRITE, "wget writes the files it downloads")
    spec = ToolSpec(
        operands="none",
        values=frozenset({"-t", "--tries", "-T", "--timeout", "-U", "--user-agent",
                          "--header", "-l", "--level", "-A", "--accept", "-R", "--reject",
                          "-Q", "--quota", "-w", "--wait"}),
        path_values=frozenset({"-i", "--input-file", "--load-cookies", "--ca-certificate",
                               "--certificate", "--private-key"}),
        write_values=frozenset({"-O", "--output-document", "-o", "--output-file", "-a",
                                "--append-output", "-P", "--directory-prefix",
                                "--save-cookies", "--warc-file"}),
        exec_options=frozenset({"-e", "--execute", "--use-askpass", "--config"}),
    )
    read_options("wget", spec, args, f)


def dd_grammar(args: list[str], f: Findings) -> None:
    for a in args:
        key, eq, value = a.partition("=")
        if not eq:
            f.add(Effect.UNKNOWN, f"dd operand {a!r} is not key=value")
        elif key == "if":
            f.path(value)
        elif key == "of":
            f.add(Effect.WRITE, "dd of= writes a file")
            f.path(value, write=True)
