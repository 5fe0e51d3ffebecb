"""The commands that only look work on a read-only copy of a data directory and change
nothing in it: ``sessions list|show``, ``usage``, ``audit verify|show`` (a backup or a
forensic copy is often read-only; these once failed with "cannot create the data
directory", or migrated and wrote a WAL)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from deepseek_eyes.home import DataHome
from deepseek_eyes.store.events import SessionStore, TurnRecord
from deepseek_eyes.usage import ProviderUsage, UsageCategory


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` (itself too) with its mode, size and mtime: as root, a
    write to a read-only file succeeds, so "nothing changed" is what proves nothing wrote."""
    return {str(p.relative_to(root)): (p.stat().st_mode, p.stat().st_size, p.stat().st_mtime_ns)
            for p in [root, *sorted(root.rglob("*"))]}


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(home)}
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "deepseek_eyes", *args], env=env, capture_output=True,
        text=True, timeout=60, check=False)


def test_looking_commands_read_a_read_only_copy_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    with DataHome(root) as home:
        sessions = SessionStore(home.db)
        sessions.append("s1", [{"role": "user", "content": "hello"}], create="test")
        sessions.append("s1", [{"role": "assistant", "content": "hi"}], turn_id="t1",
                        turn=TurnRecord("t1", "s1", 1.0, 2.0, "m", "text", "ok", None, {}))
        home.usage.record_exact(UsageCategory.FINAL, ProviderUsage(10, 2), source="t",
                                model="m")
        home.seal()
    for path in [root, *root.rglob("*")]:  # read-only, as a copied backup would be
        mode = stat.S_IMODE(path.stat().st_mode)
        path.chmod(mode & ~0o222)
    before = _snapshot(root)
    try:
        listed = _run(root, "sessions", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [s["id"] for s in json.loads(listed.stdout)] == ["s1"]
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
        missing = _run(root, "sessions", "show", "nope")
        assert missing.returncode != 0
        assert "STORE_SESSION_NOT_FOUND" in missing.stderr
        # Nothing created (no -wal, no -shm, no keyring), nothing changed.
        assert _snapshot(root) == before
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def test_looking_at_a_data_directory_that_does_not_exist_creates_none(tmp_path: Path) -> None:
    root = tmp_path / "never-made"
    listed = _run(root, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    usage = _run(root, "usage", "--json")
    assert usage.returncode == 0, usage.stderr
    assert json.loads(usage.stdout) == {"exact": {}, "estimated": {}}
    assert not root.exists()
