"""The one owner of "does this command line or URL carry a credential?".

Every path that can put an MCP server into the runtime — a settings file written by hand,
``mcp register``, ``mcp import``, a test or a gateway building :class:`McpServerSettings`
— asks these functions, because the settings model's validators do
(:mod:`deepseek_eyes.settings.mcp`); ``register`` and ``import`` ask them first only to
answer with their own code (``MCP_CREDENTIAL_IN_ARGUMENTS``) and wording
(:mod:`deepseek_eyes.mcp_host.credentials`). They live in the settings layer because the model
that refuses must not import the MCP capability above it.

A value on a command line is visible to every user of the machine (``ps``), lands in shell
history and in the settings file, where secrets exist only as ``{ env = "NAME" }``
references. The shapes looked for:

* an option whose name says it holds a secret, its value attached (``--token=V``) or as
  the next argument (``--api-key V``); names that point *at* a secret (``--token-file``,
  ``--password-env``) and look-alikes (``--tokenizer``, ``--keyboard``) are fine;
* ``KEY=value`` with a secret-looking ``KEY`` (``-e API_KEY=V``, ``GITHUB_TOKEN=V``), and a
  connection string's ``password=V`` / ``pwd=V`` among other pairs (``"host=h password=V"``);
* a header with its value whose name says it carries a credential: ``Authorization``,
  ``Cookie``, or any name with a key, token, secret, auth, cookie, password or session word
  (``--header "X-Api-Key: V"``, ``-H "X-Auth-Token: V"``); a value that is only a
  ``${VAR}`` reference is no literal;
* ``-p V`` as a password (``mysql -p V``, ``-pV`` for the MySQL family), unless ``V`` reads
  as a port, a path, a package or a version, or the program is a launcher whose ``-p``
  names a package (``npx -p pkg``); ``--cookie V`` / ``--cookie=V``;
* a token shape (:data:`TOKEN_PATTERNS`) anywhere;
* in a URL: user information with a password (a DSN's ``postgres://user:pw@host/db`` too),
  a key of :data:`CREDENTIAL_QUERY_KEYS` (or a name that says it holds a secret) in the
  query, in a path segment's matrix parameters (``;token=``) or in the fragment
  (``#access_token=``), and a token shape in the path or a query value
  (``https://x/mcp/sk-…/``). Keys are compared after percent-decoding (``api%5Fkey``),
  case-insensitively, with ``-`` and ``.`` read as ``_``.

A finding names *where* (the argument's position, the option or key name) and *what*; it
never carries the value, so no message built from it can repeat a secret.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "CREDENTIAL_QUERY_KEYS",
    "SECRET_NAME",
    "TOKEN_PATTERNS",
    "Finding",
    "argument_credential",
    "is_credential_key",
    "names_a_credential_header",
    "names_a_secret",
    "url_credential",
]


class _Lazy:
    """A regular expression compiled on its first use. Every command imports the settings,
    and with them this module; its seventeen patterns serve checks that run only when a
    settings file names MCP servers, or the MCP host's redactor: compiling them all at
    import was about one percent of a cached ``see``'s start-up."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled


#: A name (of an option, a variable, a header, a query key) that says it holds a secret,
#: anywhere in it: the redactor's broad net (scrubbing too much is harmless there).
_SENSITIVE_NAME_SOURCE = (
    r"(?i)(api[_-]?key|apikey|secret|token|passw(?:or)?d|passwd|credential|private[_-]?key|"
    r"access[_-]?key|auth[_-]?key|session[_-]?id|cookie)"
)

#: Token shapes that are secrets wherever they appear (name, pattern).
_TOKEN_SOURCES: tuple[tuple[str, str], ...] = (
    ("private key block", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"),
    ("OpenAI-style key", r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}"),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ("Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("AWS access key", r"\bAKIA[0-9A-Z]{16}\b"),
    ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("JSON web token",
     r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
)


if TYPE_CHECKING:  # built on first use by __getattr__ below
    SECRET_NAME: re.Pattern[str]
    TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...]


@functools.cache
def _compiled_tokens() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(source)) for name, source in _TOKEN_SOURCES)


