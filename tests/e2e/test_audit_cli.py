"""``deepseek-eyes audit`` as a real process, and what feeds the chain from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from deepseek_eyes.settings import Settings
from deepseek_eyes.store import chain
from deepseek_eyes.terminal.config import build_service
from e2e.test_cli import RECEIPT, run
from helpers import raw_store


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def test_verify_passes_then_names_the_first_bad_entry(isolated_home: Path) -> None:
    assert run("see", str(RECEIPT), "--json").returncode == 0
    done = run("audit", "verify", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["entries"] >= 5
    assert report["checkpoints"] >= 1  # the `see` process sealed its records on exit
    assert report["kinds"]["vision.attempt"] >= 1

    pinned = run("audit", "checkpoint").stdout.strip()
    assert pinned.startswith(f"{report['entries']}:")

    conn = raw_store(isolated_home / "eyes.db")  # attempts have no trigger to drop
    conn.execute("UPDATE attempts SET latency_ms = 0.001 WHERE id = (SELECT MAX(id) FROM attempts)")
    entry = chain.entry_of(conn, "attempts", _attempt_rowid(isolated_home))  # single or batch
    assert entry is not None
    seq = entry[0]
    conn.close()
    bad = run("audit", "verify")
    assert bad.returncode == 1
    assert _first_line(bad.stderr) == (
        f"error AUDIT_RECORD_TAMPERED: entry {seq}: attempts:"
        f"{_attempt_rowid(isolated_home)} no longer matches the digest its entry holds")
    # Nothing that reads like success comes before (or beside) the failure: standard output
    # is empty and the counts say where the walk stopped.
    assert bad.stdout == ""
    assert "ok" not in bad.stderr.split()
    assert bad.stderr.splitlines()[1].startswith("  ")
    assert "the walk stopped there, after " in bad.stderr.splitlines()[1]
    bad_json = json.loads(run("audit", "verify", "--json", "--checkpoint", pinned).stdout)
    assert bad_json["problem"]["code"] == "AUDIT_RECORD_TAMPERED"
    assert bad_json["problem"]["seq"] == seq

    malformed = run("audit", "verify", "--checkpoint", "12:nothex")
    assert malformed.returncode == 1
    assert malformed.stderr.startswith("error AUDIT_CHECKPOINT_INVALID: ")


def _attempt_rowid(home: Path) -> int:
    conn = raw_store(home / "eyes.db")
    try:
        return int(conn.execute("SELECT MAX(id) FROM attempts").fetchone()[0])
    finally:
        conn.close()


def test_export_verify_file_and_rotate_key(tmp_path: Path, isolated_home: Path) -> None:
    assert run("see", str(RECEIPT), "--json").returncode == 0
    out = tmp_path / "audit.jsonl"
    exported = json.loads(run("audit", "export", str(out), "--json").stdout)
    assert exported["entries"] > 0
    assert exported["checkpoints"] >= 1
    assert run("audit", "verify", "--file", str(out)).returncode == 0
    rotated = json.loads(run("audit", "rotate-key", "--json").stdout)
    assert rotated["keys"] == [rotated["active"], rotated["previous"]]
    assert run("audit", "verify").returncode == 0  # old checkpoints, old key: still valid
    assert run("audit", "verify", "--file", str(out)).returncode == 0
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join([lines[0], *lines[2:]]))  # the first entry removed
    cut = run("audit", "verify", "--file", str(out), "--json")
    assert cut.returncode == 1
    assert json.loads(cut.stdout)["problem"]["code"] == "AUDIT_CHAIN_BROKEN"


def test_settings_changes_made_by_the_cli_are_on_the_chain(tmp_path: Path) -> None:
    config = tmp_path / "eyes.toml"
    config.write_text("# mine\n")
    done = run("--config", str(config), "mcp", "register", "time", "--", "uvx",
               "mcp-server-time")
    assert done.returncode == 0, done.stderr
    assert run("--config", str(config), "mcp", "disable", "time").returncode == 0
    shown = json.loads(run("audit", "verify", "--json").stdout)
    assert shown["ok"] is True
    assert shown["kinds"]["settings.change"] == 2
    conn = raw_store(Path(str(tmp_path / "eyes-home" / "eyes.db")))
    rows = [json.loads(r[1]) | {"subject": r[0]} for r in conn.execute(
        "SELECT subject, details FROM audit WHERE kind = 'settings.change' ORDER BY id")]
    conn.close()
    assert [r["subject"] for r in rows] == ["deepseek-eyes mcp register",
                                            "deepseek-eyes mcp disable"]
    assert rows[0]["after_sha256"] == rows[1]["before_sha256"]
    assert rows[0]["path"] == str(config)


def test_no_planned_command_can_read_the_audit_keyring(isolated_home: Path) -> None:
    assert run("audit", "rotate-key").returncode == 0
    keyring = isolated_home / "audit" / "keyring.json"
    assert keyring.exists()
    # The data home inside the workspace, the worst case: the policy still refuses it.
    settings = Settings()
    service = build_service(settings, workspaces=[isolated_home.parent], mode="trusted")
    for argv in (["cat", str(keyring)], ["cat", "eyes-home/audit/keyring.json"],
                 ["grep", "-r", "key", "."], ["head", "-c", "10", str(keyring)]):
        plan = service.plan(argv=argv, cwd=str(isolated_home.parent))
        assert plan["decision"]["allowed"] is False, (argv, plan["decision"])
