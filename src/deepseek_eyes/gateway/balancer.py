"""What the load balancer answers in the gateway's name: HAProxy's own errors in our shape.

Behind HAProxy (docs/deployment.md, "Replicas behind a load balancer") some answers never
come from a replica: no replica is ready (503), a replica did not answer within ``timeout
server`` (504), a replica's answer was broken and no retry was left (502). HAProxy's
built-in pages for these are HTML, which an OpenAI client cannot read: it gets an
``APIStatusError`` with no code, and the person sees a page of markup. HAProxy's
``errorfile`` directive answers with a whole HTTP response read from a file instead, so
the gateway ships those responses (:func:`haproxy_errorfiles`): OpenAI's error shape with
a stable code of ours (``GATEWAY_NO_REPLICA``, ``GATEWAY_REPLICA_TIMEOUT``,
``GATEWAY_REPLICA_FAILED``), the security headers every answer of the gateway carries, and
``Retry-After`` where resending soon is the fix. ``python -m deepseek_eyes.gateway.balancer
DIR`` writes them for an operator and prints the ``errorfile`` lines.

Decisions a newcomer would otherwise undo:

* **The bytes come from the gateway's own error code path** (``error_body``, the security
  headers), not from text kept beside the docs, so a change of the error shape changes
  the files too; the docs quote them and a test checks the quote.
* **``Connection: close``.** HAProxy sends an errorfile as it is; closing after it keeps a
  client's next request from waiting on a connection HAProxy is about to close anyway.
* **Only statuses HAProxy produces itself are here.** A replica's own 503
  (``GATEWAY_SHUTTING_DOWN``, ``STORE_DATABASE_UNAVAILABLE``) already has our shape and
  passes through untouched; ``errorfile`` never rewrites what a server sent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deepseek_eyes.errors import GatewayError
from deepseek_eyes.gateway.app import error_body
from deepseek_eyes.serving.security import SECURITY_HEADERS

__all__ = ["BALANCER_ERRORS", "haproxy_errorfile", "haproxy_errorfiles", "main",
           "write_haproxy_errorfiles"]

#: HAProxy's own statuses, each with its reason phrase, our code and what to tell the client.
BALANCER_ERRORS: dict[int, tuple[str, str, str]] = {
    502: ("Bad Gateway", "GATEWAY_REPLICA_FAILED",
          "a gateway replica closed the connection or sent a broken answer, and the load "
          "balancer had no retry left; send the request again (a conversation continues "
          "on any replica)"),
    503: ("Service Unavailable", "GATEWAY_NO_REPLICA",
          "no gateway replica is ready to take the request; send it again shortly"),
    504: ("Gateway Timeout", "GATEWAY_REPLICA_TIMEOUT",
          "the gateway replica did not answer within the load balancer's timeout; the "
          "turn may have run: send the same history again to continue the session"),
}
#: Seconds a client should wait before resending, where resending soon is the fix.
_RETRY_AFTER = {502: "1", 503: "1"}


def haproxy_errorfile(status: int) -> bytes:
    """The whole HTTP/1.1 response HAProxy sends for its own ``status`` (502, 503, 504).

    Raises:
        KeyError: for a status HAProxy is not given a file for here.
    """
    reason, code, message = BALANCER_ERRORS[status]
    body = json.dumps(error_body(GatewayError(message, code=code)),
                      separators=(",", ":")).encode() + b"\n"
    headers = [(b"content-type", b"application/json")]
    if status in _RETRY_AFTER:
        headers.append((b"retry-after", _RETRY_AFTER[status].encode()))
    headers += [*SECURITY_HEADERS, (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")]
    head = f"HTTP/1.1 {status} {reason}\r\n".encode() + b"".join(
        name + b": " + value + b"\r\n" for name, value in headers)
    return head + b"\r\n" + body


def haproxy_errorfiles() -> dict[int, bytes]:
    """Every errorfile, by status."""
    return {status: haproxy_errorfile(status) for status in sorted(BALANCER_ERRORS)}


def write_haproxy_errorfiles(directory: Path) -> dict[int, Path]:
    """Write ``deepseek-eyes-<status>.http`` for each status into ``directory`` (made if
    missing); return where each went, for the ``errorfile <status> <path>`` lines of
    HAProxy's ``defaults``."""
    directory.mkdir(parents=True, exist_ok=True)
    written: dict[int, Path] = {}
    for status, response in haproxy_errorfiles().items():
        path = directory / f"deepseek-eyes-{status}.http"
        path.write_bytes(response)
        written[status] = path
    return written


def main(argv: list[str]) -> int:
    """``python -m deepseek_eyes.gateway.balancer DIR``: write the errorfiles into DIR and
    print HAProxy's ``errorfile`` lines for them."""
    if len(argv) != 1:
        print("usage: python -m deepseek_eyes.gateway.balancer DIRECTORY", file=sys.stderr)
        return 2
    for status, path in write_haproxy_errorfiles(Path(argv[0])).items():
        print(f"errorfile {status} {path.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
