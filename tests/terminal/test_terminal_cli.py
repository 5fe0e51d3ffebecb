"""The real ``deepseek-eyes terminal`` command: stdio serving with the SDK client, the
HTTP token gate, planning without running, and receipt verification (with the chain's
signed head, pinned heads, strict parsing and key checks; those run the same ``main`` in
process, which is much faster than a subprocess per call)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from deepseek_eyes.cli import main
from deepseek_eyes.terminal.config import ENV_TOKEN
from deepseek_eyes.terminal.receipts.chain import HEAD_FILENAME, ReceiptLog, sign_receipt
from deepseek_eyes.terminal.receipts.keyring import Keyring
from terminal.support import receipt_body

pytestmark = pytest.mark.anyio

EXE = str(Path(sys.executable).with_name("deepseek-eyes"))


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own command
        [EXE, *args], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
    )


async def test_stdio_server_with_the_sdk_client(workspace: Path) -> None:
    params = StdioServerParameters(
        command=EXE,
        args=["terminal", "serve", "--stdio", "--workspace", str(workspace),
              "--mode", "read-only"],
        env={**os.environ},
    )
    async with Client(params, mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"terminal_plan", "terminal_execute", "terminal_receipt_share"} <= names
        plan = await client.call_tool("terminal_plan", {"argv": ["cat", "a.txt"]})
        content = plan.structured_content
        assert content is not None
        receipt = await client.call_tool(
            "terminal_execute", {"session_id": content["session_id"],
                                 "plan_id": content["plan_id"]})
        assert receipt.structured_content is not None
        assert receipt.structured_content["stdout"]["text"] == "alpha\n"
        write = await client.call_tool("terminal_plan", {"argv": ["touch", "x"]})
        assert write.structured_content is not None
        assert write.structured_content["state"] == "refused"
        # stdio is one connection: plans without session_id share its default session
        assert write.structured_content["session_id"] == content["session_id"]
    log = Path(os.environ["DEEPSEEK_EYES_HOME"]) / "terminal" / "receipts" / "receipts.jsonl"
    lines = log.read_text().splitlines()
    assert len(lines) == 1
    verified = _run("terminal", "receipts", "verify", "--chain", str(log))
    assert verified.returncode == 0, verified.stderr
    assert "chain intact" in verified.stdout
    tampered = json.loads(lines[0])
    tampered["exit_code"] = 1
    bad = log.with_name("tampered.json")
    bad.write_text(json.dumps(tampered))
    refused = _run("terminal", "receipts", "verify", str(bad))
    assert refused.returncode == 1
    assert "TERMINAL_RECEIPT_INVALID" in refused.stderr
    head = log.with_name(HEAD_FILENAME)
    assert head.stat().st_mode & 0o777 == 0o600
    assert log.stat().st_mode & 0o777 == 0o600
    with_head = _run("terminal", "receipts", "verify", "--head", str(head), str(log))
    assert with_head.returncode == 0, with_head.stderr
    assert "ends at its signed head" in with_head.stdout
    cut = log.with_name("cut.jsonl")
    cut.write_text("")
    refused = _run("terminal", "receipts", "verify", "--head", str(head), str(cut))
    assert refused.returncode == 1
    assert "TERMINAL_RECEIPT_CHAIN_BROKEN" in refused.stderr


def test_http_refuses_to_start_without_a_strong_token(workspace: Path) -> None:
    args = ("terminal", "serve", "--http", "--port", "0", "--workspace", str(workspace))
    missing = _run(*args)
    assert missing.returncode == 1
    assert "TERMINAL_TOKEN_MISSING" in missing.stderr
    weak = _run(*args, env={ENV_TOKEN: "password123"})
    assert weak.returncode == 1
    assert "TERMINAL_TOKEN_WEAK" in weak.stderr
    assert "password123" not in weak.stderr


def test_plan_prints_the_decision_without_running(workspace: Path) -> None:
    done = _run("terminal", "plan", "--workspace", str(workspace), "--mode", "read-only",
                "--json", "--", "touch", "made.txt")
    assert done.returncode == 1
    plan = json.loads(done.stdout)
    assert plan["decision"]["allowed"] is False
    assert "write" in plan["decision"]["effects"]
    assert not (workspace / "made.txt").exists()
    ok = _run("terminal", "plan", "--workspace", str(workspace), "--command", "cat a.txt")
    assert ok.returncode == 0
    assert ok.stdout.startswith("allowed")


def test_keys_rotate_and_list() -> None:
    first = _run("terminal", "keys", "list")
    assert first.returncode == 0
    rotated = _run("terminal", "keys", "rotate")
    new_id = rotated.stdout.strip()
    listed = _run("terminal", "keys", "list").stdout.splitlines()
    assert listed[0] == f"{new_id}  (signs)"
    assert len(listed) == 2
    token = _run("terminal", "token").stdout.strip()
    assert len(token) >= 43


def test_serve_json_describes_the_server(workspace: Path) -> None:
    args = ["terminal", "serve", "--workspace", str(workspace), "--mode", "read-only", "--json"]
    process = subprocess.Popen(  # noqa: S603 - our own command
        [EXE, *args, "--http", "--port", "0"], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, ENV_TOKEN: secrets.token_urlsafe(32)},
    )
    try:
        assert process.stdout is not None
        described = json.loads(process.stdout.readline())
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    where = described.pop("listening")
    assert described == {"transport": "http", "mode": "read-only",
                          "workspaces": [str(workspace.resolve())],
                          "sandbox": described["sandbox"], "approvals": "person"}
    assert described["sandbox"] in ("bwrap", None)
    assert where["port"] > 0
    assert where["url"] == f"http://127.0.0.1:{where['port']}/mcp"
    assert where["console"] == f"http://127.0.0.1:{where['port']}/console/"
    assert where["console_login"].startswith(where["console"] + "#login=")
    assert "terminal:" not in err  # the text banner is replaced by the object
    # stdio: standard output is the protocol, so the object goes to standard error.
    stdio = _run(*args, "--stdio")
    assert stdio.returncode == 0, stdio.stderr
    assert stdio.stdout == ""
    first = json.loads(stdio.stderr.splitlines()[0])
    assert first["transport"] == "stdio"
    assert "listening" not in first


def test_keys_and_token_speak_json(cli: Cli) -> None:
    code, out, _ = cli("terminal", "keys", "list", "--json")
    assert code == 0
    (first,) = json.loads(out)["keys"]
    assert first["signs"] is True
    code, out, _ = cli("terminal", "keys", "rotate", "--json")
    rotated = json.loads(out)
    assert rotated["keys"] == [{"id": rotated["rotated"], "signs": True},
                               {"id": first["id"], "signs": False}]
    code, out, _ = cli("terminal", "keys", "list", "--json")
    assert json.loads(out) == {"keys": rotated["keys"]}
    code, out, _ = cli("terminal", "token", "--json")
    assert code == 0
    assert len(json.loads(out)["token"]) >= 43


# -- receipts with the signed head, in process ----------------------------------------------


class Cli:
    """``deepseek-eyes ARGS…`` through the real ``main``, in this process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
        self.monkeypatch = monkeypatch
        self.capsys = capsys

    def __call__(self, *args: str | Path) -> tuple[int, str, str]:
        self.capsys.readouterr()
        self.monkeypatch.setattr(sys, "argv", ["deepseek-eyes", *map(str, args)])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(monkeypatch, capsys)


