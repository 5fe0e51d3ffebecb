"""``deepseek-eyes see`` and ``deepseek-eyes routes``.

``see -`` reads one image from standard input, under the same byte limit as a file.
``--overlay OUT`` is checked before any image is read: its directory must exist (a typo in
a path never creates a directory tree) and its extension names the format written.

On a terminal, an image that takes over a second (OCR on first use, a slow route) shows its
step on standard error (:mod:`deepseek_eyes.cli.progress`); ``routes --probe`` does too.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from deepseek_eyes.cli.common import dump_json, open_bridge
from deepseek_eyes.cli.progress import Progress, progress_on_stderr
from deepseek_eyes.cli.render import render_evidence, render_routes
from deepseek_eyes.errors import CliError, DeepSeekEyesError, ImageError
from deepseek_eyes.vision.intake.decode import ImageLimits, decode_image, read_image_file

if TYPE_CHECKING:
    from deepseek_eyes.vision.bridge import VisionBridge
    from deepseek_eyes.vision.routing.router import Acquisition

__all__ = ["OVERLAY_FORMATS", "routes_command", "see_command"]

STDIN = "-"

#: Overlay extension -> the Pillow format it is written in.
OVERLAY_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP"}


def _overlay_format(base: Path) -> str:
    """Raises:
        CliError: ``CLI_OUTPUT_FORMAT_UNKNOWN``, ``CLI_OUTPUT_DIR_MISSING``.
    """
    fmt = OVERLAY_FORMATS.get(base.suffix.lower())
    if fmt is None:
        raise CliError(
            f"cannot write an overlay named {base.name!r}: use .png, .jpg, .jpeg or .webp",
            code="CLI_OUTPUT_FORMAT_UNKNOWN", details={"path": str(base)},
        )
    parent = base.parent
    if not parent.is_dir():
        raise CliError(
            f"the overlay's directory {parent} does not exist; create it first",
            code="CLI_OUTPUT_DIR_MISSING", details={"path": str(base)},
        )
    return fmt


def _overlay_path(base: Path, index: int, count: int) -> Path:
    if count == 1:
        return base
    return base.with_name(f"{base.stem}.{index + 1}{base.suffix}")


def _write_overlay(pixels: Any, evidence: dict[str, Any], out: Path) -> None:
    from PIL import Image

    from deepseek_eyes.vision.evidence.overlay import draw_overlay

    fmt = OVERLAY_FORMATS[out.suffix.lower()]
    if fmt == "PNG":
        draw_overlay(pixels, evidence, out)
        return
    # draw_overlay writes PNG only; re-encode its output in the format OUT names.
    with tempfile.TemporaryDirectory() as tmp:
        drawn = Path(tmp) / "overlay.png"
        draw_overlay(pixels, evidence, drawn)
        with Image.open(drawn) as image:
            image.save(out, format=fmt)


def _read(path: Path, limits: ImageLimits) -> bytes:
    """The image's bytes, from the file or, for ``-``, from standard input.

    Raises:
        ImageError: ``IMAGE_TOO_LARGE`` over the byte limit, ``IMAGE_UNREADABLE``.
    """
    if str(path) != STDIN:
        return read_image_file(path, limits)
    data = sys.stdin.buffer.read(limits.max_bytes + 1)
    if len(data) > limits.max_bytes:
        raise ImageError(
            f"The image on standard input is over the limit of {limits.max_bytes:,} bytes.",
            code="IMAGE_TOO_LARGE", details={"path": STDIN, "limit": limits.max_bytes},
        )
    return data


def _image_json(path: Path, acquisition: Acquisition) -> dict[str, Any]:
    meta = acquisition.image
    record = acquisition.record
    return {
        "image": {
            "path": str(path),
            "sha256": meta.sha256,
            "pixel_sha256": meta.pixel_sha256,
            "width": meta.width,
            "height": meta.height,
            "media_type": meta.media_type,
        },
        "route": record.route,
        "model": record.model,
        "cached": acquisition.cached,
        "record_sha256": record.record_sha256,
        "repairs": list(record.repairs),
        "evidence": record.evidence,
        "attempts": list(acquisition.attempts),
    }


async def _see_one(
    bridge: VisionBridge, path: Path, route: str | None, as_json: bool, overlay: Path | None,
    progress: Progress, label: str,
) -> bool:
    limits = ImageLimits.from_settings(bridge.settings.image)
    try:
        progress.update(f"{label}: reading the file…")
        data = _read(path, limits)
        progress.update(f"{label}: getting evidence…")
        acquisition = await bridge.see(data, route=route)
    except DeepSeekEyesError as exc:
        with progress.hidden():
            if as_json:
                click.echo(dump_json({"image": {"path": str(path)}, "error": exc.to_dict()}))
            else:
                click.echo(f"error {exc.code}: {path}: {exc.message}", err=True)
                for failure in exc.details.get("failures", []):
                    click.echo(f"  route {failure['route']}: {failure['code']}", err=True)
        return False
    if overlay is not None:
        progress.update(f"{label}: drawing the overlay…")
        decoded = decode_image(data, limits, sha256=acquisition.image.sha256)
        _write_overlay(decoded.pixels, acquisition.record.evidence, overlay)
    with progress.hidden():
        if as_json:
            click.echo(dump_json(_image_json(path, acquisition)))
        else:
            click.echo(render_evidence(path, acquisition))
            if overlay is not None:
                click.echo(f"  overlay  {overlay}")
    return True


@click.command("see")
@click.argument("images", nargs=-1, required=True,
                type=click.Path(path_type=Path, allow_dash=True))
@click.option("--route", default=None,
              help="Try this route first; the configured order follows as failover.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per image, one per line.")
@click.option(
    "--overlay",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Write the image with OCR/region boxes drawn, as .png, .jpg or .webp (OUT.N.png "
    "for several images). The directory must exist.",
)
@click.pass_context
def see_command(
    ctx: click.Context, images: tuple[Path, ...], route: str | None, as_json: bool,
    overlay: Path | None,
) -> None:
    """Turn each IMAGE into validated visual evidence.

    IMAGE may be - for one image on standard input.
    """
    if sum(1 for path in images if str(path) == STDIN) > 1:
        raise CliError("standard input (-) can be read only once")
    if overlay is not None:
        _overlay_format(overlay)

    async def run(progress: Progress) -> bool:
        ok = True
        async with open_bridge(ctx) as bridge:
            for index, path in enumerate(images):
                target = None if overlay is None else _overlay_path(overlay, index, len(images))
                name = "standard input" if str(path) == STDIN else path.name
                label = f"see {index + 1}/{len(images)} {name}"
                ok = await _see_one(bridge, path, route, as_json, target, progress, label) and ok
        return ok

    with progress_on_stderr(as_json=as_json) as progress:
        ok = asyncio.run(run(progress))
    if not ok:
        sys.exit(1)


@click.command("routes")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--probe", is_flag=True, help="Health-check and pixel-probe every route now.")
@click.pass_context
def routes_command(ctx: click.Context, as_json: bool, probe: bool) -> None:
    """List vision routes with their order, health, circuit and probe state."""

    async def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        async with open_bridge(ctx) as bridge:
            await bridge.router.refresh_routes()  # auto-detected models /models declares
            probes = await bridge.router.probe_all() if probe else None
            return bridge.router.status(), probes

    with progress_on_stderr(as_json=as_json) as progress:
        if probe:
            progress.update("routes: probing every route…")
        status, probes = asyncio.run(run())
    if as_json:
        click.echo(dump_json({"routes": status, "probes": probes}))
    else:
        click.echo(render_routes(status, probes))
    if probes is not None and not all(p["ok"] for p in probes):
        sys.exit(1)
