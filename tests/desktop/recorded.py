"""A native helper that answers from a recorded AT-SPI session (``recorded/*.json``), so the
service's guards, deltas and presentation are tested without a display, through the real
:class:`~deepseek_eyes.desktop.native.LinuxBackend` parsing. Every request is logged, so a
test can prove that a refusal sent no input (no ``type``, ``act``, ``click``, ``press``)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from deepseek_eyes.audit import AuditLog
from deepseek_eyes.desktop.native import LinuxBackend
from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.errors import DesktopError
from deepseek_eyes.settings import DesktopSettings

__all__ = ["INPUT_OPS", "RecordedHelper", "recorded_service"]

RECORDED = Path(__file__).with_name("recorded")
INPUT_OPS = frozenset({"type", "act", "click", "press", "scroll", "focus"})


class RecordedHelper:
    def __init__(self, name: str = "gtk_window") -> None:
        data = json.loads((RECORDED / f"{name}.json").read_text("utf-8"))
        self.windows: dict[str, Any] = data["windows"]
        self.tree: dict[str, Any] = data["tree"]
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.gone: set[str] = set()  # object paths that are destroyed
        self.pixel = 200  # the grey level of every captured pixel
        self.timeout = 5.0
        self.focus_after_focusing: int | None = None  # a thief's window id

    @property
    def inputs(self) -> list[str]:
        return [op for op, _ in self.log if op in INPUT_OPS]

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def window(self, index: int = 0) -> dict[str, Any]:
        item: dict[str, Any] = self.windows["windows"][index]
        return item

    def add_window(self, **fields: Any) -> dict[str, Any]:
        item = {**copy.deepcopy(self.window()), **fields}
        self.windows["windows"].append(item)
        return item

    async def request(self, op: str, *, timeout: float | None = None,
                      **fields: Any) -> dict[str, Any]:
        self.log.append((op, fields))
        if op == "windows":
            return copy.deepcopy(self.windows)
        if op == "tree":
            nodes = [n for n in self.tree["nodes"] if n["path"] not in self.gone]
            limit = fields["max_elements"]
            return {**self.tree, "nodes": nodes[:limit], "truncated": len(nodes) > limit,
                    "reason": "max_elements" if len(nodes) > limit else None}
        if op == "element":
            node = next((n for n in self.tree["nodes"] if n["path"] == fields["path"]), None)
            if node is None or fields["path"] in self.gone:
                return {"gone": True}
            return {"gone": False, "node": node}
        if op == "capture":
            w, h = fields["w"], fields["h"]
            raw = bytes([self.pixel, self.pixel, self.pixel, 0]) * (w * h)
            return {"w": w, "h": h, "data": base64.b64encode(raw).decode()}
        if op == "focus":
            return {"focus_xid": self.focus_after_focusing or fields["xid"]}
        if op == "type":
            if self.focus_after_focusing is not None:
                raise DesktopError("focus stolen", code="DESKTOP_FOCUS_LOST")
            return {"typed": len(fields["text"]), "via": "atspi"}
        if op == "act":
            return {"action": "click"}
        return {}


def recorded_service(helper: RecordedHelper, *, audit: AuditLog | None = None,
                     **settings: Any) -> DesktopService:
    def factory(desktop: DesktopSettings, env: Any) -> LinuxBackend:
        backend = LinuxBackend(desktop.python, env, timeout=5)
        backend.helper = helper  # type: ignore[assignment]
        return backend

    return DesktopService(DesktopSettings.model_validate({"settle": 0, **settings}),
                          backend_factory=factory, environment={"DISPLAY": ":999"},
                          audit=audit, owner="test")
