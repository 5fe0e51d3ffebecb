"""Red team, issue #19 item 5: links inside a served root or an upload root.

A hard link has no other path to resolve: inside a root it can be a second name of the
database, its WAL, the audit keyring or another session's blob. Every kind of link is
made *after* the roots were configured, then read through the real readers — the
``vision serve`` service's roots and ``browser_upload``'s file check — with hard links
allowed and not. The data directory's files are refused either way; a plain file with one
link still reads.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepseek_eyes.browser.actions import _upload_files
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.errors import BrowserPolicyError, VisionPathError
from deepseek_eyes.home import DataHome
from deepseek_eyes.settings import BrowserSettings, Settings
from deepseek_eyes.vision.bridge import VisionBridge
from deepseek_eyes.vision_server.roots import ServedRoots
from deepseek_eyes.vision_server.service import VisionService
from vision.loopback import LoopbackVisionServer, solid_png

DATA_KINDS = ("db", "wal", "shm", "keyring", "blob")
KINDS = (*DATA_KINDS, "outside", "symlink_db", "symlink_outside")
COUNTER = itertools.count()


@dataclass
class Rig:
    home: DataHome
    root: Path
    outside: Path
    blob: Path
    bridge: VisionBridge

    def service(self, allow: bool) -> VisionService:
        current = self.bridge.settings
        serve = current.vision.serve.model_copy(update={"allow_hard_links": allow})
        self.bridge.settings = current.model_copy(
            update={"vision": current.vision.model_copy(update={"serve": serve})})
        return VisionService(self.bridge, ServedRoots.of([self.root]))

    def browser(self, allow: bool) -> BrowserService:
        browser = BrowserSettings(upload_roots=(self.root,), upload_allow_hard_links=allow)
        return BrowserService(browser, downloads_dir=self.home.root / "browser" / "downloads",
                              blobs=self.home.blobs)

    def target(self, kind: str) -> Path:
        home = self.home.root
        return {"db": home / "eyes.db", "wal": home / "eyes.db-wal",
                "shm": home / "eyes.db-shm", "keyring": home / "audit" / "keyring.json",
                "blob": self.blob, "outside": self.outside, "symlink_db": home / "eyes.db",
                "symlink_outside": self.outside}[kind]

    def link(self, kind: str) -> Path:
        """A new name inside the root for ``kind``'s file, made now."""
        name = self.root / f"{kind}-{next(COUNTER)}.png"
        target = self.target(kind)
        assert target.is_file(), target
        if kind.startswith("symlink"):
            name.symlink_to(target)
        else:
            os.link(target, name)
        return name


@pytest.fixture
def rig(tmp_path: Path, loopback: LoopbackVisionServer) -> Iterator[Rig]:
    settings = Settings.model_validate({"vision": {"routes": [{
        "name": "loop", "base_url": loopback.url("healthy~links"), "model": "vision-1"}],
        "route_priority": ["loop"]}})
    home = DataHome.open(settings)
    home.audit_keys()  # the keyring exists, as after any audited run
    home.db.execute("CREATE TABLE IF NOT EXISTS probe (x)")  # the WAL and SHM exist
    blob = home.blobs.path_for(home.blobs.put(solid_png(8, 8, (200, 10, 10))).sha256)
    root = tmp_path / "served"
    root.mkdir()
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(solid_png(4, 4, (1, 2, 3)))
    bridge = VisionBridge(settings, home)
    yield Rig(home, root, outside, blob, bridge)
    anyio.run(bridge.aclose)
    home.close()


EXAMPLES = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def expected(kind: str, allow: bool) -> set[str] | None:
    """The refusal ``reason`` a link of ``kind`` may get (None: read; "path": by path).
    A blob's second name, hard links refused, is refused before its bytes are read (and
    hashed), so as a hard link."""
    if kind.startswith("symlink"):
        return {"path"}
    if kind in DATA_KINDS:
        return {"data_directory"} if allow or kind != "blob" else {"hard_link"}
    return None if allow else {"hard_link"}


