"""HAProxy's errorfiles (gateway/balancer.py): each is a whole HTTP response that a client
reads as the gateway's own error, and docs/deployment.md quotes what the code writes.
Through a real HAProxy and the ``openai`` client: tests/scale/test_replicas.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eyes.errors import ERROR_CODES, GatewayError
from deepseek_eyes.gateway.app import error_status
from deepseek_eyes.gateway.balancer import (
    BALANCER_ERRORS,
    haproxy_errorfile,
    main,
    write_haproxy_errorfiles,
)

DEPLOYMENT = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"


def _parse(response: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    status, *lines = head.decode("ascii").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, headers, body


@pytest.mark.parametrize("status", [502, 503, 504])
def test_each_errorfile_is_a_whole_response_in_the_gateways_shape(status: int) -> None:
    line, headers, body = _parse(haproxy_errorfile(status))
    assert line == f"HTTP/1.1 {status} {BALANCER_ERRORS[status][0]}"
    assert int(headers["content-length"]) == len(body)
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert headers["x-content-type-options"] == "nosniff"
    assert ("retry-after" in headers) == (status != 504)
    code = BALANCER_ERRORS[status][1]
    assert code in ERROR_CODES
    assert error_status(GatewayError("x", code=code)) == status
    assert json.loads(body) == {"error": {"message": BALANCER_ERRORS[status][2],
                                          "type": "upstream_error", "param": None,
                                          "code": code}}
    assert len(haproxy_errorfile(status)) < 16384  # HAProxy's buffer (tune.bufsize)


def test_the_files_are_written_where_haproxy_reads_them(tmp_path: Path) -> None:
    written = write_haproxy_errorfiles(tmp_path / "errors")
    assert sorted(written) == [502, 503, 504]
    for status, path in written.items():
        assert path == tmp_path / "errors" / f"deepseek-eyes-{status}.http"
        assert path.read_bytes() == haproxy_errorfile(status)


def test_the_module_writes_them_for_an_operator_and_prints_the_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"errorfile {status} {tmp_path.resolve()}/deepseek-eyes-{status}.http"
                     for status in (502, 503, 504)]
    assert main([]) == 2


def test_the_deployment_guide_quotes_what_the_code_writes() -> None:
    text = DEPLOYMENT.read_text(encoding="utf-8")
    for status in BALANCER_ERRORS:
        _, _, body = _parse(haproxy_errorfile(status))
        assert body.decode().strip() in text, status
        assert f"errorfile {status} /etc/haproxy/errors/deepseek-eyes-{status}.http" in text
