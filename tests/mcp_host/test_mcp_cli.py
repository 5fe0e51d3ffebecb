"""``deepseek-eyes mcp …`` as a real process against the real server-everything over stdio."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from deepseek_eyes.mcp_host.settings_file import dumps
from mcp_peers import everything_stdio


def run(config: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI, argv list, no shell
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "mcp", *args],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120,
        check=False,
    )


def command_dir(root: Path, *names: str) -> dict[str, str]:
    """An environment whose PATH starts with executables of these names (for ``import``,
    which checks that a stdio server's command exists)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        stub.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def write_config(path: Path, **overrides: Any) -> Path:
    server = everything_stdio(**overrides).model_dump(mode="json", exclude_defaults=True)
    path.write_text(dumps({"mcp": {"servers": [server]}}), encoding="utf-8")
    return path


def test_list_status_probe_and_tools(tmp_path: Path) -> None:
    config = write_config(tmp_path / "eyes.toml")
    listed = json.loads(run(config, "list", "--json").stdout)
    assert listed["servers"][0]["id"] == "everything"
    assert listed["servers"][0]["allow"] == 0
    status = run(config, "status", "--json")
    assert status.returncode == 0, status.stderr
    row = json.loads(status.stdout)["servers"][0]
    assert (row["status"], row["tools_status"], row["tools"]) == ("ready", "ready", 13)
    probe = run(config, "probe", "everything", "--json")
    assert json.loads(probe.stdout)["tools"][0] == "echo"
    report = json.loads(run(config, "tools", "everything", "--json").stdout)
    tools = {t["name"]: t for t in report["tools"]}
    echo = tools["echo"]
    assert (echo["public_name"], echo["risk"], echo["exposed"]) == (
        "mcp__everything__echo", "read", False)
    assert echo["description"]  # what the model reads
    assert echo["flags"] == []
    assert report["instructions"]["text"]  # server-everything sends instructions
    assert tools["toggle-simulated-logging"]["risk"] == "write"
    unknown = run(config, "probe", "nope")
    assert unknown.returncode == 1
    assert "error MCP_SERVER_UNKNOWN" in unknown.stderr


def test_allow_deny_call_and_audit(tmp_path: Path) -> None:
    config = write_config(tmp_path / "eyes.toml")
    refused = run(config, "call", "everything", "echo", "--args", '{"message": "lapis-7"}')
    assert refused.returncode == 1
    assert "error MCP_TOOL_NOT_EXPOSED" in refused.stderr
    allowed = run(config, "allow", "everything", "echo", "get-tiny-image")
    assert allowed.returncode == 0, allowed.stderr
    called = run(config, "call", "everything", "echo", "--args", '{"message": "lapis-7"}',
                 "--json")
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert "lapis-7" in result["preview"]
    assert result["result_sha256"].startswith("sha256:")
    image = json.loads(run(config, "call", "everything", "get-tiny-image", "--json").stdout)
    assert image["images"][0]["mime_type"] == "image/png"
    assert Path(image["artifact"]).is_file()
    assert run(config, "deny", "everything", "echo").returncode == 0
    denied = run(config, "call", "everything", "echo", "--args", '{"message": "x"}')
    assert "error MCP_TOOL_NOT_EXPOSED" in denied.stderr
    bad_args = run(config, "call", "everything", "get-sum", "--args", "[1, 2]")
    assert "error MCP_ARGUMENTS_INVALID" in bad_args.stderr
    # An edit that would not validate writes nothing.
    before = config.read_bytes()
    bare = run(config, "allow", "everything", "*")
    assert bare.returncode == 1
    assert "error CONFIG_INVALID" in bare.stderr
    assert "allow.tools" in bare.stderr
    assert config.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    assert "error MCP_SERVER_UNKNOWN" in run(config, "allow", "nope", "echo").stderr
    rows = json.loads(run(config, "audit", "--json").stdout)["calls"]
    statuses = [(r["tool"], r["status"]) for r in rows]
    assert ("echo", "ok") in statuses
    assert ("get-tiny-image", "ok") in statuses
    assert "lapis-7" not in json.dumps(rows)
    assert all(r["arguments_sha256"].startswith("sha256:") for r in rows)


def test_read_only_policy_reaches_the_cli(tmp_path: Path) -> None:
    config = write_config(tmp_path / "eyes.toml", risk_policy="read-only",
                          allow={"tools": ["toggle-simulated-logging"]})
    blocked = run(config, "call", "everything", "toggle-simulated-logging")
    assert blocked.returncode == 1
    assert "error MCP_TOOL_RISK_BLOCKED" in blocked.stderr


def test_content_plane_commands(tmp_path: Path) -> None:
    config = write_config(tmp_path / "eyes.toml", resources_enabled=True, prompts_enabled=True)
    assert run(config, "allow", "--kind", "resources", "everything",
               "demo://resource/dynamic/text/*").returncode == 0
    assert run(config, "allow", "everything", "--kind", "prompts", "args-prompt").returncode == 0
    resources = json.loads(run(config, "resources", "everything", "--json").stdout)[
        "resources"]
    assert any(r["template"] and r["allowed"] for r in resources)
    read = run(config, "read", "everything", "demo://resource/dynamic/text/3")
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip()
    other = run(config, "read", "everything", "demo://resource/static/document/features.md")
    assert "error MCP_RESOURCE_NOT_ALLOWED" in other.stderr
    prompts = {p["name"]: p for p in json.loads(run(config, "prompts", "everything",
                                                    "--json").stdout)["prompts"]}
    assert prompts["args-prompt"]["allowed"]
    assert not prompts["simple-prompt"]["allowed"]
    missing = run(config, "get-prompt", "everything", "args-prompt")
    assert "error MCP_ARGUMENTS_INVALID" in missing.stderr
    got = run(config, "get-prompt", "everything", "args-prompt", "--args", '{"city": "Oslo"}')
    assert got.returncode == 0, got.stderr
    assert "Oslo" in got.stdout
    assert "error MCP_PROMPT_NOT_ALLOWED" in run(config, "get-prompt", "everything",
                                                 "simple-prompt").stderr


def test_import_other_hosts_json(tmp_path: Path) -> None:
    config = write_config(tmp_path / "eyes.toml")
    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps({"mcpServers": {
        "Files Server": {"command": "npx", "args": ["-y", "some-files-server"],
                         "env": {"FILES_TOKEN": "${env:FILES_TOKEN}", "HOME_DIR": "${HOME}"},
                         "disabled": True},
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "${REMOTE_AUTH}"}},
    }}))
    npx = command_dir(tmp_path, "npx")
    done = run(config, "import", str(claude), env=npx)
    assert done.returncode == 0, done.stderr
    assert "files-server" in done.stdout
    assert "not carried over: Files Server.disabled" in done.stderr
    listed = {s["id"]: s for s in json.loads(run(config, "list", "--json").stdout)["servers"]}
    assert set(listed) == {"everything", "files-server", "remote"}
    assert listed["files-server"]["enabled"]
    assert listed["files-server"]["allow"] == 0
    assert listed["remote"]["transport"] == "streamable-http"
    servers = {s["id"]: s for s in tomllib.loads(config.read_text())["mcp"]["servers"]}
    assert servers["files-server"]["env"]["FILES_TOKEN"] == {"env": "FILES_TOKEN"}
    assert servers["remote"]["headers"]["Authorization"] == {"env": "REMOTE_AUTH"}
    again = run(config, "import", str(claude), env=npx)
    assert "error MCP_IMPORT_INVALID" in again.stderr  # ids are taken

    vscode = tmp_path / "mcp.json"
    vscode.write_text(json.dumps({"servers": {"gh": {
        "type": "http", "url": "https://api.example.com/mcp",
        "headers": {"Authorization": "Bearer ghp_realLookingSecretValue123"}}}}))
    before = config.read_bytes()
    secret = run(config, "import", str(vscode))
    assert secret.returncode == 1
    assert "error MCP_IMPORT_INVALID" in secret.stderr
    assert "headers.Authorization" in secret.stderr
    assert "${" in secret.stderr
    assert "env" in secret.stderr
    assert "ghp_realLookingSecretValue123" not in secret.stderr + secret.stdout
    assert config.read_bytes() == before