def _terminal_dir() -> Path:
    return Path(os.environ["DEEPSEEK_EYES_HOME"]) / "terminal"


def _append(n: int, **fields: Any) -> list[dict[str, Any]]:
    """Append ``n`` receipts to the data directory's log, signed with its keyring."""
    log = ReceiptLog(_terminal_dir() / "receipts", Keyring.load_or_create(_terminal_dir()))
    try:
        return [log.append(receipt_body() | fields) for _ in range(n)]
    finally:
        log.close()




def _lines(receipts: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in receipts)


def test_verify_with_the_head_catches_cuts_at_either_end(cli: Cli, tmp_path: Path) -> None:
    receipts = _append(3)
    log = _terminal_dir() / "receipts" / ReceiptLog.FILENAME
    head = log.with_name(HEAD_FILENAME)
    code, out, err = cli("terminal", "receipts", "verify", "--chain", "--head", head, log)
    assert code == 0, err
    assert "chain intact from sequence 1 to 3, ends at its signed head" in out
    code, out, _ = cli("terminal", "receipts", "verify", "--chain", log)
    assert code == 0
    assert "its end is not checked without --head" in out
    tail_cut = tmp_path / "tail.jsonl"
    tail_cut.write_text(_lines(receipts[:2]))
    code, out, err = cli("terminal", "receipts", "verify", "--chain", tail_cut)
    assert code == 0  # a shorter chain is a chain: only the head can tell
    code, out, err = cli("terminal", "receipts", "verify", "--chain", "--head", head, tail_cut)
    assert code == 1
    assert "TERMINAL_RECEIPT_CHAIN_BROKEN" in err
    assert "cut from the end" in err
    start_cut = tmp_path / "start.jsonl"
    start_cut.write_text(_lines(receipts[1:]))
    for args in (("--chain",), ("--head", head)):  # --head implies --chain
        code, out, err = cli("terminal", "receipts", "verify", *args, start_cut)
        assert code == 1
        assert "TERMINAL_RECEIPT_CHAIN_BROKEN" in err
        assert "cut from the start" in err
    data = bytearray(head.read_bytes())
    at = data.index(b'"sequence":') + len(b'"sequence":')
    data[at : at + 1] = b"2" if data[at : at + 1] != b"2" else b"1"
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(bytes(data))
    code, out, err = cli("terminal", "receipts", "verify", "--head", forged, log)
    assert code == 1
    assert "TERMINAL_RECEIPT_INVALID" in err


