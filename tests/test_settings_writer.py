"""``settings/writer.py``: one writer at a time. Concurrent edits from separate processes
all land (the edit function in forked processes, and the real CLI in ten subprocesses); a
symlinked settings file keeps its link and its target gets the edit, mode kept; a writer
that takes no lock is caught by the hash compare (retried, or ``CONFIG_EDIT_CONFLICT`` with
its content intact); a held lock is ``CONFIG_EDIT_BUSY``; nothing is reported written that
is not in the file."""

from __future__ import annotations

import fcntl
import hashlib
import json
import multiprocessing
import os
import sqlite3
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deepseek_eyes.errors import ConfigError
from deepseek_eyes.mcp_host.settings_file import edit_selectors
from deepseek_eyes.settings.writer import last_written, lock_path, rewrite

SERVER = ('# my servers, edited by hand and by `mcp allow`\n'
          '[[mcp.servers]]\nid = "t"\ntransport = "stdio"\ncommand = "/bin/true"\n')
EDITORS = 10


def _allowed(path: Path, which: str = "allow") -> list[str]:
    entry = tomllib.loads(path.read_text(encoding="utf-8"))["mcp"]["servers"][0]
    return list(entry.get(which, {}).get("tools", []))


def _edit_when_told(path: str, name: str, go: multiprocessing.synchronize.Event) -> None:
    go.wait(60)
    edit_selectors(Path(path), "t", "allow", "tools", (name,))


def test_ten_processes_editing_at_once_all_land(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text(SERVER, encoding="utf-8")
    context = multiprocessing.get_context("fork")
    go = context.Event()
    names = [f"tool_{n}" for n in range(EDITORS)]
    workers = [context.Process(target=_edit_when_told, args=(str(path), name, go))
               for name in names]
    for worker in workers:
        worker.start()
    go.set()  # all at once
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0] * EDITORS
    assert sorted(_allowed(path)) == names
    assert path.read_text(encoding="utf-8").startswith("# my servers")  # comments kept
    assert last_written(path) is not None


