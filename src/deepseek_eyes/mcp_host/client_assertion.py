"""``private_key_jwt`` client authentication (RFC 7523 section 2.2): the signed assertion.

The SDK's ``PrivateKeyJWTOAuthProvider`` runs the client_credentials grant and asks an
*assertion provider* for a JWT whose audience is the authorization server's issuer; this
module is that provider. We sign with PyJWT (the SDK's own dependency for this) rather than
the SDK's ``SignedJWTParameters`` because that one cannot set a ``kid`` header, which an
authorization server holding several keys for a client uses to pick the one to verify with.

The key is read and parsed once, when the connection's provider is built, so a missing,
world-readable or malformed key fails there with ``MCP_CLIENT_KEY_INVALID`` (naming the file
or variable, never the key) instead of as an opaque error inside the token request. Each
assertion lives 5 minutes and carries a fresh ``jti``, so a server can refuse a replay.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from deepseek_eyes.errors import McpError
from deepseek_eyes.settings import McpOAuthSettings

__all__ = ["ASSERTION_LIFETIME_S", "assertion_provider"]

#: How long an assertion is valid (the SDK's default too); one is minted per token request.
ASSERTION_LIFETIME_S = 300
#: A PEM private key is a few KiB at most (RSA 8192 is under 7); a bigger file is not one.
_MAX_KEY_BYTES = 64 * 1024


def _key_error(message: str, where: dict[str, str]) -> McpError:
    return McpError(message, code="MCP_CLIENT_KEY_INVALID", details=where)


def _read_key_file(path: Path) -> bytes:
    where = {"private_key_file": str(path)}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _key_error(f"the private key file {path} cannot be opened "
                         f"({exc.strerror or exc})", where) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _key_error(f"the private key file {path} is not a regular file", where)
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise _key_error(
                f"the private key file {path} may be read by others (mode "
                f"{stat.S_IMODE(info.st_mode):o}); run `chmod 600 {path}`", where)
        data = handle.read(_MAX_KEY_BYTES + 1)
    if len(data) > _MAX_KEY_BYTES:
        raise _key_error(f"the private key file {path} is larger than a PEM key", where)
    return data


SigningKey = (rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
              | ed448.Ed448PrivateKey)


def _fitting_key(key: Any, algorithm: str) -> SigningKey | None:
    """The key, when it is of the family ``algorithm`` signs with."""
    if algorithm.startswith(("RS", "PS")):
        return key if isinstance(key, rsa.RSAPrivateKey) else None
    if algorithm.startswith("ES"):
        return key if isinstance(key, ec.EllipticCurvePrivateKey) else None
    return key if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey) else None


def assertion_provider(oauth: McpOAuthSettings) -> Callable[[str], Awaitable[str]]:
    """The signer of one server's client assertions (``iss`` = ``sub`` = the client id).

    Raises:
        ConfigError: ``CONFIG_ENV_MISSING`` when a reference names an unset variable.
        McpError: ``MCP_CLIENT_KEY_INVALID`` when the key cannot be read, may be read by
            others, is not a PEM private key, or does not fit ``signing_algorithm``.
    """
    client_id = oauth.client_id.resolve()
    if oauth.private_key is not None:
        where = {"private_key": oauth.private_key.env}
        pem = oauth.private_key.resolve().encode()
    elif oauth.private_key_file is not None:
        where = {"private_key_file": str(oauth.private_key_file)}
        pem = _read_key_file(oauth.private_key_file)
    else:  # pragma: no cover - the settings refuse private_key_jwt without a key
        raise _key_error("private_key_jwt needs a private key", {})
    named = where.get("private_key_file") or f"in ${where.get('private_key')}"
    try:
        loaded = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        # TypeError: an encrypted key (no passphrase is configured); ValueError: not a key.
        raise _key_error(f"the private key {named} is not an unencrypted PEM private key "
                         f"({type(exc).__name__})", where) from None
    algorithm = oauth.signing_algorithm
    key = _fitting_key(loaded, algorithm)
    if key is None:
        raise _key_error(f"the private key {named} cannot sign {algorithm} "
                         f"(a {type(loaded).__name__.removeprefix('_')})", where)
    headers = {"kid": oauth.key_id} if oauth.key_id else None

    async def sign(audience: str) -> str:
        now = int(time.time())
        claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now,
                  "exp": now + ASSERTION_LIFETIME_S, "jti": str(uuid.uuid4())}
        return jwt.encode(claims, key, algorithm=algorithm, headers=headers)

    return sign