def test_an_exported_head_pins_what_came_before_it(cli: Cli, tmp_path: Path) -> None:
    receipts = _append(3)
    pin = tmp_path / "pin.jsonl"
    code, out, err = cli("terminal", "receipts", "head", "--output", pin)
    assert code == 0, err
    assert "head 3" in err
    assert "chain intact" in err
    code, out, _ = cli("terminal", "receipts", "head")
    assert out.encode() == pin.read_bytes()
    receipts += _append(2)
    log = _terminal_dir() / "receipts" / ReceiptLog.FILENAME
    head = log.with_name(HEAD_FILENAME)
    code, out, err = cli("terminal", "receipts", "verify", "--pinned", pin, "--head", head, log)
    assert code == 0, err
    assert "pinned head 3 present" in out
    # the pin is older than the log: as --head (exact) it is refused
    code, out, err = cli("terminal", "receipts", "verify", "--head", pin, log)
    assert code == 1
    assert "goes on past its signed head" in err
    # the log cut back past the pin (and no head given, or one put back to match): caught
    cut = tmp_path / "cut.jsonl"
    cut.write_text(_lines(receipts[:2]))
    code, out, err = cli("terminal", "receipts", "verify", "--pinned", pin, cut)
    assert code == 1
    assert "TERMINAL_RECEIPT_CHAIN_BROKEN" in err
    # exporting refuses a head the log does not support
    log.write_text(_lines(receipts[:2]))
    code, out, err = cli("terminal", "receipts", "head")
    assert code == 1
    assert "TERMINAL_RECEIPT_CHAIN_BROKEN" in err


