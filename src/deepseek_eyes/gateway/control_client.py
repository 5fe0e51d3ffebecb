"""The client side of the control API (:mod:`.control`): find the gateway that runs for a
settings file and ask it.

A gateway is *running for* a settings file when the data directory's control file names that
file (resolved) and its port answers; a control file whose port does not answer is left from
a gateway that died without cleaning up, and counts as none (the commands then act on the
file alone). ``http.client`` rather than the HTTP stack of :mod:`deepseek_eyes.llm`: one
loopback socket, no proxy, no redirect, and nothing to load for commands that find no
gateway.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepseek_eyes.errors import DeepSeekEyesError, McpError
from deepseek_eyes.gateway.control import read_control

__all__ = ["ControlClient", "running_gateway"]

#: Seconds to wait for an answer (a restart or probe waits on a server's connect timeout).
ANSWER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ControlClient:
    host: str
    port: int
    token: str
    settings: str | None

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                "Host": f"127.0.0.1:{self.port}"}

    def request(self, method: str, path: str, *, ok: tuple[int, ...] = (200,)) -> Any:
        """The answer's JSON.

        Raises:
            DeepSeekEyesError: the gateway's refusal, with its code; ``CONTROL_UNREACHABLE``
                when it stopped answering.
        """
        conn = self._connection(ANSWER_TIMEOUT_S)
        try:
            conn.request(method, path, body=b"{}" if method == "POST" else None,
                         headers=self._headers())
            response = conn.getresponse()
            body = json.loads(response.read() or b"null")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise McpError(f"the running gateway did not answer: {exc}",
                           code="CONTROL_UNREACHABLE") from None
        finally:
            conn.close()
        if response.status not in ok:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            raise DeepSeekEyesError(str(error.get("message", "refused")),
                                    code=str(error.get("code", "CONTROL_UNREACHABLE")),
                                    details=error.get("details") or {})
        return body

    def stream(self, path: str) -> Iterator[dict[str, Any]]:
        """Each line of a line-delimited JSON answer, as it comes, until the gateway ends it."""
        conn = self._connection(None)
        try:
            conn.request("GET", path, headers=self._headers())
            response = conn.getresponse()
            if response.status != 200:
                self.request("GET", path)  # raises with the gateway's refusal
            for line in response:  # bounded by the gateway: one event per change
                if line.strip():
                    yield json.loads(line)
        except (OSError, http.client.HTTPException) as exc:
            raise McpError(f"the running gateway stopped answering: {exc}",
                           code="CONTROL_UNREACHABLE") from None
        finally:
            conn.close()


def running_gateway(home: Path, settings_path: Path | None) -> ControlClient | None:
    """The control client of the gateway running for ``settings_path``, or None."""
    found = read_control(home)
    if found is None:
        return None
    wanted = None if settings_path is None else str(settings_path.resolve())
    if found.get("settings") != wanted:
        return None
    client = ControlClient(str(found.get("host", "127.0.0.1")), int(found.get("port", 0)),
                           str(found.get("token", "")), found.get("settings"))
    try:
        conn = client._connection(2.0)
        conn.connect()
        conn.close()
    except OSError:
        return None  # a gateway that died without removing its file
    return client
