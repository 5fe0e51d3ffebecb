"""The ``deepseek-eyes`` command as a real process: exit codes, output, files."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PIL import Image

from vision.loopback import LoopbackVisionServer

ROOT = Path(__file__).resolve().parents[2]
RECEIPT = ROOT / "examples" / "receipt.png"


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_see_prints_readable_evidence_offline(tmp_path: Path) -> None:
    done = run("see", str(RECEIPT), "--overlay", str(tmp_path / "boxes.png"))
    assert done.returncode == 0, done.stderr
    assert "route    local" in done.stdout
    assert "TOTAL 64.03" in done.stdout
    assert "Traceback" not in done.stderr
    overlay = Image.open(tmp_path / "boxes.png")
    assert overlay.size == (900, 700)
    assert overlay.getpixel((0, 0)) == Image.open(RECEIPT).convert("RGB").getpixel((0, 0))


@pytest.mark.slow
def test_see_json_one_object_per_image_and_refusals_do_not_stop_others(tmp_path: Path) -> None:
    broken = tmp_path / "broken.png"
    broken.write_bytes(RECEIPT.read_bytes()[:500])
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    done = run("see", str(broken), str(RECEIPT), str(empty), "--json")
    assert done.returncode == 1
    objects = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o.get("error", {}).get("code") for o in objects] == [
        "IMAGE_TRUNCATED", None, "IMAGE_EMPTY"
    ]
    good = objects[1]
    assert set(good["image"]) >= {"sha256", "pixel_sha256", "width", "height", "media_type"}
    assert good["image"]["media_type"] == "image/png"
    assert good["route"] == "local"
    assert good["cached"] is False
    assert good["evidence"]["schema"] == "deepseekeyes.evidence.v1"
    assert any(a["phase"] == "probe" and a["outcome"] == "exempt" for a in good["attempts"])
    # Second run: the same image is served from the cache.
    again = run("see", str(RECEIPT), "--json")
    assert json.loads(again.stdout)["cached"] is True


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    done = run("see", str(tmp_path / "nope.png"))
    assert done.returncode == 1
    assert "IMAGE_UNREADABLE" in done.stderr
    assert "Traceback" not in done.stderr


def test_routes_lists_local_and_probe_marks_it_exempt() -> None:
    done = run("routes", "--json", "--probe")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [r["name"] for r in body["routes"]] == ["local"]
    assert body["routes"][0]["probe"] == "exempt"
    assert body["probes"][0]["ok"] is True
    table = run("routes")
    assert table.stdout.splitlines()[0].split() == [
        "ORDER", "NAME", "KIND", "MODEL", "HEALTH", "CIRCUIT", "PROBE"
    ]


def test_routes_probe_against_loopback(tmp_path: Path, loopback: LoopbackVisionServer) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f"""
[vision]
route_priority = ["good", "blind"]
[[vision.routes]]
name = "good"
base_url = "{loopback.url('healthy~cli')}"
model = "vision-1"
[[vision.routes]]
name = "blind"
base_url = "{loopback.url('textonly~cli')}"
model = "text-1"
""",
        encoding="utf-8",
    )
    done = run("--config", str(config), "routes", "--probe", "--json")
    assert done.returncode == 1  # one route failed its probe
    probes = {p["name"]: p for p in json.loads(done.stdout)["probes"]}
    assert probes["good"]["ok"] is True
    assert probes["good"]["correct"] == 9
    assert probes["blind"]["code"] == "VISION_PROBE_FAILED"
    listing = run("--config", str(config), "routes", "--json")
    status = {r["name"]: r for r in json.loads(listing.stdout)["routes"]}
    assert status["good"]["probe"] == "passed"
    assert status["blind"]["probe"] == "failed"
    assert status["good"]["order"] == 1


def test_evidence_validate_exit_codes(tmp_path: Path) -> None:
    good = {
        "schema": "deepseekeyes.target.v1", "answer": "Yes.", "confidence": 0.9,
        "observations": [], "ocr": [], "uncertainties": [],
    }
    (tmp_path / "good.json").write_text(json.dumps(good))
    done = run("evidence", "validate", str(tmp_path / "good.json"))
    assert done.returncode == 0
    assert "valid deepseekeyes.target.v1" in done.stdout
    bad = dict(good, confidence=2, extra=True)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    done = run("evidence", "validate", str(tmp_path / "bad.json"), "--variant", "target")
    assert done.returncode == 1
    assert "/confidence" in done.stderr
    assert "/extra" in done.stderr
    (tmp_path / "notjson.json").write_text("{")
    assert run("evidence", "validate", str(tmp_path / "notjson.json")).returncode == 1


def test_config_check_prints_every_error_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text(
        '[vision]\nhealth_ttl = -5\n[[vision.routes]]\nname = "q"\nbase_url = "https://h/v1"\n'
        'model = "m"\napi_key = "sk-literal"\n'
    )
    done = run("config", "check", str(path))
    assert done.returncode == 1
    assert "vision.health_ttl" in done.stderr
    assert "vision.routes[0].api_key" in done.stderr
    assert "sk-literal" not in done.stderr + done.stdout
    path.write_text('[[vision.routes]]\nname = "q"\nbase_url = "https://h/v1"\nmodel = "m"\n'
                    'api_key = { env = "Q_KEY" }\n')
    ok = run("config", "check", str(path))
    assert ok.returncode == 0, ok.stderr
    assert "valid" in ok.stdout
    # A bad file named with --config stops every command with its code.
    path.write_text("[vision]\nnope = 1\n")
    assert "CONFIG_INVALID" in run("--config", str(path), "routes").stderr


def test_usage_reports_categories() -> None:
    done = run("usage", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"exact": {}, "estimated": {}}


def test_ask_and_sessions(tmp_path: Path) -> None:
    from runtime.upstream import LoopbackUpstream

    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-flash"\n', encoding="utf-8",
        )
        first = run("--config", str(config), "ask", "--json", "--session", "s1", "hello there")
        assert first.returncode == 0, first.stderr
        body = json.loads(first.stdout)
        assert body["answer"] == "echo: hello there"
        assert body["path"] == "text"
        assert body["session_id"] == "s1"
        second = run("--config", str(config), "ask", "--session", "s1", "again")
        assert second.stdout.strip() == "echo: again"
        # The second turn carried the first one as history.
        assert len(upstream.requests[-1]["messages"]) == 3
    listing = json.loads(run("sessions", "list", "--json").stdout)
    assert [row["id"] for row in listing] == ["s1"]
    assert listing[0]["events"] == 4
    shown = run("sessions", "show", "s1")
    assert shown.returncode == 0
    assert "hello there" in shown.stdout
    missing = run("sessions", "show", "nope")
    assert missing.returncode == 1
    assert "STORE_SESSION_NOT_FOUND" in missing.stderr


def test_ask_without_a_key_names_the_variable() -> None:
    done = run("ask", "hello")
    assert done.returncode == 1
    assert "LLM_CREDENTIAL_MISSING" in done.stderr
    assert "DEEPSEEK_API_KEY" in done.stderr


def test_ask_with_only_an_image_needs_a_question(tmp_path: Path) -> None:
    for args in ([str(RECEIPT)], ["photo.png"], [str(RECEIPT), "  "]):
        done = run("ask", *args)
        assert done.returncode == 2, done.stderr
        assert "ask needs a question" in done.stderr
        assert "LLM_CREDENTIAL_MISSING" not in done.stderr  # refused before anything ran


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ask_with_the_upstream_down_says_unavailable(tmp_path: Path) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text(
        f'[llm]\nbase_url = "http://127.0.0.1:{_closed_port()}/v1"\napi_key = false\n',
        encoding="utf-8",
    )
    done = run("--config", str(config), "ask", "hello")
    assert done.returncode == 1
    assert "LLM_UNAVAILABLE" in done.stderr
    assert "LLM_MODEL_UNKNOWN" not in done.stderr


def test_serve_warns_at_start_when_the_upstream_key_is_missing() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "deepseek_eyes", "serve", "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ},
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in process.stderr or []], daemon=True
    )
    reader.start()
    seen: list[str] = []
    try:
        while not any(re.search(r"listening on http://", line) for line in seen):
            seen.append(lines.get(timeout=30))
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
    warning = next(line for line in seen if "warning" in line)
    assert "LLM_CREDENTIAL_MISSING" in warning
    assert "DEEPSEEK_API_KEY" in warning