@functools.cache
def _compiled_secret_name() -> re.Pattern[str]:
    return re.compile(_SENSITIVE_NAME_SOURCE)


def __getattr__(name: str) -> Any:
    """:data:`SECRET_NAME` and :data:`TOKEN_PATTERNS`, compiled when first read."""
    if name == "SECRET_NAME":
        return _compiled_secret_name()
    if name == "TOKEN_PATTERNS":
        return _compiled_tokens()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: URL query, matrix and fragment keys that carry a credential, normalized (lower case,
#: ``-`` and ``.`` as ``_``). The one table every URL check reads; :func:`names_a_secret`
#: adds what a name's last word says (``my_token``, ``X-Amz-Signature``).
CREDENTIAL_QUERY_KEYS = frozenset({
    "key", "apikey", "api_key", "access_key", "accesskey", "secret_key", "private_key",
    "token", "access_token", "accesstoken", "id_token", "refresh_token", "auth_token",
    "session_token", "oauth_token", "bearer", "jwt",
    "auth", "authorization", "password", "passwd", "pwd", "pass", "secret", "client_secret",
    "sig", "signature", "x_amz_signature", "x_amz_credential", "x_amz_security_token",
    "x_goog_signature", "x_goog_credential", "se_sig",
    "session", "sessionid", "session_id", "sid", "code_verifier",
    "jsessionid", "phpsessid", "awsaccesskeyid", "access_key_id", "x_api_key", "api_token",
})
#: Option names that hold a credential though no qualifier says so (``--key X``).
_SECRET_OPTIONS = frozenset({"key", "auth", "pass", "pwd", "apikey", "bearer", "jwt",
                             "secret", "password", "passwd", "token", "cookie", "cookies"})

#: A name's last word that says it holds a secret; "key" only after a qualifier.
_SECRET_WORDS = frozenset({"token", "secret", "password", "passwd", "pwd", "apikey",
                           "credential", "credentials", "pat", "signature", "sig", "cookie",
                           "cookies"})
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "auth", "client", "secret",
                             "signing", "encryption", "session", "subscription", "master"})
