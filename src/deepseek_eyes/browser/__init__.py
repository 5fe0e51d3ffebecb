"""The browser capability: a headless Chromium (Debian's, through Playwright) as tools.

A model observes a page compactly (one line per control, each with a ``[ref=…]``; headings
for orientation; text summarized; the viewport first) and acts only on the newest state:
every observation has a ``state_id``, an action planned on an older one is refused with a
fresh observation and never executed, and refs are bound to the document they were seen in.
Each action answers with what changed. Screenshots are lossless PNGs identified by their
byte and pixel hashes; the report (v2) records steps, states, assertions and timing.

Modules, one job each: ``snapshot`` (Playwright's aria YAML → tree), ``observe`` (tree →
lines), ``pages`` (the viewport page, then the rest), ``state`` (state ids, refs, deltas),
``session`` (Chromium, tabs, dialogs, downloads, the request router), ``policy`` (where it
may go: the one decision), ``hosts`` (canonical hosts), ``proxy`` (the forward proxy every
request of the browser goes through, where the policy is enforced), ``driver`` (what a
handler acts through: observe, resolve, capture, results), ``actions`` (one handler per
tool), ``service`` (the call: lock, dispatch, evidence, report), ``present`` (texts),
``screenshots``, ``report``, ``tools`` (the tool table), ``server`` (the MCP server). When
pixels reach the model, the result type and the MCP registration are the toolkit's
(:mod:`deepseek_eyes.toolkit`).

This package imports neither vision, nor mcp, nor the terminal, nor the runtime: the
runtime wires visual evidence in through :class:`Describe`.
"""

from deepseek_eyes.browser.calls import Args, ToolResult
from deepseek_eyes.browser.policy import NavigationPolicy
from deepseek_eyes.browser.report import REPORT_SCHEMA
from deepseek_eyes.browser.screenshots import Screenshot
from deepseek_eyes.browser.service import BrowserService
from deepseek_eyes.browser.tools import TOOL_NAMES, TOOLS, BrowserTool
from deepseek_eyes.toolkit.visual import Describe, should_deliver

__all__ = [
    "REPORT_SCHEMA",
    "TOOLS",
    "TOOL_NAMES",
    "Args",
    "BrowserService",
    "BrowserTool",
    "Describe",
    "NavigationPolicy",
    "Screenshot",
    "ToolResult",
    "should_deliver",
]
