"""vision/routes/installed.py: a wheel's version read from its dist-info, always the one
``importlib.metadata`` gives (the local route's fingerprints carry it)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from deepseek_eyes.vision.routes import installed
from deepseek_eyes.vision.routes.installed import NotInstalled, installed_version


@pytest.mark.parametrize("name", ["rapidocr", "rapid-layout", "rapid_layout", "pydantic",
                                  "typing-extensions", "PyYAML"])
def test_installed_version_is_importlib_metadata_s(name: str) -> None:
    assert installed._from_dist_info(name) is not None  # read from the dist-info itself
    assert installed_version(name) == importlib.metadata.version(name)


def test_not_installed_is_refused() -> None:
    with pytest.raises(NotInstalled):
        installed_version("no-such-distribution-here")


def _dist(root: Path, dirname: str, metadata: str) -> None:
    info = root / dirname
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata, encoding="utf-8")


def test_first_on_sys_path_wins_and_egg_goes_to_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Demo_Pkg-2.0.dist-info",
          "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 2.0\n\nVersion: 9\n")
    _dist(second, "demo_pkg-1.0.dist-info", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing.zip"), str(first), str(second)])
    assert installed_version("demo.pkg") == "2.0" == importlib.metadata.version("demo.pkg")
    egg = tmp_path / "egg"
    (egg / "eggy.egg-info").mkdir(parents=True)
    (egg / "eggy.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 1.1\nName: eggy\nVersion: 0.3\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(egg)])
    assert installed._from_dist_info("eggy") is None
    assert installed_version("eggy") == "0.3"
