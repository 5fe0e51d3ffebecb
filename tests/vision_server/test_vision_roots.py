"""The served roots: what ``vision serve`` may read, and the code of each refusal."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from deepseek_eyes.errors import DeepSeekEyesError, ImageError, VisionError, VisionPathError
from deepseek_eyes.vision_server.images import names_a_path, parse_image_ref
from deepseek_eyes.vision_server.roots import NO_ROOTS, ServedRoots, _inside, roots_from_uris

PNG = b"\x89PNG\r\n\x1a\n" + b"rest of a png"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.png").write_bytes(PNG)
    (root / "sub" / "b.png").write_bytes(PNG)
    (tmp_path / "root2").mkdir()
    (tmp_path / "root2" / "c.png").write_bytes(PNG)
    (tmp_path / "secret.png").write_bytes(b"outside")
    return root


def code_of(roots: ServedRoots, text: str, max_bytes: int = 1000) -> str:
    with pytest.raises(DeepSeekEyesError) as caught:
        roots.read(text, max_bytes)
    return caught.value.code


def test_relative_and_absolute_paths_inside_are_read(tree: Path) -> None:
    roots = ServedRoots.of([tree])
    assert roots.read("a.png", 1000) == PNG
    assert roots.read("sub/b.png", 1000) == PNG
    assert roots.read(str(tree / "sub" / "../a.png"), 1000) == PNG  # .. that stays inside


def test_no_root_refuses_every_path(tree: Path) -> None:
    assert code_of(NO_ROOTS, str(tree / "a.png")) == "VISION_PATH_NO_ROOTS"


def test_dotdot_and_absolute_escapes_are_refused(tree: Path) -> None:
    roots = ServedRoots.of([tree])
    assert code_of(roots, "../secret.png") == "VISION_PATH_OUTSIDE_ROOTS"
    assert code_of(roots, "sub/../../secret.png") == "VISION_PATH_OUTSIDE_ROOTS"
    assert code_of(roots, str(tree.parent / "secret.png")) == "VISION_PATH_OUTSIDE_ROOTS"
    assert code_of(roots, "/etc/passwd") == "VISION_PATH_OUTSIDE_ROOTS"


def test_a_sibling_with_the_root_as_prefix_is_outside(tree: Path) -> None:
    """``/x/root`` must not admit ``/x/root2``: containment is by path components."""
    roots = ServedRoots.of([tree])
    assert code_of(roots, str(tree.parent / "root2" / "c.png")) == "VISION_PATH_OUTSIDE_ROOTS"


def test_symlinks_are_resolved_before_the_check(tree: Path) -> None:
    (tree / "out.png").symlink_to(tree.parent / "secret.png")
    (tree / "outdir").symlink_to(tree.parent)
    (tree / "in.png").symlink_to(tree / "a.png")
    roots = ServedRoots.of([tree])
    assert code_of(roots, "out.png") == "VISION_PATH_OUTSIDE_ROOTS"
    assert code_of(roots, "outdir/secret.png") == "VISION_PATH_OUTSIDE_ROOTS"
    assert roots.read("in.png", 1000) == PNG  # a link that stays inside is fine


def test_a_root_that_is_a_symlink_serves_its_target(tree: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-root"
    link.symlink_to(tree)
    roots = ServedRoots.of([link])
    assert roots.read(str(link / "a.png"), 1000) == PNG
    assert roots.read(str(tree / "a.png"), 1000) == PNG


def test_missing_directories_fifos_and_devices_are_refused(tree: Path) -> None:
    os.mkfifo(tree / "pipe.png")
    roots = ServedRoots.of([tree])
    assert code_of(roots, "nope.png") == "VISION_PATH_NOT_FOUND"
    assert code_of(roots, "sub") == "VISION_PATH_NOT_FILE"
    assert code_of(roots, "pipe.png") == "VISION_PATH_NOT_FILE"  # and it did not block
    devices = ServedRoots.of([Path("/dev")])
    assert code_of(devices, "/dev/null") == "VISION_PATH_NOT_FILE"


def test_a_vanished_file_and_a_directory_named_like_an_image(tree: Path) -> None:
    (tree / "dir.png").mkdir()
    roots = ServedRoots.of([tree])
    # A file that vanishes after the checks: the open fails.
    (tree / "gone.png").write_bytes(PNG)
    resolved = roots.resolve("gone.png")
    (tree / "gone.png").unlink()
    assert resolved.name == "gone.png"
    assert code_of(roots, "gone.png") == "VISION_PATH_NOT_FOUND"
    assert code_of(roots, "dir.png") == "VISION_PATH_NOT_FILE"


def test_names_a_path_by_shape_only() -> None:
    assert names_a_path("a.png")
    assert not names_a_path("sha256:" + "0" * 64)
    assert not names_a_path("data:image/png;base64,@@@")  # not decoded, so not refused here


def test_an_oversize_file_is_refused_before_it_is_read(tree: Path) -> None:
    (tree / "big.png").write_bytes(b"x" * 2000)
    roots = ServedRoots.of([tree])
    with pytest.raises(ImageError) as caught:
        roots.read("big.png", 1000)
    assert caught.value.code == "IMAGE_TOO_LARGE"
    assert caught.value.details["size"] == 2000


def test_refusals_are_permission_errors(tree: Path) -> None:
    with pytest.raises(PermissionError):
        ServedRoots.of([tree]).read("../secret.png", 1000)
    assert issubclass(VisionPathError, VisionError)


def test_client_roots_from_file_uris_only(tree: Path) -> None:
    uris = [tree.as_uri(), "https://example.org/x", "file://otherhost/etc", "file:relative"]
    assert roots_from_uris(uris) == [tree.resolve()]
    spaced = tree / "with space"
    spaced.mkdir()
    assert roots_from_uris([spaced.as_uri()]) == [spaced.resolve()]


def test_roots_add_without_repeats(tree: Path, tmp_path: Path) -> None:
    both = ServedRoots.of([tree]) + ServedRoots.of([tree, tmp_path / "root2"])
    assert both.roots == (tree.resolve(), (tmp_path / "root2").resolve())


# ----------------------------------------------------------------------- image refs


def test_image_refs_by_shape() -> None:
    digest = "AB" * 32
    assert parse_image_ref(digest, 100).sha256 == digest.lower()
    assert parse_image_ref("sha256:" + digest, 100).sha256 == digest.lower()
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert parse_image_ref(url, 100).data == PNG
    assert parse_image_ref("shots/a.png", 100).path == "shots/a.png"
    assert parse_image_ref("ab" * 31, 100).path == "ab" * 31  # 62 hex digits: a name


@pytest.mark.parametrize("url", [
    "data:text/plain;base64,aGVsbG8=",       # not an image type
    "data:image/png,rawbytes",                # not base64
    "data:image/png;base64,@@@@",             # bad base64
])
def test_malformed_data_urls(url: str) -> None:
    with pytest.raises(VisionError) as caught:
        parse_image_ref(url, 100)
    assert caught.value.code == "VISION_DATA_URL_INVALID"


def test_a_data_url_over_the_limit_is_refused_by_its_length() -> None:
    url = "data:image/png;base64," + base64.b64encode(b"x" * 300).decode()
    with pytest.raises(ImageError) as caught:
        parse_image_ref(url, 100)
    assert caught.value.code == "IMAGE_TOO_LARGE"


@pytest.mark.parametrize("text", ["", "   ", "a\x00b", "x" * 5000])
def test_unusable_refs(text: str) -> None:
    with pytest.raises(VisionError) as caught:
        parse_image_ref(text, 100)
    assert caught.value.code == "VISION_IMAGE_REF_INVALID"


def test_protected_directories_stay_refused_when_roots_are_added(tree: Path) -> None:
    data = tree / "sub"
    served = ServedRoots.of([tree]).protecting([data])
    assert code_of(served, "sub/b.png") == "VISION_PATH_OUTSIDE_ROOTS"
    client = ServedRoots.of([tree.parent / "root2"])
    for merged in (served + client, client + served):
        assert code_of(merged, str(data / "b.png")) == "VISION_PATH_OUTSIDE_ROOTS"
        assert merged.read("a.png" if merged.roots[0] == tree else str(tree / "a.png"),
                           1000) == PNG


@pytest.mark.parametrize("path", ["/srv/img", "/srv/img/a.png", "/srv/img2", "/srv/im",
                                  "/srv", "/", "/other/srv/img", "srv/img", "img/a", ".",
                                  "img"])
@pytest.mark.parametrize("root", ["/srv/img", "/srv", "/", "img", "."])
def test_inside_is_path_equality_or_is_relative_to(path: str, root: str) -> None:
    """``_inside`` compares parts, never text: ``/srv/img`` does not hold ``/srv/img2``."""
    expected = Path(path) == Path(root) or Path(path).is_relative_to(Path(root))
    assert _inside(Path(path), (Path(root),)) is expected
    assert _inside(Path(path), (Path("/elsewhere"), Path(root))) is expected
