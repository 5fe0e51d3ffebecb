"""``scripts/setup.sh`` says one line per step and keeps pip quiet unless pip fails.

Run on a copy of the script and of ``pyproject.toml`` in a temporary directory, with a
stand-in interpreter (``PYTHON``) whose venv's ``pip`` only records that it ran: the real
install would re-point the checkout's editable install and cost minutes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The stand-in: `-c` passes the version check, `-m venv DIR` makes DIR/bin/python (this
# same script), `-m pip install ...` prints like pip, records the call, and fails when
# FAKE_PIP_FAIL is set; `-c` prints FAKE_OPENCV (the headless OpenCV's version, as if both
# OpenCV builds were installed) when it is set.
FAKE_PYTHON = """#!/usr/bin/env bash
case "$1" in
  -c) if [ -n "${FAKE_OPENCV:-}" ]; then echo "$FAKE_OPENCV"; fi; exit 0 ;;
  -m)
    if [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
    if [ "$2" = pip ]; then
      echo "Collecting something"; echo "pip-progress" >&2
      echo "${@:3}" >> "$SETUP_CALLS"
      if [ -n "${FAKE_PIP_FAIL:-}" ]; then echo "ERROR: no matching distribution" >&2; exit 1; fi
      exit 0
    fi ;;
esac
exit 2
"""


def _checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON, encoding="utf-8")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PYTHON": str(fake), "SETUP_CALLS": str(tmp_path / "calls")}
    return root, env


def _setup(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the project's own script, argv list
        ["bash", str(root / "scripts" / "setup.sh"), *args],  # noqa: S607 - bash from PATH
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_each_step_is_one_line_and_pip_stays_quiet(tmp_path: Path) -> None:
    root, env = _checkout(tmp_path)
    first = _setup(root, env)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    lines = first.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        f"setup: creating .venv with {env['PYTHON']}",
        "setup: installing deepseek-eyes and its runtime dependencies",
        "setup: done: .venv/bin/deepseek-eyes is ready",
    ]
    assert "about 200 MB the first time" in lines[1]
    assert "Collecting" not in first.stdout  # pip's own output stayed in its log

    again = _setup(root, env)
    assert again.returncode == 0
    assert again.stdout.startswith("setup: up to date (")
    assert len(again.stdout.splitlines()) == 1

    dev = _setup(root, env, "dev")
    assert dev.returncode == 0
    assert dev.stdout.splitlines()[0] == (
        "setup: installing deepseek-eyes with its runtime and 'dev' dependencies "
        "(pyproject.toml or the extra changed since the last install)")
    calls = (tmp_path / "calls").read_text(encoding="utf-8").splitlines()
    assert calls == ["install --quiet --disable-pip-version-check -e .",
                     "install --quiet --disable-pip-version-check -e .[dev]"]


def test_the_headless_opencv_is_laid_down_last_when_both_builds_came(tmp_path: Path) -> None:
    root, env = _checkout(tmp_path)
    done = _setup(root, {**env, "FAKE_OPENCV": "5.1.0.95"})
    assert done.returncode == 0, done.stderr
    assert "setup: laying the headless OpenCV 5.1.0.95 over the GUI build" in done.stdout
    calls = (tmp_path / "calls").read_text(encoding="utf-8").splitlines()
    assert calls == ["install --quiet --disable-pip-version-check -e .",
                     "install --quiet --disable-pip-version-check --force-reinstall --no-deps "
                     "opencv-python-headless==5.1.0.95"]


def test_a_failing_pip_shows_its_output(tmp_path: Path) -> None:
    root, env = _checkout(tmp_path)
    failed = _setup(root, {**env, "FAKE_PIP_FAIL": "1"})
    assert failed.returncode == 1
    assert "ERROR: no matching distribution" in failed.stderr
    assert "Collecting something" in failed.stderr
    assert failed.stderr.rstrip().endswith("setup: pip failed installing . (its output is above)")
    assert not (root / ".venv" / ".deepseek-eyes-installed").exists()
