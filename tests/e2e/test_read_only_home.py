"""The commands that only look work on a read-only copy of a data directory and change
nothing in it: ``sessions list|show``, ``usage``, ``audit verify|show|export`` (a backup or a
forensic copy is often read-only; these once failed with "cannot create the data
directory", migrated and wrote a WAL, or sealed a checkpoint first). A command that must
write (``serve``) stops at start with ``STORE_READ_ONLY`` instead of failing later.

Two kinds of read-only copy: one whose modes are taken away (``chmod -R a-w``; as root a
write would still succeed, so "nothing changed" is what proves nothing wrote), and a
read-only bind mount of one copied while its writer was running (a WAL and its index
beside the database), where nothing can write at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from deepseek_eyes.home import DataHome
from deepseek_eyes.store.events import SessionStore, TurnRecord
from deepseek_eyes.usage import ProviderUsage, UsageCategory
from helpers import mount_read_only

Snapshot = dict[str, tuple[int, int, int, str]]


def _snapshot(root: Path) -> Snapshot:
    """Every path under ``root`` (itself too) with its mode, size, mtime and, for a file,
    the SHA-256 of its bytes."""
    out: Snapshot = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns,
                                            digest)
    return out


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    env.pop("DEEPSEEK_EYES_GATEWAY_KEY", None)
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "deepseek_eyes", *args], env=env, capture_output=True,
        text=True, timeout=60, check=False)


def _fill(home: DataHome) -> None:
    sessions = SessionStore(home.db)
    sessions.append("s1", [{"role": "user", "content": "hello"}], create="test")
    sessions.append("s1", [{"role": "assistant", "content": "hi"}], turn_id="t1",
                    turn=TurnRecord("t1", "s1", 1.0, 2.0, "m", "text", "ok", None, {}))
    home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10, 2), source="t", model="m")
    home.seal()


def _looks(root: Path, exports: Path) -> None:
    """Every command that only looks, on ``root``: each works and says what is there."""
    listed = _run(root, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)["sessions"]] == ["s1"]
    shown = _run(root, "sessions", "show", "s1", "--json")
    assert shown.returncode == 0, shown.stderr
    assert [e["role"] for e in json.loads(shown.stdout)["events"]] == ["user", "assistant"]
    usage = _run(root, "usage", "--json")
    assert usage.returncode == 0, usage.stderr
    assert json.loads(usage.stdout)["exact"]["final"]["prompt_tokens"] == 10
    verified = _run(root, "audit", "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    turn = _run(root, "audit", "show", "t1", "--json")
    assert turn.returncode == 0, turn.stderr
    assert json.loads(turn.stdout)["turn"]
    out = exports / "audit.jsonl"
    exported = _run(root, "audit", "export", str(out), "--json")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    summary = json.loads(exported.stdout)
    assert summary["entries"] == json.loads(verified.stdout)["entries"]
    assert summary["checkpoints"] >= 1
    from_file = _run(root, "audit", "verify", "--file", str(out), "--json")
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
    missing = _run(root, "sessions", "show", "nope")
    assert missing.returncode != 0
    assert "STORE_SESSION_NOT_FOUND" in missing.stderr


def test_looking_commands_read_a_read_only_copy_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    with DataHome(root) as home:
        _fill(home)
    for path in [root, *root.rglob("*")]:  # read-only, as a copied backup would be
        mode = stat.S_IMODE(path.stat().st_mode)
        path.chmod(mode & ~0o222)
    before = _snapshot(root)
    try:
        _looks(root, tmp_path)
        # Nothing created (no -wal, no -shm, no keyring, no checkpoint), nothing changed.
        assert _snapshot(root) == before
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def test_a_read_only_mount_serves_every_look_and_serve_refuses_at_start(
    tmp_path: Path,
) -> None:
    live, copy = tmp_path / "live", tmp_path / "copies" / "copy"
    home = DataHome(live)
    try:
        _fill(home)
        home.db.flush()
        shutil.copytree(live, copy)  # while its writer runs: the WAL and its index too
    finally:
        home.close()
    assert (copy / "eyes.db-wal").exists()
    with mount_read_only(copy.parent, tmp_path / "mounted") as mounted:
        root = mounted / "copy"
        before = _snapshot(root)
        _looks(root, tmp_path)
        assert _snapshot(root) == before
        served = _run(root, "serve", "--port", "0", "--json")
        assert served.returncode == 1, served.stdout + served.stderr
        error = json.loads(served.stdout)["error"]
        assert error["code"] == "STORE_READ_ONLY"
        assert "cannot create" not in error["message"]
        sealed = _run(root, "audit", "export", str(tmp_path / "sealed.jsonl"), "--seal")
        assert sealed.returncode == 1
        assert sealed.stderr.startswith("error STORE_READ_ONLY: "), sealed.stderr
        assert _snapshot(root) == before


def test_looking_at_a_data_directory_that_does_not_exist_creates_none(tmp_path: Path) -> None:
    root = tmp_path / "never-made"
    listed = _run(root, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"sessions": []}
    usage = _run(root, "usage", "--json")
    assert usage.returncode == 0, usage.stderr
    assert json.loads(usage.stdout) == {"exact": {}, "estimated": {}}
    exported = _run(root, "audit", "export", str(tmp_path / "none.jsonl"))
    assert exported.returncode == 1
    assert exported.stderr.startswith("error AUDIT_NOT_FOUND: ")
    assert not root.exists()
