"""The embedded local route: offline OCR with no key and no network.

Engine choice (measured in ``bench/ocr_engines.py``): ``rapidocr`` 3.x on ``onnxruntime``
with its bundled PP-OCRv6 detection and recognition models, the only models it can load
offline. ``rapidocr-onnxruntime`` 1.4 lost word spaces on degraded text and Debian's
tesseract was slower on the same images. The text-direction classifier is off: it costs a
fifth of the time and upside-down text is rare in screens and documents.

Any image is read at full resolution: tiny sides are padded, and an image whose long side
exceeds the engine's 2,000-px limit is cut into overlapping tiles (a run for a very long
image, a grid for a large screen) before the engine sees it, instead of being shrunk by the
engine (:mod:`deepseek_eyes.vision.routes.tiling` says how and why); whatever the engine
still raises becomes ``VISION_ROUTE_ENGINE_FAILED``, never a traceback.

The engine is loaded once per process, lazily (about half a second and ~400 MB), and runs in
a worker thread behind a lock, since one ONNX session already uses every core. For full
evidence (not a targeted reread) the layout model of
:mod:`deepseek_eyes.vision.routes.regions` then types the page's regions, in the same
thread, at about a quarter of the OCR read's cost (``bench/structure.py``).

Memory: each read hands the freed heap back to the system (glibc ``malloc_trim``). rapidocr
already turns onnxruntime's CPU arena off, so every tensor is an ordinary malloc and free,
several of them tens of MB; glibc raises its mmap threshold after freeing such blocks, so
later ones land in its heaps (one per ORT worker thread) and stay there when freed, carved
up by the next image's different shapes. Fifty new images of varied sizes took the process
from 290 MB after the first to 700 MB; with the trim it stays at 170-225 MB
(``bench/single_flight.py``). The price: the trim itself takes ~15 ms, and the next read
faults its working memory (~200 MB) back in, 2-8% more CPU time per read in interleaved
runs. It only returns pages that are already free, and unlike a process-wide ``mallopt``
(a fixed mmap threshold also kept RSS flat, but for every allocation in the process) it
changes nothing outside this route. Turning ORT's memory patterns off instead (a session
option rapidocr does not expose) still grew 1.3x. Trimming only above some amount of free
heap saves nothing: every read frees 160-320 MB, so any threshold below that trims after
every read anyway and any above it lets the growth back in.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from deepseek_eyes.errors import RouteError
from deepseek_eyes.settings import LocalRouteSettings
from deepseek_eyes.vision.routes.installed import NotInstalled, installed_version
from deepseek_eyes.vision.routes.regions import LAYOUT_ID, LayoutModel, layout_version
from deepseek_eyes.vision.types import RouteAnswer, Variant, VisionRequest

if TYPE_CHECKING:
    import numpy as np

    from deepseek_eyes.vision.routes.segments import Segment

__all__ = ["LocalOcrEngine", "LocalRoute"]

ENGINE_ID = "rapidocr-3/PP-OCRv6"
#: Bumped whenever tiling, padding, the engine parameters or how the read becomes evidence
#: (structure: layout regions, reading order, refusals, charts; tables; controls) change
#: what is reported (tables-2: one region for a table the layout model also marked, and
#: look answers from a table's cells; coverage-1: the note says what was assessed).
READ_VERSION = "tiles-2;cls=off;rec_batch=1;structure-1;tables-2;controls-2;coverage-1"


@functools.cache
def _engine_version() -> str:
    """The installed rapidocr version: its wheel carries the models, so it names them.
    Read once: the package metadata lookup scans ``site-packages`` (a third of a cache
    hit's time when it ran on every lookup), and a process keeps the version it imported."""
    try:
        return installed_version("rapidocr")
    except NotInstalled:
        return "unknown"


def _heap_trimmer() -> Callable[[], None]:
    """glibc's ``malloc_trim(0)``, or nothing where the C library has none (macOS, musl,
    Windows): there the allocator manages its own release."""
    if not sys.platform.startswith("linux"):
        return lambda: None
    import ctypes  # here, not at module level: ~9 ms of start-up no cached `see` needs

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def release() -> None:
        trim(0)

    return release


class LocalOcrEngine:
    """A process-wide, lazily loaded RapidOCR engine."""

    _instance: LocalOcrEngine | None = None
    _instance_lock = threading.Lock()

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._engine: Any = None
        self._lock = threading.Lock()
        self._release_heap: Callable[[], None] | None = None  # found with the first read

    @classmethod
    def shared(cls, threads: int | None = None) -> LocalOcrEngine:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls(threads)
            return cls._instance

    def _load(self) -> Any:
        if self._engine is None:
            # Imported here: loading onnxruntime and OpenCV costs time the CLI should not pay
            # unless the local route actually runs.
            from rapidocr import RapidOCR

            params: dict[str, Any] = {
                "Global.log_level": "critical",
                "Global.use_cls": False,
                # One line per recognition run: batches pad every crop to the widest one,
                # and on two cores the padding cost more than batching saved (~10%).
                "Rec.rec_batch_num": 1,
            }
            if self._threads:
                params["EngineConfig.onnxruntime.intra_op_num_threads"] = self._threads
            logging.getLogger("RapidOCR").setLevel(logging.CRITICAL)
            self._engine = RapidOCR(params=params)
        return self._engine

    def read(
        self, rgb: np.ndarray[Any, Any], *, full_resolution: bool = True
    ) -> list[Segment]:
        """OCR segments of an RGB image array (H×W×3, uint8) of any shape.

        ``full_resolution=False`` lets the engine shrink a large image of ordinary shape to
        its 2,000-px limit, as before grids were cut (kept for ``bench/ocr_tiles.py``).

        Raises:
            RuntimeError: the engine failed (its own exception types are not part of its
                API, so they are wrapped here rather than escaping as a traceback).
        """
        # numpy and the tiler load with the first read, not with the route: every command
        # builds the local route, and a cached `see` never reads (start-up time).
        import numpy as np

        from deepseek_eyes.vision.routes.tiling import (
            border_colour,
            merge_tiles,
            plan_sheets,
            plan_tiles,
            render_sheet,
            split_sheet,
        )

        height, width = rgb.shape[:2]
        tiles = plan_tiles(width, height, full_resolution=full_resolution)
        fill = border_colour(rgb)
        found: dict[int, list[Segment]] = {}
        with self._lock:
            engine = self._load()
            try:
                for sheet in plan_sheets(tiles):
                    pixels = render_sheet(rgb, tiles, sheet, fill)
                    try:
                        # RapidOCR takes OpenCV's BGR channel order for arrays.
                        result = engine(np.ascontiguousarray(pixels[:, :, ::-1]))
                    except Exception as exc:  # any engine failure, one code
                        raise RuntimeError(f"{type(exc).__name__}: {exc}") from exc
                    found.update(split_sheet(tiles, sheet, _segments(result)))
                    del pixels, result
            finally:
                if self._release_heap is None:
                    self._release_heap = _heap_trimmer()
                self._release_heap()  # see the module docstring: RSS stays flat
        return merge_tiles(tiles, [found[index] for index in range(len(tiles))])


def _segments(result: Any) -> list[Segment]:
    from deepseek_eyes.vision.routes.segments import Segment  # with the first read

    boxes = getattr(result, "boxes", None)
    texts = getattr(result, "txts", None)
    scores = getattr(result, "scores", None)
    if boxes is None or texts is None or scores is None:
        return []
    segments: list[Segment] = []
    for quad, text, score in zip(boxes, texts, scores, strict=False):
        xs = [float(p[0]) for p in quad]
        ys = [float(p[1]) for p in quad]
        cleaned = str(text).strip()
        if cleaned:
            segments.append(Segment(cleaned, min(xs), min(ys), max(xs), max(ys), float(score)))
    return segments


class LocalRoute:
    """The ``local`` route. Probe-exempt: it reads the decoded pixels in-process."""

    kind = "local"
    probe_exempt = True
    box_convention = "xywh-normalized"

    def __init__(
        self, name: str = "local", settings: LocalRouteSettings | None = None,
        engine: LocalOcrEngine | None = None, layout: LayoutModel | None = None,
    ) -> None:
        self._name = name
        self._settings = settings or LocalRouteSettings()
        self._engine = engine or LocalOcrEngine.shared(self._settings.threads)
        self._layout = layout or LayoutModel.shared(self._settings.threads)

    @property
    def name(self) -> str:
        return self._name

    @property
    def _layout_on(self) -> bool:
        """Whether the layout pass runs: asked for, and rapid-layout installed (an
        installation without it still reads text, and says the layout was not assessed)."""
        return self._settings.layout and layout_version() != "absent"

    @property
    def model(self) -> str:
        return ENGINE_ID

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"local\n{ENGINE_ID}".encode()).hexdigest()

    @property
    def answer_fingerprint(self) -> str:
        """The engine, its installed version (and so its models), the layout model and its
        version, how images are fed to them and the confidence cut: any of them changes the
        evidence, so evidence cached before any change is not served as new."""
        layout = f"{LAYOUT_ID}\n{layout_version()}" if self._layout_on else "no-layout"
        identity = (
            f"local\n{ENGINE_ID}\n{_engine_version()}\n{layout}\n"
            f"{READ_VERSION}\n{self._settings.min_confidence}"
        )
        return hashlib.sha256(identity.encode()).hexdigest()

    async def check_health(self) -> None:
        """Nothing to reach: the models ship inside the installed packages."""

    async def call(self, request: VisionRequest) -> RouteAnswer:
        if request.pixels is None:
            raise RouteError(
                "the local route needs decoded pixels", code="VISION_ROUTE_ENGINE_FAILED",
                details={"route": self._name, "purpose": request.purpose},
                operational=False,
            )
        pixels = request.pixels
        width, height = pixels.size

        def run() -> dict[str, object]:
            import numpy as np

            # The readers load with the first read, not with the route: a cached `see`
            # (most of them) never reads, and they were a fifth of its start-up.
            from deepseek_eyes.vision.routes.controls import add_controls, find_controls
            from deepseek_eyes.vision.routes.entries import state_coverage
            from deepseek_eyes.vision.routes.layout import build_evidence, build_target
            from deepseek_eyes.vision.routes.tables import add_tables, find_tables, named_cells

            rgb = np.asarray(pixels.convert("RGB"))
            segments = self._engine.read(rgb)
            if request.variant is Variant.TARGET and request.question:
                # Tables are read for a reread too (geometry only, a few percent of the
                # OCR read): a question naming a row and a column is answered from the cell.
                cells = named_cells(find_tables(rgb, segments))
                return build_target(segments, width, height, request.question, cells=cells)
            evidence = build_evidence(
                segments, width, height, min_confidence=self._settings.min_confidence,
                layout=self._layout.detect(rgb) if self._layout_on else None,
            )
            tables = find_tables(rgb, segments)
            add_tables(evidence, tables, width, height)
            controls = find_controls(rgb, segments, [t.box for t in tables])
            add_controls(evidence, controls, width, height)
            kinds: dict[str, int] = {}
            for control in controls:
                kinds[control.kind] = kinds.get(control.kind, 0) + 1
            searched = bool(segments)  # both searches start from the text read
            state_coverage(
                evidence, layout=self._layout_on,
                tables=len(tables) if searched else None,
                controls=kinds if searched else None,
            )
            return evidence

        try:
            value = await anyio.to_thread.run_sync(run)
        except (RuntimeError, ValueError, OSError, MemoryError) as exc:
            raise RouteError(
                f"the local OCR engine failed: {type(exc).__name__}",
                code="VISION_ROUTE_ENGINE_FAILED",
                details={"route": self._name},
            ) from exc
        return RouteAnswer(value=dict(value), model=ENGINE_ID)

    async def aclose(self) -> None:
        """The shared engine and layout model live for the process."""