_CAMEL = _Lazy(r"(?<=[a-z0-9])(?=[A-Z])")
_ASSIGNMENT = _Lazy(r"^([A-Za-z_][A-Za-z0-9_.\-]*)=(.+)$", re.S)
_URL = _Lazy(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
_AUTH_HEADER = _Lazy(r"(?i)^\s*(?:proxy-)?authorization\s*:\s*\S")
#: ``Name: value``: a header written as one argument (curl's ``-H``, mcp-remote's --header).
_HEADER = _Lazy(r"^\s*([A-Za-z0-9_-]{1,64})\s*:\s*(\S.*)$", re.S)
#: Words of a header name that say it carries a credential (``X-Api-Key``, ``X-Auth-Token``).
_HEADER_WORDS = frozenset({"key", "apikey", "token", "secret", "auth", "authorization",
                           "cookie", "password", "passwd", "pwd", "credential", "credentials",
                           "session", "signature", "jwt", "bearer"})
#: A value that only names a variable (``${API_KEY}``, ``$API_KEY``, ``Bearer ${T}``).
_PLACEHOLDER = _Lazy(r"(?i)^(?:bearer\s+|basic\s+)?\$\{?[A-Za-z_][A-Za-z0-9_:]*\}?\s*$")
#: A connection string's password among other pairs (libpq, ODBC): ``host=h password=V``.
_DSN_PASSWORD = _Lazy(r"(?i)(?:^|[\s;])(?:password|passwd|pwd)\s*=\s*[^\s;'\"]")
#: Programs whose ``-p`` names a package, a Python or a profile, never a password.
_P_IS_NOT_A_PASSWORD = frozenset({"npx", "npm", "pnpm", "pnpx", "bunx", "bun", "yarn", "uvx",
                                  "uv", "pipx", "docker", "podman", "ssh", "scp", "deno"})
#: Programs whose attached ``-pVALUE`` is a password.
_MYSQL_FAMILY = frozenset({"mysql", "mysqldump", "mysqladmin", "mariadb", "mariadb-dump",
                           "mysqlsh"})
#: ``-p`` values that are not passwords: ports and port maps, versions, paths, packages.
_P_VALUE_BENIGN = _Lazy(r"^(?:[0-9.:\-/]+|[.~/].*|.*[/@].*|[0-9].*)$")
#: Percent-decoding rounds: a doubly encoded key (``api%255Fkey``) is still a key.
_DECODE_ROUNDS = 3


@dataclass(frozen=True)
class Finding:
    """Where a credential was found and what it looks like; never its value."""

    where: str  # "argument 3 (--api-key)", "the url"
    what: str  # "is followed by a credential", "carries a password (user:password@)"
    position: int | None = None  # 0: the command, 1…: its arguments

    def __str__(self) -> str:
        return f"{self.where} {self.what}"


def _decoded(name: str) -> str:
    for _ in range(_DECODE_ROUNDS):
        unquoted = unquote(name.replace("+", " "))
        if unquoted == name:
            break
        name = unquoted
    return name


def _words(name: str) -> Iterator[list[str]]:
    """The name's words, split at ``-_. `` and, separately, also at camelCase humps."""
    plain = name.lstrip("-")
    yield [w for w in re.split(r"[-_. ]+", plain.lower()) if w]
    yield [w for w in re.split(r"[-_. ]+", _CAMEL.compiled.sub("_", plain).lower()) if w]


def names_a_secret(name: str) -> bool:
    """``--api-key``, ``API_TOKEN``, ``client.secret``, ``accessToken``: yes;
    ``--token-file``, ``--tokenizer``, ``TOKENIZERS_PARALLELISM``, ``SORT_KEY``: no."""
    for words in _words(name):
        if not words:
            continue
        if words[-1] in _SECRET_WORDS:
            return True
        if words[-1] == "key" and len(words) > 1 and words[-2] in _KEY_QUALIFIERS:
            return True
    return False


def is_credential_key(name: str) -> bool:
    """A URL key that carries a credential: in :data:`CREDENTIAL_QUERY_KEYS` once decoded
    and normalized, or a name whose last word says so."""
    decoded = _decoded(name).strip()
    normalized = re.sub(r"[-. ]", "_", decoded.lower())
    return normalized in CREDENTIAL_QUERY_KEYS or names_a_secret(decoded)


def _pairs(text: str, separators: str) -> Iterator[str]:
    for piece in re.split(f"[{separators}]", text):
        key, eq, _ = piece.partition("=")
        if eq and key:
            yield key


def url_credential(url: str, *, allow_user: bool = False) -> str | None:
    """What in ``url`` carries a credential (``"user information"``, ``"query key
    'token'"``, …), or None. ``allow_user``: a user name alone (no password) is fine,
    as in a command-line URL such as ``https://git@host/``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return None  # not a URL we can read; the caller's own validation says what is wrong
    if password:
        return "carries a password (user:password@)"
    if "@" in parts.netloc and not allow_user:
        return "carries user information (user@)"
    places = (
        ("query key", _pairs(parts.query, "&;")),
        ("matrix parameter",
         (key for segment in parts.path.split("/") for key in _pairs(
             segment.partition(";")[2], ";,"))),
        ("fragment key", _pairs(parts.fragment, "&;?/#")),
    )
    for label, keys in places:
        for key in keys:
            if is_credential_key(key):
                return f"carries a credential in its {label} '{_decoded(key)[:64]}'"
    for label, text in (("path", parts.path), ("query", parts.query),
                        ("fragment", parts.fragment)):
        shape = _token_shape(_decoded(text))
        if shape is not None:
            return f"carries a {shape} in its {label}"
    return None


def _token_shape(text: str) -> str | None:
    for name, pattern in _compiled_tokens():
        if pattern.search(text):
            return name
    return None


def argument_credential(command: str | None, args: Sequence[str]) -> Finding | None:
    """The first literal credential in a stdio server's command and arguments, or None.

    Positions: the command is 0 ("the command"), arguments count from 1.
    """
    argv = [command, *args] if command else list(args)
    for index, arg in enumerate(argv):
        number = index if command else index + 1
        where = "the command" if command and index == 0 else f"argument {number}"
        following = argv[index + 1] if index + 1 < len(argv) else None
        found = (_one_argument(arg, following)
                 or _short_password(argv[:index], arg, following))
        if found is not None:
            label, what = found
            return Finding(f"{where}{label}", what, number)
    return None


def _program(word: str) -> str:
    return word.rsplit("/", 1)[-1].lower()


def _short_password(before: Sequence[str], arg: str,
                    following: str | None) -> tuple[str, str] | None:
    """``-p PASSWORD`` (and the MySQL family's ``-pPASSWORD``), judged by the program that
    takes it: the nearest word before it that is not an option."""
    if not arg.startswith("-p") or arg.startswith("--"):
        return None
    program = next((_program(w) for w in reversed(before) if not w.startswith("-")), "")
    if program in _P_IS_NOT_A_PASSWORD:
        return None
    if arg == "-p":
        if following and not following.startswith("-") and not _P_VALUE_BENIGN.compiled.match(
                following) and "=" not in following:
            return " (-p)", "is followed by a password"
        return None
    if program in _MYSQL_FAMILY and len(arg) > 2 and "=" not in arg:
        return " (-p…)", "passes a password"
    return None


def names_a_credential_header(name: str) -> bool:
    """``Authorization``, ``Cookie``, ``X-Api-Key``, ``X-Auth-Token``: yes;
    ``Content-Type``, ``Accept``: no."""
    lowered = name.lower()
    if lowered in ("authorization", "proxy-authorization", "cookie", "set-cookie"):
        return True
    words = {w for w in re.split(r"[-_]+", _CAMEL.compiled.sub("_", name).lower()) if w}
    return bool(words & _HEADER_WORDS)


def _header_credential(text: str) -> tuple[str, str] | None:
    header = _HEADER.compiled.match(text)
    if header is None or header.group(1).lower() in ("http", "https"):
        return None
    name, value = header.group(1), header.group(2).strip()
    if not names_a_credential_header(name) or _PLACEHOLDER.compiled.match(value):
        return None
    if name.lower() in ("authorization", "proxy-authorization"):
        return "", "is an Authorization header with its value"
    return f" ({name[:64]}: …)", "is a credential header with its value"


def _one_argument(arg: str, following: str | None) -> tuple[str, str] | None:
    option, eq, value = arg.partition("=")
    if option.startswith("-") and not option.lower().startswith("--no-") and (
            names_a_secret(option) or option.lstrip("-").lower() in _SECRET_OPTIONS):
        if eq and value:
            return f" ({option}=…)", "passes a credential"
        if not eq and following and not following.startswith("-"):
            return f" ({option})", "is followed by a credential"
    # KEY=value, alone (env-style) or as an option's value (--env=KEY=value).
    assignment = _ASSIGNMENT.compiled.match(value if option.startswith("-") and eq else arg)
    if assignment and names_a_secret(assignment.group(1)):
        return f" ({assignment.group(1)}=…)", "assigns a credential"
    auth_header = _AUTH_HEADER.compiled
    if auth_header.match(arg) or (option.startswith("-") and eq and auth_header.match(value)):
        return "", "is an Authorization header with its value"
    header = _header_credential(arg) or (
        _header_credential(value) if option.startswith("-") and eq else None)
    if header is not None:
        return header
    if _DSN_PASSWORD.compiled.search(arg) and not _URL.compiled.match(arg):
        return "", "carries a password (password=… in a connection string)"
    for url in _URL.compiled.findall(arg):
        found = url_credential(url, allow_user=True)
        if found is not None:
            return "", found
    for name, pattern in _compiled_tokens():
        if pattern.search(arg):
            return "", f"looks like a {name}"
    return None
