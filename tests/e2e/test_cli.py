"""The ``deepseek-eyes`` command as a real process: exit codes, output, files."""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import click
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


def only_error_line(done: subprocess.CompletedProcess[str], code: str) -> None:
    """The failure is one ``error CODE: sentence`` line on stderr, and nothing else."""
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert done.stderr.startswith(f"error {code}: "), done.stderr
    assert "Traceback" not in done.stderr


def json_error(done: subprocess.CompletedProcess[str], code: str) -> dict[str, object]:
    """With --json the failure is one JSON object on stdout, and stderr stays empty."""
    body = json.loads(done.stdout)
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert done.stderr == ""
    return dict(body["error"])


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
    path.write_text("[gateway]\nbody_timeout = 10\ndrain_timeout = 5\n")
    drained = run("config", "check", str(path))
    assert drained.returncode == 0, drained.stderr
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
            'model = "deepseek-v4-pro"\n', encoding="utf-8",
        )
        first = run("--config", str(config), "ask", "--json", "--session", "s1", "hello there")
        assert first.returncode == 0, first.stderr
        body = json.loads(first.stdout)
        assert body["answer"] == "echo: hello there"
        assert body["path"] == "text"
        assert body["session_id"] == "s1"
        [request] = body["provenance"]["requests"]
        assert request["request_sha256"] == upstream.body_hashes[-1]
        assert body["provenance"]["audit"]["checkpoint"].startswith(
            f"{body['provenance']['audit']['seq']}:")
        second = run("--config", str(config), "ask", "--session", "s1", "again")
        assert second.stdout.strip() == "echo: again"
        # The second turn carried the first one as history.
        assert len(upstream.requests[-1]["messages"]) == 3
    listing = json.loads(run("sessions", "list", "--json").stdout)["sessions"]
    assert [row["id"] for row in listing] == ["s1"]
    assert listing[0]["events"] == 4
    shown = run("sessions", "show", "s1")
    assert shown.returncode == 0
    assert "hello there" in shown.stdout
    missing = run("sessions", "show", "nope")
    assert missing.returncode == 1
    assert "STORE_SESSION_NOT_FOUND" in missing.stderr


def test_with_only_a_deepseek_upstream_see_and_models_use_deepseeks_own_eyes(
    tmp_path: Path,
) -> None:
    """A new user's settings: [llm] alone. `see` is served by the deepseek route
    (deepseek-flash on that upstream, probed first), `routes` lists it before local, and
    `models` shows what a probe learned."""
    from runtime.upstream import LoopbackUpstream

    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-pro"\n', encoding="utf-8",
        )
        seen = run("--config", str(config), "see", "--json", str(RECEIPT))
        assert seen.returncode == 0, seen.stderr
        record = json.loads(seen.stdout)
        assert (record["route"], record["model"]) == ("deepseek", "deepseek-flash")
        phases = [(a["route"], a["phase"], a["outcome"]) for a in record["attempts"]]
        assert ("deepseek", "probe", "pass") in phases, phases
        routes = run("--config", str(config), "routes", "--json")
        names = [r["name"] for r in json.loads(routes.stdout)["routes"]]
        assert names[:2] == ["deepseek", "local"]
        models = run("--config", str(config), "models", "--json", "--probe", "deepseek-v4-pro")
        assert models.returncode == 0, models.stderr
        report = json.loads(models.stdout)
        assert report["probes"][0]["verdict"]["sees"] is False
        assert report["probes"][0]["verdict"]["code"] == "LLM_IMAGE_REFUSED"
        rows = {row["id"]: row for row in report["models"]}
        assert (rows["deepseek-v4-pro"]["how"], rows["deepseek-v4-pro"]["prior"]) == (
            "probe", False)
        assert (rows["deepseek-flash"]["sees"], rows["deepseek-flash"]["how"]) == (True, "table")
        assert rows["deepseek-v4-flash"]["renamed"]["successor"] == "deepseek-flash"
        text = run("--config", str(config), "models")
        assert "deepseek-v4-pro" in text.stdout
        assert "LLM_IMAGE_REFUSED" in text.stdout