def test_import_refuses_a_command_that_is_not_there(tmp_path: Path) -> None:
    config = tmp_path / "eyes.toml"
    env = command_dir(tmp_path / "ours", "files-server")
    theirs = command_dir(tmp_path / "theirs", "their-server")
    source = tmp_path / "mcp.json"
    for spec in ({"command": "no-such-server-7f3a"},
                 {"command": "./servers/missing-server"},
                 {"command": str(tmp_path / "theirs" / "bin")},  # a directory
                 {"command": "their-server"}):  # on another PATH than the one it gets
        source.write_text(json.dumps({"mcpServers": {"Files": spec}}))
        refused = run(config, "import", str(source), "--json", env=env)
        assert refused.returncode == 1
        error = json.loads(refused.stdout)["error"]
        assert error["code"] == "MCP_COMMAND_NOT_FOUND", error
        assert error["details"] == {"server": "Files", "command": spec["command"]}
        assert repr(spec["command"]) in error["message"]
        assert not config.exists()  # nothing was written
    text = run(config, "import", str(source), env=env)
    assert "error MCP_COMMAND_NOT_FOUND: Files: the command 'their-server' is not an " \
           "executable file on PATH" in text.stderr
    # Found: on our PATH, as a path, or on the PATH its env gives the child.
    source.write_text(json.dumps({"mcpServers": {
        "Files": {"command": "files-server"},
        "Local": {"command": str(tmp_path / "theirs" / "bin" / "their-server")},
        "Theirs": {"command": "their-server", "env": {"PATH": "${THEIR_PATH}"}}}}))
    done = run(config, "import", str(source), "--json",
               env={**env, "THEIR_PATH": theirs["PATH"]})
    assert done.returncode == 0, done.stdout + done.stderr
    assert [s["id"] for s in json.loads(done.stdout)["imported"]] == ["files", "local", "theirs"]