def test_ten_cli_edits_at_once_all_land(tmp_path: Path) -> None:
    """As a user (or a script) races them: `mcp allow` and `mcp deny` in ten processes."""
    path = tmp_path / "eyes.toml"
    path.write_text(SERVER, encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(tmp_path / "data")}
    commands = [("allow" if n % 2 else "deny", f"tool_{n}") for n in range(EDITORS)]
    processes = [
        subprocess.Popen(  # noqa: S603 - our own CLI, argv list
            [sys.executable, "-m", "deepseek_eyes", "--config", str(path), "mcp", which, "t",
             name], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for which, name in commands]
    outputs = [p.communicate(timeout=180) for p in processes]
    results = [(p.returncode, out, err) for p, (out, err) in zip(processes, outputs,
                                                                 strict=True)]
    assert [r[0] for r in results] == [0] * EDITORS, [r[2] for r in results]
    assert sorted(_allowed(path)) == sorted(n for w, n in commands if w == "allow")
    assert sorted(_allowed(path, "deny")) == sorted(n for w, n in commands if w == "deny")
    # The audit says each edit's hashes as it saw them under the lock: one unbroken chain
    # of versions from the file's first to its last.
    conn = sqlite3.connect(tmp_path / "data" / "eyes.db")
    rows = [json.loads(r[0]) for r in conn.execute(
        "SELECT details FROM audit WHERE kind = 'settings.change'")]
    conn.close()
    after = {r["before_sha256"]: r["after_sha256"] for r in rows}
    assert len(rows) == len(after) == EDITORS
    version = hashlib.sha256(SERVER.encode()).hexdigest()
    for _ in range(EDITORS):
        version = after[version]
    assert version == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_symlinked_file_keeps_its_link_and_its_target_gets_the_edit(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "deepseek-eyes.toml"
    target.write_text(SERVER, encoding="utf-8")
    target.chmod(0o640)
    config = tmp_path / "config"
    config.mkdir()
    link = config / "deepseek-eyes.toml"
    link.symlink_to(Path("..") / "dotfiles" / "deepseek-eyes.toml")

    edit_selectors(link, "t", "allow", "tools", ("a",))

    assert link.is_symlink()
    assert os.readlink(link) == str(Path("..") / "dotfiles" / "deepseek-eyes.toml")
    assert _allowed(target) == ["a"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert lock_path(link) == dotfiles / ".deepseek-eyes.toml.lock"
    assert sorted(p.name for p in config.iterdir()) == ["deepseek-eyes.toml"]  # no temp left
    assert sorted(p.name for p in dotfiles.iterdir()) == [
        ".deepseek-eyes.toml.lock", "deepseek-eyes.toml"]


def test_a_writer_without_the_lock_is_caught_and_the_change_made_again(
        tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text("a = 1\n", encoding="utf-8")
    renders: list[str | None] = []

    def render(text: str | None) -> str:
        renders.append(text)
        return (text or "") + "ours = true\n"

    def intrude(_tmp: Path) -> None:
        if len(renders) == 1:  # an editor saves between our read and our replace
            path.write_text("a = 1\nhand = true\n", encoding="utf-8")

    written = rewrite(path, render, check=intrude)
    assert written.attempts == 2
    assert renders == ["a = 1\n", "a = 1\nhand = true\n"]
    assert path.read_text(encoding="utf-8") == "a = 1\nhand = true\nours = true\n"
    assert last_written(path) == written.sha256


def test_a_file_that_keeps_changing_is_a_conflict_and_nothing_is_written(
        tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text("n = 0\n", encoding="utf-8")
    count = 0

    def intrude(_tmp: Path) -> None:
        nonlocal count
        count += 1
        path.write_text(f"n = {count}\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        rewrite(path, lambda text: (text or "") + "ours = true\n", check=intrude, attempts=3)
    assert caught.value.code == "CONFIG_EDIT_CONFLICT"
    assert caught.value.details["attempts"] == 3
    assert path.read_text(encoding="utf-8") == "n = 3\n"  # theirs, whole; ours not claimed
    assert sorted(p.name for p in tmp_path.iterdir()) == [".eyes.toml.lock", "eyes.toml"]


def test_a_held_lock_is_busy_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text("a = 1\n", encoding="utf-8")
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another edit, mid-way
        with pytest.raises(ConfigError) as caught:
            rewrite(path, lambda text: "b = 2\n", lock_timeout=0.05)
    finally:
        os.close(fd)
    assert caught.value.code == "CONFIG_EDIT_BUSY"
    assert path.read_text(encoding="utf-8") == "a = 1\n"
    assert rewrite(path, lambda text: "b = 2\n").changed  # free again: it goes through


def test_a_refused_change_writes_nothing_and_a_no_op_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "eyes.toml"
    path.write_text(SERVER, encoding="utf-8")
    before = path.stat()
    with pytest.raises(ConfigError) as caught:
        edit_selectors(path, "t", "allow", "prompts", ("*",))  # a bare * is invalid
    assert caught.value.code == "CONFIG_INVALID"
    assert path.read_text(encoding="utf-8") == SERVER
    edit_selectors(path, "t", "allow", "tools", ("a",))
    edited = path.stat()
    assert edited.st_ino != before.st_ino  # replaced by a rename
    edit_selectors(path, "t", "allow", "tools", ("a",))  # already there: nothing to write
    assert path.stat().st_ino == edited.st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == [".eyes.toml.lock", "eyes.toml"]


def test_a_new_file_is_private_and_an_unwritable_directory_is_a_coded_error(
        tmp_path: Path) -> None:
    path = tmp_path / "new" / "eyes.toml"
    written = rewrite(path, lambda text: "a = 1\n")
    assert written.before is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:  # its directory is a file: even root fails
        rewrite(blocker / "eyes.toml", lambda text: "a = 1\n")
    assert caught.value.code == "CONFIG_WRITE_FAILED"
