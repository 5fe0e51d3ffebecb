"""DeepSeekEyes is installable as a package, and every capability works after install.

The wheel and sdist are built from this tree (``python -m build``), the wheel is installed
into a fresh virtual environment with its dependencies resolved from its own metadata, and
the installed command is driven as a user would: ``--version``, ``see`` on the example
receipt with the embedded OCR route, and ``browser observe`` on a loopback page (the
browser's Python side comes with the package: ``playwright`` is a dependency, Chromium is
the system's). This is what ``pip install deepseek-eyes`` and ``uvx deepseek-eyes`` run.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import tarfile
import threading
import tomllib
import zipfile
from pathlib import Path

import pytest

from helpers import require_module

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The built artifacts' folder and the fresh environment's bin folder."""
    require_module("build")
    root = tmp_path_factory.mktemp("package")
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],  # noqa: S603
                   check=True, capture_output=True, text=True, timeout=600)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)  # noqa: S603
    (wheel,) = dist.glob("*.whl")
    done = subprocess.run(  # noqa: S603 - the fresh environment's pip, argv list
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return dist, venv / "bin"


def _run(bin_dir: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["DEEPSEEK_EYES_HOME"] = str(home)
    return subprocess.run([str(bin_dir / "deepseek-eyes"), *args], env=env, cwd=home.parent,  # noqa: S603
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_wheel_and_sdist_hold_the_package(installed: tuple[Path, Path]) -> None:
    dist, _ = installed
    (wheel,) = dist.glob(f"deepseek_eyes-{VERSION}-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "deepseek_eyes/py.typed" in names  # type checkers use the package's annotations
    assert "deepseek_eyes/store/db.py" in names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    (sdist,) = dist.glob(f"deepseek_eyes-{VERSION}.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {Path(m.name).relative_to(f"deepseek_eyes-{VERSION}").as_posix()
                   for m in archive.getmembers()}
    assert {"pyproject.toml", "README.md", "src/deepseek_eyes/py.typed"} <= members
    assert not any(m.startswith((".venv", "build/")) for m in members)


def test_the_installed_command_sees_offline(installed: tuple[Path, Path],
                                            tmp_path: Path) -> None:
    _, bin_dir = installed
    home = tmp_path / "home"
    version = _run(bin_dir, home, "--version")
    assert version.returncode == 0, version.stderr
    assert VERSION in version.stdout
    seen = _run(bin_dir, home, "see", str(ROOT / "examples" / "receipt.png"), "--json")
    assert seen.returncode == 0, seen.stderr
    evidence = json.loads(seen.stdout.splitlines()[0])
    assert evidence["route"] == "local"
    assert "TOTAL" in json.dumps(evidence["evidence"])


def test_the_installed_command_drives_the_browser(installed: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    _, bin_dir = installed
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<title>Installed</title><button>Pay</button>")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(site))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "eyes.toml"
    config.write_text("[browser]\nallow_private_network = true\n")
    try:
        observed = _run(bin_dir, tmp_path / "home", "--config", str(config), "browser",
                        "observe", f"http://127.0.0.1:{server.server_port}/", "--json")
    finally:
        server.shutdown()
        server.server_close()
    assert observed.returncode == 0, observed.stdout + observed.stderr
    state = json.loads(observed.stdout)
    assert state["title"] == "Installed"
    assert "Pay" in json.dumps(state["observation"])
