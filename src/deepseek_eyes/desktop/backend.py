"""The desktop backend protocol: what the service needs from a platform.

One implementation is built and tested: :class:`~deepseek_eyes.desktop.native.LinuxBackend`
(AT-SPI over D-Bus, XTest, X image capture, through a native helper). Windows (UI
Automation runtime ids, HWNDs) and macOS (Accessibility paths, CoreGraphics window numbers)
would implement the same methods; none is built, because nothing here can run or record
them — see docs/desktop.md.

Every method that names a window or an element fails with ``DESKTOP_TARGET_GONE`` when the
native object no longer exists; none falls back to another target.
"""

from __future__ import annotations

from typing import Any, Protocol

from deepseek_eyes.desktop.model import Box, Capture, Element, Tree, Window, WindowList

__all__ = ["DesktopBackend"]


class DesktopBackend(Protocol):
    platform: str

    async def start(self) -> None:
        """Connect (start the native helper). Raises DesktopError DESKTOP_UNAVAILABLE."""

    async def windows(self) -> WindowList: ...

    async def tree(self, window: Window, *, max_elements: int, time_cap: float) -> Tree: ...

    async def element(self, element: Element) -> Element | None:
        """The element as it is now; None when it is gone."""

    async def capture(self, box: Box) -> Capture: ...

    async def focus(self, window: Window, element: Element | None = None) -> str | None:
        """Give the window (and the element) the keyboard focus; the focused window's ref
        read back afterwards."""

    async def act(self, element: Element, action: str | None = None) -> str: ...

    async def click(self, x: int, y: int, *, button: str = "left", count: int = 1) -> None: ...

    async def scroll(self, x: int, y: int, direction: str, amount: int) -> None: ...

    async def press(self, key: str) -> None: ...

    async def type_text(self, window: Window, text: str, *, element: Element | None = None,
                        point: tuple[int, int] | None = None) -> dict[str, Any]:
        """Focus the window (and the element, or click the point), recheck that the window
        holds the focus, and only then send the text. Raises DesktopGuardError
        DESKTOP_FOCUS_LOST with nothing sent."""

    async def aclose(self) -> None: ...
