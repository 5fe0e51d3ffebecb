"""The token store of the authorization-code grant: one file per server URL, mode 0600.

``deepseek-eyes mcp login`` writes what a sign-in earned (the tokens, and the client a
dynamic registration created) and every connection afterwards reads and refreshes it, so the
store must outlive the process, unlike client_credentials' memory-only tokens. Decisions a
newcomer would otherwise undo:

* **Keyed by the server's URL, not its id.** Tokens are issued for a resource (RFC 8707); a
  renamed entry keeps its sign-in, a changed URL needs a new one. The file also records the
  URL and a read refuses a file for another one.
* **Written whole, atomically.** A temporary file created 0600 in the same directory (never
  widened by the umask, never briefly world-readable), fsynced, then renamed over the old
  one; the directory is 0700. A refresh that races a login loses nothing half-written.
* **A pre-registered client's secret is never written.** It stays a ``{ env = "NAME" }``
  reference in the settings; the store holds only what the authorization server issued.

Encryption with a key from the OS keyring is not done: the file's mode is the protection.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:  # the SDK's models load with the first token read (issue 41: a gateway
    # with no MCP server never loads the SDK)
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["FileTokenStorage", "set_token_root", "token_path", "token_root", "token_store_root"]

#: A token file bigger than this is not ours (a bounded read).
_MAX_BYTES = 256 * 1024


#: The token store's directory, set where the data directory is opened (like the discover
#: timeout, a process setting: the manager builds handles from settings alone). It lives here,
#: not in :mod:`.oauth`, so that opening a data directory does not load the MCP SDK.
_TOKEN_ROOT: list[Path] = []


def set_token_root(root: Path) -> None:
    """Where authorization-code tokens are kept (``token_root(data home)``)."""
    _TOKEN_ROOT[:] = [root]


def token_store_root() -> Path | None:
    """The directory :func:`set_token_root` set, or None in a process that keeps no store."""
    return _TOKEN_ROOT[0] if _TOKEN_ROOT else None


def token_root(data_home: Path) -> Path:
    """Where the token files live under a data directory."""
    return data_home / "mcp" / "oauth"


def token_path(root: Path, url: str) -> Path:
    """The one file for the server at ``url``."""
    return root / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"


class FileTokenStorage:
    """The SDK's 4-method ``TokenStorage`` over one 0600 file, and a health view.

    ``configured`` is a pre-registered client from the settings: it is what
    :meth:`get_client_info` answers, and it is never written.
    """

    def __init__(self, path: Path, url: str,
                 configured: OAuthClientInformationFull | None = None) -> None:
        self.path = path
        self.url = url
        self._configured = configured
        self._record: dict[str, Any] | None = None

    # -- the SDK's protocol ---------------------------------------------------------------
    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        raw = (await self._load()).get("tokens")
        return OAuthToken.model_validate(raw) if raw else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = dict(await self._load())
        record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        record["obtained_at"] = time.time()
        await self._save(record)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self._configured is not None:
            return self._configured
        from mcp.shared.auth import OAuthClientInformationFull

        raw = (await self._load()).get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self._configured is not None:
            return
        record = dict(await self._load())
        record["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._save(record)

    # -- ours -------------------------------------------------------------------------------
    def expires_at(self) -> float | None:
        """When the stored access token expires (epoch seconds), if it says."""
        record = self._record if self._record is not None else self._read()
        tokens, obtained = record.get("tokens") or {}, record.get("obtained_at")
        expires_in = tokens.get("expires_in")
        return float(obtained + expires_in) if expires_in is not None and obtained else None

    def health(self) -> dict[str, Any]:
        """Whether a token is held and when it expires; never the token."""
        record = self._record if self._record is not None else self._read()
        tokens = record.get("tokens")
        if not tokens:
            return {"status": "no-token", "expires_at": None}
        expires_at = self.expires_at()
        if expires_at is not None and expires_at <= time.time():
            status = "refreshable" if tokens.get("refresh_token") else "expired"
        else:
            status = "token"
        return {"status": status, "expires_at": expires_at}

    def take_as_expired(self) -> None:
        """Treat the held access token as expired (in memory): the server refused it, so
        the next provider refreshes it instead of sending it again."""
        if self._record and self._record.get("tokens"):
            self._record = {**self._record, "obtained_at": 1.0}
            tokens = dict(self._record["tokens"])
            tokens["expires_in"] = 0
            self._record["tokens"] = tokens

    async def reload(self) -> None:
        """Read the file again: another process (``mcp login``) may have signed in."""
        self._record = await anyio.to_thread.run_sync(self._read)

    async def forget_tokens(self) -> None:
        """Drop the tokens, keep a registered client (a new sign-in starts here)."""
        record = dict(await self._load())
        if record.pop("tokens", None) is not None:
            record.pop("obtained_at", None)
            await self._save(record)

    def remove(self) -> bool:
        """Forget the sign-in (``mcp logout``); whether there was one."""
        self._record = {}
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    async def _load(self) -> dict[str, Any]:
        if self._record is None:
            self._record = await anyio.to_thread.run_sync(self._read)
        return self._record

    def _read(self) -> dict[str, Any]:
        try:
            with self.path.open("rb") as handle:
                data = handle.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            return {}
        try:
            record = json.loads(data) if len(data) <= _MAX_BYTES else None
        except ValueError:
            record = None
        # Another URL's file (or a damaged one) is no sign-in for this server.
        if not isinstance(record, dict) or record.get("url") != self.url:
            return {}
        return record

    async def _save(self, record: dict[str, Any]) -> None:
        record["url"] = self.url
        self._record = record
        await anyio.to_thread.run_sync(self._write, json.dumps(record).encode())

    def _write(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path.parent, 0o700)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{time.monotonic_ns()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
            raise