def test_head_and_verify_speak_json(cli: Cli, tmp_path: Path) -> None:
    _append(2)
    code, out, err = cli("terminal", "receipts", "head", "--json")
    assert code == 0, err
    assert err == ""
    exported = json.loads(out)
    assert exported["head"]["sequence"] == 2
    assert exported["output"] is None
    pin = tmp_path / "pin.jsonl"
    pin.write_text(exported["file"])  # the head file itself, as `jq -j .file` writes it
    code, out, err = cli("terminal", "receipts", "head", "--json", "--output",
                         tmp_path / "copy.jsonl")
    assert code == 0, err
    assert json.loads(out)["output"] == str(tmp_path / "copy.jsonl")
    assert json.loads(out)["file"] is None
    assert (tmp_path / "copy.jsonl").read_bytes() == pin.read_bytes()
    _append(1)
    log = _terminal_dir() / "receipts" / ReceiptLog.FILENAME
    code, out, err = cli("terminal", "receipts", "verify", "--json", "--pinned", pin,
                         "--head", log.with_name(HEAD_FILENAME), log)
    assert code == 0, err
    verified = json.loads(out)
    assert verified == {
        "valid": True, "file": str(log), "receipts": 3, "share_exports": 0, "chain": True,
        "head": {"sequence": 3, "written_at": verified["head"]["written_at"]}, "pinned": [2],
    }
    code, out, _ = cli("terminal", "receipts", "verify", "--json", log)
    assert json.loads(out)["chain"] is False
    assert json.loads(out)["head"] is None


def test_verify_refuses_a_duplicate_key_that_used_to_verify(cli: Cli, tmp_path: Path) -> None:
    (receipt,) = _append(1)
    text = json.dumps(receipt, separators=(",", ":"))
    smuggled = tmp_path / "dup.json"
    smuggled.write_text(text.replace('"exit_code":0', '"exit_code":1,"exit_code":0', 1))
    code, out, err = cli("terminal", "receipts", "verify", smuggled)
    assert code == 1
    assert "TERMINAL_RECEIPT_INVALID" in err
    assert "'exit_code' appears twice" in err
    nan = tmp_path / "nan.json"
    nan.write_text(text.replace('"duration_ms":1.0', '"duration_ms":NaN', 1))
    code, out, err = cli("terminal", "receipts", "verify", nan)
    assert code == 1
    assert "TERMINAL_RECEIPT_INVALID" in err
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = cli("terminal", "receipts", "verify", nested)
    assert code == 1
    assert "TERMINAL_RECEIPT_INVALID" in err
    odd = _append(1, stdout={"text": "x\u2028y\u0085z"})
    log = _terminal_dir() / "receipts" / ReceiptLog.FILENAME
    assert "\u2028" in log.read_text(encoding="utf-8")
    code, out, err = cli("terminal", "receipts", "verify", "--chain", log)
    assert code == 0, err  # JSON lines are split at newlines only, not at U+2028 or U+0085
    assert "2 valid" in out
    assert odd[0]["sequence"] == 2


def test_keys_rotation_keeps_the_chain_and_its_head_verifying(cli: Cli, tmp_path: Path) -> None:
    before = _append(2)
    code, rotated, _ = cli("terminal", "keys", "rotate")
    assert code == 0
    after = _append(2)
    assert {r["signature"]["key_id"] for r in after} == {rotated.strip()}
    assert before[0]["signature"]["key_id"] != rotated.strip()
    log = _terminal_dir() / "receipts" / ReceiptLog.FILENAME
    code, out, err = cli("terminal", "receipts", "verify", "--head",
                         log.with_name(HEAD_FILENAME), log)
    assert code == 0, err
    assert "1 to 4" in out
    attacker = Keyring([b"a" * 32])
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(sign_receipt(dict(after[1], exit_code=7), attacker)))
    code, out, err = cli("terminal", "receipts", "verify", edited)
    assert code == 1
    assert "TERMINAL_RECEIPT_KEY_UNKNOWN" in err


def test_an_exposed_keyring_is_refused(cli: Cli) -> None:
    code, _, _ = cli("terminal", "keys", "list")
    assert code == 0
    path = _terminal_dir() / "keyring.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert _terminal_dir().stat().st_mode & 0o777 == 0o700
    path.chmod(0o644)
    code, _, err = cli("terminal", "keys", "list")
    assert code == 1
    assert "TERMINAL_KEYRING_EXPOSED" in err
    assert f"chmod 600 {path}" in err
