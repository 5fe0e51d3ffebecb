"""``deepseek-eyes console``: the web console over a data directory, without the gateway,
as a real process on a loopback port of its own; its login link only on stderr."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import httpx


def test_console_serves_a_data_directory_alone_behind_its_own_login(tmp_path: Path) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text('[[mcp.servers]]\nid = "t"\ntransport = "stdio"\ncommand = "t"\n'
                      'enabled = false\nallow = { tools = ["a"] }\n', encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(tmp_path / "data")}
    process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list
        [sys.executable, "-m", "deepseek_eyes", "--config", str(config), "console",
         "--port", "0", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    for stream, sink in ((process.stdout, lines), (process.stderr, errors)):
        threading.Thread(target=lambda s=stream, q=sink: [q.put(x) for x in s or []],
                         daemon=True).start()
    try:
        where = json.loads(lines.get(timeout=60))["listening"]
        assert where["host"] == "127.0.0.1"
        link = errors.get(timeout=30)
        found = re.search(r"console login \(one use\): (\S+)", link)
        assert found is not None, link
        assert found.group(1).startswith(where["url"] + "#login=")
        code = found.group(1).split("#login=", 1)[1]
        base = where["url"].removesuffix("/console/")
        with httpx.Client(base_url=base, timeout=30) as person:
            assert person.get("/console/").status_code == 200
            refused = person.get("/console/api/mcp")
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "CONSOLE_LOGIN_REQUIRED"
            login = person.post("/console/api/login", json={"code": code})
            assert login.status_code == 200, login.text
            csrf = login.json()["csrf"]
            mcp = person.get("/console/api/mcp").json()
            assert mcp["running"] is False  # no gateway: the settings file's view
            assert [(s["id"], s["allow"], s["status"]) for s in mcp["servers"]] == [
                ("t", ["a"], None)]
            approvals = person.get("/console/api/approvals").json()
            assert approvals == {"running": False, "terminal": False, "plans": [],
                                 "asks": []}
            # An edit goes through the CLI's writer, and is audited.
            edit = person.post("/console/api/mcp/t/tools", json={
                "list": "deny", "op": "add", "selector": "b"},
                headers={"x-csrf-token": csrf, "origin": base})
            assert edit.status_code == 200, edit.text
            server = tomllib.loads(config.read_text(encoding="utf-8"))["mcp"]["servers"][0]
            assert (server["allow"], server["deny"]) == ({"tools": ["a"]}, {"tools": ["b"]})
            bad = person.post("/console/api/mcp/t/tools", json={
                "list": "allow", "op": "add", "selector": " spaced "},
                headers={"x-csrf-token": csrf, "origin": base})
            assert bad.status_code == 400
            assert bad.json()["error"]["code"] == "CONSOLE_ARGUMENT_INVALID"
            audit = person.get("/console/api/audit").json()
            assert "settings.change" in {k["kind"] for k in audit["kinds"]} | {
                audit["head"]["kind"]}
            missing = person.get("/console/api/conversations/nope")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "CONSOLE_NOT_FOUND"
        # The spent code and the cookie were never written to the data directory.
        cookie = login.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
        for path in (tmp_path / "data").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert code.encode() not in data, path
                assert cookie.encode() not in data, path
    finally:
        process.terminate()
        process.wait(timeout=20)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