def test_ask_on_an_alias_names_its_successor_once(tmp_path: Path) -> None:
    from runtime.upstream import LoopbackUpstream

    with LoopbackUpstream() as upstream:
        config = tmp_path / "eyes.toml"
        config.write_text(
            f'[llm]\nbase_url = "{upstream.base_url}"\napi_key = false\n'
            'model = "deepseek-v4-flash"\n', encoding="utf-8",
        )
        done = run("--config", str(config), "ask", "--json", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("warning CONFIG_MODEL_RENAMED: 'deepseek-v4-flash' is an alias "
                             "of 'deepseek-flash'") == 1, done.stderr
    assert json.loads(done.stdout)["model_renamed"]["successor"] == "deepseek-flash"


def test_ask_refuses_too_many_images_before_reading_any(tmp_path: Path) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text('[llm]\napi_key = false\n[runtime]\nmax_images_per_turn = 2\n',
                      encoding="utf-8")
    # The files do not exist: had any been read, the error would be IMAGE_UNREADABLE.
    done = run("--config", str(config), "ask", "a.png", "b.png", "c.png", "what is this?")
    assert done.returncode == 1
    assert "error RUNTIME_TOO_MANY_IMAGES" in done.stderr


def test_ask_without_a_key_names_the_variable() -> None:
    done = run("ask", "hello")
    assert done.returncode == 1
    assert "LLM_CREDENTIAL_MISSING" in done.stderr
    assert "DEEPSEEK_API_KEY" in done.stderr


HEAVY = ("mcp", "uvicorn", "rapidocr", "onnxruntime", "httpx", "openai", "starlette", "numpy")


def test_importing_the_cli_and_its_help_load_no_heavy_dependency() -> None:
    probe = (
        "import json, sys\n"
        "from deepseek_eyes.cli import main\n"
        "main(['--help'])\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(  # noqa: S603 - our own interpreter, argv list
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_a_cached_see_loads_no_image_decoder_and_start_up_leaves_the_collector_on() -> None:
    """What a cached ``see`` imports (its command, the data home, the bridge and router)
    loads no Pillow: a hit decodes nothing. And the command line's start-up, which pauses
    the cyclic garbage collector while it imports, turns it back on."""
    probe = (
        "import gc, json, sys\n"
        "sys.argv = ['deepseek-eyes', '--version']\n"
        "from deepseek_eyes.cli import main\n"
        "main()\n"
        "import deepseek_eyes.cli.see, deepseek_eyes.home, deepseek_eyes.vision.bridge\n"
        "print(json.dumps([[m for m in sys.modules if m.split('.')[0] == 'PIL'],"
        " gc.isenabled(), gc.get_freeze_count() > 0]))\n"
    )
    done = subprocess.run(  # noqa: S603 - our own interpreter, argv list
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [[], True, True]


def test_a_cached_see_reads_its_schema_without_zipfile_and_loads_no_difflib() -> None:
    """A cached ``see`` reads the evidence schema (its prompt fingerprint is part of the cache
    key) through the package's loader, not ``importlib.resources``, whose readers import
    ``zipfile`` for every package; and did-you-mean (``difflib``) loads only for a settings
    file with an unknown key."""
    probe = (
        "import json, sys\n"
        "sys.argv = ['deepseek-eyes', '--version']\n"
        "from deepseek_eyes.cli import main\n"
        "main()\n"
        "import deepseek_eyes.cli.see, deepseek_eyes.home, deepseek_eyes.vision.bridge\n"
        "from deepseek_eyes.settings import load_settings\n"
        "from deepseek_eyes.vision.routes.prompts import prompt_fingerprint\n"
        "load_settings()\n"
        "prompt_fingerprint()\n"
        "print(json.dumps(sorted(m for m in ('zipfile', 'importlib.resources', 'difflib')"
        " if m in sys.modules)))\n"
    )
    done = subprocess.run(  # noqa: S603 - our own interpreter, argv list
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_help_summaries_are_the_commands_own() -> None:
    from deepseek_eyes.cli import COMMANDS, cli

    ctx = click.Context(cli)
    for name, (_, _, summary) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None
        assert command.name == name
        for limit in (30, 45, 60, 200):
            expected = command.get_short_help_str(limit)
            assert click.Command(name, help=summary).get_short_help_str(limit) == expected, name


def _leaf_commands() -> Iterator[tuple[str, click.Command]]:
    """Every command that runs (not a group), by its full name, imported through the lazy
    root group exactly as a command line would."""
    from deepseek_eyes.cli import cli

    def walk(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            if isinstance(command, click.Group):
                yield from walk(command, click.Context(command, parent=ctx, info_name=name))
            else:
                yield f"{ctx.command_path} {name}".split(" ", 1)[1], command

    return walk(cli, click.Context(cli, info_name="deepseek-eyes"))


def test_every_command_takes_json() -> None:
    """A command added without --json fails here."""
    leaves = dict(_leaf_commands())
    assert {"see", "serve", "mcp allow", "terminal keys list", "terminal serve"} <= set(leaves)
    missing = sorted(
        name for name, command in leaves.items()
        if not any(isinstance(p, click.Option) and "--json" in p.opts and p.is_flag
                   for p in command.params)
    )
    assert missing == []


def test_serve_json_says_where_it_listens() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "deepseek_eyes", "serve", "--port", "0", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ},
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True
    )
    reader.start()
    try:
        announced = json.loads(lines.get(timeout=60))
        where = announced["listening"]
        assert set(announced) == {"listening"}
        assert where["host"] == "127.0.0.1"
        assert where["port"] > 0
        assert where["url"] == f"http://127.0.0.1:{where['port']}/v1"
        with socket.create_connection(("127.0.0.1", where["port"]), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert lines.empty()  # one object, nothing after it


def test_usage_errors_have_one_code_and_exit_status_2() -> None:
    for args in (["see", "--bogus"], ["nope"], ["see"], ["routes", "--probe=x"],
                 ["evidence", "validate", "missing.json"], ["terminal", "serve"]):
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        only_error_line(done, "CLI_USAGE")
        assert done.stdout == ""
    error = json_error(run("see", "--bogus", "--json"), "CLI_USAGE")
    assert "--bogus" in str(error["message"])
    assert run("--help").returncode == 0


def test_config_check_reports_like_every_command_and_speaks_json(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text("[vision]\nhealth_ttl = -5\nroute_priorty = []\n")
    done = run("config", "check", str(path))
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error CONFIG_INVALID: ")
    assert any(line.startswith("  vision.health_ttl: ") for line in lines[1:])
    assert any("did you mean `route_priority`?" in line for line in lines[1:])
    error = json_error(run("config", "check", str(path), "--json"), "CONFIG_INVALID")
    paths = {item["path"] for item in error["details"]["errors"]}  # type: ignore[index]
    assert paths == {"vision.health_ttl", "vision.route_priorty"}
    only_error_line(run("config", "check", str(tmp_path / "none.toml")), "CONFIG_NOT_FOUND")
    path.write_text("[vision]\nhealth_ttl = 5\n")
    ok = run("config", "check", str(path), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"valid": True, "path": str(path)}
    assert json.loads(run("config", "check", "--json").stdout) == {"valid": True, "path": None}


def test_evidence_validate_errors_have_codes_and_json(tmp_path: Path) -> None:
    (tmp_path / "notjson.json").write_text("{")
    done = run("evidence", "validate", str(tmp_path / "notjson.json"))
    assert done.returncode == 1
    only_error_line(done, "EVIDENCE_FILE_INVALID")
    json_error(run("evidence", "validate", str(tmp_path / "notjson.json"), "--json"),
               "EVIDENCE_FILE_INVALID")
    good = {
        "schema": "deepseekeyes.target.v1", "answer": "Yes.", "confidence": 0.9,
        "observations": [], "ocr": [], "uncertainties": [],
    }
    (tmp_path / "good.json").write_text(json.dumps(good))
    ok = run("evidence", "validate", str(tmp_path / "good.json"), "--json")
    assert ok.returncode == 0
    assert json.loads(ok.stdout) == {
        "valid": True, "file": str(tmp_path / "good.json"), "variant": "deepseekeyes.target.v1",
    }
    (tmp_path / "bad.json").write_text(json.dumps(dict(good, confidence=2)))
    bad = run("evidence", "validate", str(tmp_path / "bad.json"), "--json")
    assert bad.returncode == 1
    error = json_error(bad, "EVIDENCE_SCHEMA_INVALID")
    assert [i["pointer"] for i in error["details"]["errors"]] == ["/confidence"]  # type: ignore[index]


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_serving_on_a_busy_port_is_an_error_with_a_code(busy_port: int) -> None:
    gateway = run("serve", "--port", str(busy_port))
    assert gateway.returncode == 1
    only_error_line(gateway, "CLI_ADDRESS_IN_USE")
    terminal = run("terminal", "serve", "--http", "--port", str(busy_port),
                   env={"DEEPSEEK_EYES_TERMINAL_TOKEN": secrets.token_urlsafe(32)})
    assert terminal.returncode == 1
    assert terminal.stderr.splitlines()[-1].startswith("error CLI_ADDRESS_IN_USE: ")
    assert "Traceback" not in terminal.stderr


def test_overlay_refuses_a_missing_directory_and_an_unknown_format(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "boxes.png"
    done = run("see", str(RECEIPT), "--overlay", str(missing))
    assert done.returncode == 1
    only_error_line(done, "CLI_OUTPUT_DIR_MISSING")
    assert not (tmp_path / "no").exists()
    for name in ("boxes.gif", "boxes", "boxes.png.txt"):
        refused = run("see", str(RECEIPT), "--overlay", str(tmp_path / name), "--json")
        assert refused.returncode == 1
        json_error(refused, "CLI_OUTPUT_FORMAT_UNKNOWN")
    assert not any(p.name.startswith("boxes") for p in tmp_path.iterdir())
    assert run("see", "-", "-").returncode == 2


@pytest.mark.slow
def test_see_reads_stdin_and_overlays_take_their_extensions_format(tmp_path: Path) -> None:
    done = subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", "see", "-", str(RECEIPT), "--json",
         "--overlay", str(tmp_path / "boxes.jpg")],
        input=RECEIPT.read_bytes(), capture_output=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["image"]["path"] == "-"
    assert first["image"]["sha256"] == second["image"]["sha256"]
    assert second["cached"] is True  # the same bytes, read from stdin first
    for index in (1, 2):
        with Image.open(tmp_path / f"boxes.{index}.jpg") as image:
            assert image.format == "JPEG"
            assert image.size == (900, 700)
    for name, fmt in (("boxes.webp", "WEBP"), ("boxes.jpeg", "JPEG"), ("BOXES.PNG", "PNG")):
        again = run("see", str(RECEIPT), "--overlay", str(tmp_path / name))
        assert again.returncode == 0, again.stderr
        with Image.open(tmp_path / name) as image:
            assert image.format == fmt


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
    warning = next(line for line in seen if "warning LLM_" in line)
    assert "LLM_CREDENTIAL_MISSING" in warning
    assert "DEEPSEEK_API_KEY" in warning