def test_import_replace_keeps_our_policy(tmp_path: Path) -> None:
    config = tmp_path / "eyes.toml"
    env = command_dir(tmp_path, "files-server", "files-server-2")
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {"Files": {
        "command": "files-server", "args": ["--root", "/srv"]}}}))
    assert run(config, "import", str(source), env=env).returncode == 0
    assert run(config, "allow", "files", "read_file").returncode == 0
    assert run(config, "disable", "files", "--plane", "prompts").returncode == 0
    config.write_text("# mine\n" + config.read_text(), encoding="utf-8")
    source.write_text(json.dumps({"mcpServers": {
        "Files": {"command": "files-server-2", "args": ["--root", "/data"],
                  "env": {"FILES_TOKEN": "${FILES_TOKEN}"}},
        "Other": {"command": "files-server"}}}))
    # --strict: one refused entry (an id taken) refuses the file (without, tests/mcp_host/
    # test_mcp_import_mixed.py: the rest is imported).
    again = run(config, "import", str(source), "--strict", env=env)
    assert again.returncode == 1
    assert "error MCP_IMPORT_INVALID" in again.stderr
    assert "--replace" in again.stderr
    replaced = run(config, "import", str(source), "--replace", "--json", env=env)
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    report = json.loads(replaced.stdout)
    assert report["replaced"] == ["files"]
    assert [s["id"] for s in report["imported"]] == ["files", "other"]
    text = config.read_text()
    assert text.startswith("# mine\n")
    servers = {s["id"]: s for s in tomllib.loads(text)["mcp"]["servers"]}
    files = servers["files"]
    assert (files["command"], files["args"]) == ("files-server-2", ["--root", "/data"])
    assert files["env"] == {"FILES_TOKEN": {"env": "FILES_TOKEN"}}
    assert files["allow"]["tools"] == ["read_file"]  # our policy is kept
    assert files["prompts_enabled"] is False
    assert list(servers) == ["files", "other"]  # replaced where it stood
    # Two servers of one file that become one id are refused, --replace or not.
    source.write_text(json.dumps({"mcpServers": {"Files": {"command": "files-server"},
                                                 "files": {"command": "files-server"}}}))
    twice = run(config, "import", str(source), "--replace", "--strict", env=env)
    assert twice.returncode == 1
    assert "both become id 'files'" in twice.stderr