@EXAMPLES
@given(kind=st.sampled_from(KINDS), allow=st.booleans())
def test_links_in_a_vision_serve_root(rig: Rig, kind: str, allow: bool) -> None:
    service = rig.service(allow)  # configured first; the link comes after
    link = rig.link(kind)
    want = expected(kind, allow)
    if want is None:
        assert service.roots.read(str(link), 1 << 20) == rig.outside.read_bytes()
        return
    with pytest.raises(VisionPathError) as refused:
        service.roots.read(str(link), 1 << 20)
    assert refused.value.code == "VISION_PATH_OUTSIDE_ROOTS"
    if want != {"path"}:
        assert refused.value.details["reason"] in want


@EXAMPLES
@given(kind=st.sampled_from(KINDS), allow=st.booleans())
def test_links_in_an_upload_root(rig: Rig, kind: str, allow: bool) -> None:
    browser = rig.browser(allow)
    link = rig.link(kind)
    want = expected(kind, allow)
    if want is None:
        (sent,) = _upload_files(browser, [str(link)])
        assert sent["buffer"] == rig.outside.read_bytes()
        assert sent["name"] == link.name
        return
    with pytest.raises(BrowserPolicyError) as refused:
        _upload_files(browser, [str(link)])
    assert refused.value.code == "BROWSER_UPLOAD_REFUSED"
    reason = refused.value.details["reason"]
    assert reason in ({"outside_roots"} if want == {"path"} else want)


def test_a_link_made_to_a_file_after_it_was_read_is_refused(rig: Rig) -> None:
    service = rig.service(False)
    browser = rig.browser(False)
    photo = rig.root / "photo.png"
    photo.write_bytes(solid_png(6, 6, (9, 9, 9)))
    assert service.roots.read(str(photo), 1 << 20) == photo.read_bytes()
    assert _upload_files(browser, [str(photo)])[0]["buffer"] == photo.read_bytes()
    os.link(photo, rig.outside.parent / "second-name.png")  # now it has two names
    with pytest.raises(VisionPathError) as refused:
        service.roots.read(str(photo), 1 << 20)
    assert refused.value.details["reason"] == "hard_link"
    with pytest.raises(BrowserPolicyError) as upload:
        _upload_files(browser, [str(photo)])
    assert upload.value.details["reason"] == "hard_link"


def test_a_blob_of_another_session_is_refused_even_when_hard_links_are_allowed(
        rig: Rig) -> None:
    """Two names, both allowed, but one of them is the blob store's: identity decides."""
    service = rig.service(True)
    link = rig.link("blob")
    assert os.stat(link).st_ino == os.stat(rig.blob).st_ino
    with pytest.raises(VisionPathError) as refused:
        service.roots.read(str(link), 1 << 20)
    assert refused.value.details["reason"] == "data_directory"
    assert rig.blob.name not in refused.value.message  # its digest is not disclosed


@pytest.mark.anyio
async def test_see_refuses_a_keyring_link_and_reads_a_plain_file(rig: Rig) -> None:
    service = rig.service(False)
    try:
        keyring = rig.link("keyring")
        with pytest.raises(VisionPathError) as refused:
            await service.see(str(keyring))
        assert refused.value.details["reason"] == "data_directory"
        plain = rig.root / "plain.png"
        plain.write_bytes(solid_png(10, 10, (0, 128, 0)))
        seen = await service.see(str(plain))
        assert seen.image.sha256 == hashlib.sha256(plain.read_bytes()).hexdigest()
        data_url = "data:image/png;base64," + base64.b64encode(plain.read_bytes()).decode()
        assert (await service.see(data_url)).image.sha256 == seen.image.sha256
    finally:
        await rig.bridge.aclose()  # on this test's event loop, which its client belongs to
