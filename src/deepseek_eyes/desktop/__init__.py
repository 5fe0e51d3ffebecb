"""The desktop capability: Linux desktop applications as tools (AT-SPI, XTest, X capture).

A model observes the desktop (its windows) or one window (its accessible elements, each
with a ``[ref=…]`` that is a hash of native identity, and bounds in the pixels of the
returned screenshot) and acts only on the newest state: a mutation planned on an older
state is refused and re-observed, never executed. Typing is guarded: target, coordinates,
window agreement, modal dialogs and the keyboard focus are all checked before the first
key is sent. Each action answers with a delta (pixels compared decoded; windows and
elements added, removed and changed field by field).

Modules, one job each: ``model`` (windows, elements, refs), ``backend`` (the platform
protocol), ``native`` (the Linux backend: a client of the native helper),
``linux_native`` (the helper itself, run by Debian's Python), ``headless`` (Xvfb + D-Bus +
AT-SPI), ``state`` (state ids, deltas), ``guards`` (checks before input), ``screenshots``,
``present`` (texts), ``driver`` (what a handler acts through), ``actions`` (one handler per
tool), ``service`` (the call), ``launcher`` (configured apps), ``report``, ``visual`` (thin
states, the pixels-not-decoded marker), ``tools`` (the tool table), ``server`` (the MCP
server). The result type, :class:`Describe` and the MCP registration are the toolkit's.

This package imports neither vision, nor mcp, nor the browser, nor the runtime: the
runtime wires visual evidence in through :class:`Describe`.
"""

from deepseek_eyes.desktop.calls import Args, ToolResult
from deepseek_eyes.desktop.headless import HeadlessDesktop
from deepseek_eyes.desktop.report import REPORT_SCHEMA
from deepseek_eyes.desktop.screenshots import Screenshot
from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.desktop.tools import TOOL_NAMES, TOOLS, DesktopTool
from deepseek_eyes.desktop.visual import PIXELS_NOT_DECODED
from deepseek_eyes.toolkit.visual import Describe, should_deliver

__all__ = [
    "PIXELS_NOT_DECODED",
    "REPORT_SCHEMA",
    "TOOLS",
    "TOOL_NAMES",
    "Args",
    "Describe",
    "DesktopService",
    "DesktopTool",
    "HeadlessDesktop",
    "Screenshot",
    "ToolResult",
    "should_deliver",
]