def test_missing_env_reference_fails_with_its_code(tmp_path: Path) -> None:
    config = write_config(tmp_path / "eyes.toml",
                          env={"PATH": {"env": "DSE_TEST_NODE_PATH"},
                               "API_KEY": {"env": "DSE_TEST_UNSET_VARIABLE"}})
    probe = run(config, "probe", "everything")
    assert probe.returncode == 1
    assert "error CONFIG_ENV_MISSING" in probe.stderr
    status = run(config, "status", "--json")
    assert status.returncode == 1  # an enabled server failed
    row = json.loads(status.stdout)["servers"][0]
    assert (row["status"], row["last_error"]) == ("failed", "CONFIG_ENV_MISSING")
    assert row["missing_env"] == "DSE_TEST_UNSET_VARIABLE"
    text = run(config, "status")
    assert text.returncode == 1
    assert "CONFIG_ENV_MISSING (DSE_TEST_UNSET_VARIABLE)" in text.stdout
    assert "environment variable DSE_TEST_UNSET_VARIABLE is not set" in text.stdout


def test_edits_speak_json_without_connecting(tmp_path: Path) -> None:
    """import, allow and deny edit the settings file only: no server runs, no node needed."""
    config = tmp_path / "eyes.toml"
    cursor = tmp_path / "mcp.json"
    cursor.write_text(json.dumps({"mcpServers": {
        "Files": {"command": "npx", "args": ["-y", "some-files-server"], "disabled": True},
    }}))
    imported = run(config, "import", str(cursor), "--json", env=command_dir(tmp_path, "npx"))
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr == ""  # what was not carried over is in the object
    assert json.loads(imported.stdout) == {
        "path": str(config), "imported": [{"id": "files", "transport": "stdio"}],
        "replaced": [], "ignored": ["Files.disabled"], "refused": [],
    }
    allowed = run(config, "allow", "files", "read_file", "list-*", "--json")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout) == {
        "path": str(config), "server": "files", "list": "allow", "kind": "tools",
        "added": ["read_file", "list-*"], "selectors": ["read_file", "list-*"],
    }
    denied = json.loads(run(config, "deny", "files", "--kind", "tools", "list-secrets",
                            "--json").stdout)
    assert (denied["list"], denied["selectors"]) == ("deny", ["list-secrets"])
    again = json.loads(run(config, "allow", "files", "stat", "--json").stdout)
    assert again["selectors"] == ["read_file", "list-*", "stat"]
    asking = json.loads(run(config, "ask", "files", "write_*", "--json").stdout)
    assert asking == {"path": str(config), "server": "files", "tool": "write_*", "ask": True,
                      "asks": ["write_*"]}
    stopped = run(config, "ask", "files", "write_*", "--off")
    assert stopped.returncode == 0, stopped.stderr
    assert "files ask -= write_* (now: nothing)" in stopped.stdout
    assert "write_" not in config.read_text(encoding="utf-8")
    unknown = run(config, "allow", "nope", "x", "--json")
    assert unknown.returncode == 1
    assert json.loads(unknown.stdout)["error"]["code"] == "MCP_SERVER_UNKNOWN"


RAW_SERVER = Path(__file__).with_name("raw_server.py")


def test_register_switch_and_remove_keep_the_file(tmp_path: Path) -> None:
    """register, enable, disable and remove edit the file only, keeping its comments."""
    config = tmp_path / "eyes.toml"
    config.write_text("# my settings\n[runtime]\ntool_sources = [\"look\", \"mcp\"]  # order\n")
    done = run(config, "register", "time", "--env", "TZ_TOKEN=MY_TZ_TOKEN", "--json", "--",
               "uvx", "mcp-server-time", "--local-timezone=UTC")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["server"] == {
        "id": "time", "transport": "stdio", "command": "uvx",
        "args": ["mcp-server-time", "--local-timezone=UTC"],
        "env": {"TZ_TOKEN": {"env": "MY_TZ_TOKEN"}}}
    web = run(config, "register", "web", "--url", "https://h.example/mcp", "--header",
              "Authorization=WEB_AUTH", "--disabled", "--json")
    assert web.returncode == 0, web.stderr
    before = config.read_bytes()
    for args, code in (
        (["register", "leak", "--", "npx", "srv", "--api-key", "sk-live-abcdefghijklmnop"],
         "MCP_CREDENTIAL_IN_ARGUMENTS"),
        (["register", "leak2", "--", "npx", "srv", "--token=abcdefghijkl"],
         "MCP_CREDENTIAL_IN_ARGUMENTS"),
        (["register", "leak3", "--url", "https://bot:hunter22@h.example/mcp"],
         "MCP_CREDENTIAL_IN_ARGUMENTS"),
        (["register", "time", "--", "other"], "MCP_SERVER_EXISTS"),
        (["enable", "nope"], "MCP_SERVER_UNKNOWN"),
    ):
        refused = run(config, *args[:2], "--json", *args[2:])
        assert refused.returncode == 1, args
        assert json.loads(refused.stdout)["error"]["code"] == code, args
        assert "abcdefghijkl" not in refused.stdout
        assert "hunter22" not in refused.stdout
    assert config.read_bytes() == before
    assert json.loads(run(config, "enable", "time", "--plane", "resources", "--json").stdout) == {
        "path": str(config), "server": "time", "key": "resources_enabled", "value": True}
    assert run(config, "disable", "time", "--json").returncode == 0
    assert run(config, "enable", "web").stdout.strip().endswith("web enabled = true")
    listed = {s["id"]: s for s in json.loads(run(config, "list", "--json").stdout)["servers"]}
    assert (listed["time"]["enabled"], listed["web"]["enabled"]) == (False, True)
    assert listed["time"]["planes"] == "tools,resources"
    assert json.loads(run(config, "remove", "web", "--json").stdout)["removed"] == "web"
    text = config.read_text()
    assert text.startswith("# my settings\n")
    assert "# order" in text
    assert [s["id"] for s in tomllib.loads(text)["mcp"]["servers"]] == ["time"]


def two_servers(path: Path) -> Path:
    """everything first, then the hand-written raw server (declared order matters)."""
    first = everything_stdio(
        allow={"tools": ["echo"], "resources": ["demo://resource/dynamic/text/*"]},
        resources_enabled=True)
    raw = {"id": "raw", "transport": "stdio", "command": sys.executable,
           "args": [str(RAW_SERVER), "call"], "protocol": "legacy",
           "allow": {"tools": ["tok"]}}
    path.write_text(dumps({"mcp": {"servers": [
        first.model_dump(mode="json", exclude_defaults=True), raw]}}), encoding="utf-8")
    return path


def test_commands_start_only_what_they_need_and_logs_take_stderr(tmp_path: Path) -> None:
    config = two_servers(tmp_path / "eyes.toml")
    logs = Path(os.environ["DEEPSEEK_EYES_HOME"]) / "logs" / "mcp"
    read = run(config, "read", "everything", "demo://resource/dynamic/text/3")
    assert read.returncode == 0, read.stderr
    assert "Starting default" not in read.stderr  # the server's stderr is in its log
    assert "Starting default" in (logs / "everything.stderr.log").read_text()
    assert not (logs / "raw.stderr.log").exists()  # not needed, not started
    called = run(config, "call", "mcp__raw__tok", "--json")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["preview"] == "fine"
    assert (logs / "raw.stderr.log").exists()
    status = run(config, "status", "--json")
    assert status.returncode == 0, status.stderr
    rows = {r["id"]: r for r in json.loads(status.stdout)["servers"]}
    assert rows["raw"]["stderr_log"] == str(logs / "raw.stderr.log")
    tools = run(config, "tools", "raw")
    assert tools.returncode == 0, tools.stderr
    assert "Ignore all previous instructions" in tools.stdout  # what the model reads
    assert "! instruction: override: Ignore all previous instructions" in tools.stdout
    assert "! secret: OpenAI-style key: sk-a…" in tools.stdout
    assert "sk-abcdefghijkl" not in tools.stdout  # masked on the terminal
    flags = json.loads(run(config, "tools", "raw", "--json").stdout)["tools"][2]["flags"]
    assert {f["what"] for f in flags} >= {"override", "always/never", "OpenAI-style key"}


def test_watch_and_restart(tmp_path: Path) -> None:
    config = two_servers(tmp_path / "eyes.toml")
    watched = run(config, "watch", "--json", "--for", "4")
    assert watched.returncode == 0, watched.stderr
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    assert all(e["event"] == "status" for e in events)
    ready = {e["id"] for e in events if e["status"] == "ready"}
    assert ready == {"everything", "raw"}
    assert any(e["status"] == "connecting" for e in events)
    restarted = run(config, "restart", "raw", "--json")
    assert restarted.returncode == 0, restarted.stderr
    body = json.loads(restarted.stdout)
    assert (body["before"]["status"], body["after"]["status"]) == ("ready", "ready")
    assert body["after"]["generation"] > body["before"]["generation"]

    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "mcp", "watch"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:  # bounded by the servers settling (timeout below)
            if " raw ready " in line:
                break
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
