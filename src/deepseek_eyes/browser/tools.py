"""The browser's tools, described once: names, JSON schemas, risk and MCP annotations.

The MCP server (:mod:`deepseek_eyes.browser.server`) and the runtime's ``browser`` source
offer exactly these, and :class:`~deepseek_eyes.browser.service.BrowserService` runs them,
so a model meets the same tool whichever way it reaches the browser. Annotations are
truthful: reading the current page is read-only and closed-world; loading a page reaches the
open web; clicking, typing, selecting, pressing keys, uploading and answering dialogs may
submit or delete things on a site, so they are destructive and open-world.
"""

from __future__ import annotations

from deepseek_eyes.toolkit.spec import MOVE, OBSERVE, READ, Annotations, ToolDef, object_schema

__all__ = ["TOOLS", "TOOL_NAMES", "BrowserTool"]

BrowserTool = ToolDef  # the name callers and tests know

# Loading a page reaches the open web; it and moving within a page change no site, so the
# runtime's gate counts them (and closing our own browser) as reads.
_LOAD = Annotations(read_only=False, destructive=False, idempotent=False, open_world=True)
_CLOSE = Annotations(read_only=False, destructive=True, idempotent=False, open_world=False)
_ACT = Annotations(read_only=False, destructive=True, idempotent=False, open_world=True)

_STATE = {"state_id": {"type": "string",
                       "description": "The state_id of the observation this step was planned "
                                      "on; an older one is refused (BROWSER_STATE_STALE)."}}
_REF = {"ref": {"type": "string", "description": 'A ref of that state, e.g. "e12".'}}
_SHOT = {"include_screenshot": {
    "type": "boolean", "description": "Also deliver a screenshot of the page (as evidence)."}}


_schema = object_schema  # every parameter schema is a closed object

TOOLS: tuple[ToolDef, ...] = (
    ToolDef(
        "browser_navigate",
        "Load a URL (http/https) in the browser's tab. Returns the first observation of the "
        "page: its state_id, one line per control with a [ref=…], headings and text, the "
        "viewport first.",
        _schema({"url": {"type": "string", "description": "An absolute http(s) URL."}},
                ("url",)),
        _LOAD, "read"),
    ToolDef(
        "browser_observe",
        "Observe the page: a new state_id and the page's controls (one line each, with "
        "[ref=…]), headings and summarized text. page N reads further pages of the same state "
        "(pass its state_id); detail=\"text\" shows every text block in full; find=\"words\" "
        "lists only what contains them.",
        _schema({**_STATE,
                 "page": {"type": "integer", "minimum": 1,
                          "description": "Page of the observation (1 = the viewport)."},
                 "detail": {"type": "string", "enum": ["compact", "text"]},
                 "find": {"type": "string", "description": "Only items containing this text."},
                 **_SHOT}),
        OBSERVE),
    ToolDef(
        "browser_click",
        "Click the element with this ref. Returns the new state_id and what changed.",
        _schema({**_STATE, **_REF,
                 "button": {"type": "string", "enum": ["left", "right", "middle"]},
                 "double": {"type": "boolean"}}, ("state_id", "ref")),
        _ACT),
    ToolDef(
        "browser_type",
        "Replace the text of an input, textarea or editable element; submit=true presses "
        "Enter after. Returns the new state_id and what changed.",
        _schema({**_STATE, **_REF, "text": {"type": "string"},
                 "submit": {"type": "boolean"},
                 "slowly": {"type": "boolean",
                            "description": "Type key by key (for fields that react to keys)."}},
                ("state_id", "ref", "text")),
        _ACT),
    ToolDef(
        "browser_select",
        "Choose option(s) of a <select> by their visible label (or value).",
        _schema({**_STATE, **_REF,
                 "options": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
                ("state_id", "ref", "options")),
        _ACT),
    ToolDef(
        "browser_press",
        'Press a key or chord ("Enter", "Escape", "ArrowDown", "Control+A") on the element '
        "with ref, or on the page when no ref is given.",
        _schema({**_STATE, **_REF, "key": {"type": "string"}}, ("state_id", "key")),
        _ACT),
    ToolDef(
        "browser_scroll",
        "Scroll the page (or the element with ref) by viewports, or bring the element with "
        "ref into view when no direction is given. Returns the new viewport's observation.",
        _schema({**_STATE, **_REF,
                 "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                 "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 20,
                            "description": "Viewports to scroll (default 0.8)."}},
                ("state_id",)),
        MOVE, "read"),
    ToolDef(
        "browser_upload",
        "Give files to a file input (or to the file chooser its button opens). Paths must be "
        "inside the configured upload directories.",
        _schema({**_STATE, **_REF,
                 "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
                ("state_id", "ref", "paths")),
        _ACT),
    ToolDef(
        "browser_dialog",
        "Answer the open JavaScript dialog (alert/confirm/prompt): accept (with text for a "
        "prompt) or dismiss. Dismissing also closes an open modal dialog of the page (Escape).",
        _schema({**_STATE, "accept": {"type": "boolean"}, "text": {"type": "string"}},
                ("state_id", "accept")),
        _ACT),
    ToolDef(
        "browser_back",
        "Go back to the previous page of this tab. Returns its observation.",
        _schema(dict(_STATE), ("state_id",)),
        _LOAD, "read"),
    ToolDef(
        "browser_screenshot",
        "Capture the viewport (or the whole page, or one element by ref) as a lossless PNG, "
        "stored with its SHA-256 and pixel hash; delivered as visual evidence.",
        _schema({**_STATE, **_REF, "full_page": {"type": "boolean"}, **_SHOT}),
        OBSERVE),
    ToolDef(
        "browser_assert",
        'Check the page and record the result in the report: kind "text" (text present or '
        'absent), "url" or "title" (expected, match contains|equals), "element" (ref + '
        'state visible|hidden|enabled|disabled|checked|unchecked|focused|editable, or '
        'value), "visual" (a question answered from a screenshot, as evidence).',
        _schema({**_STATE, **_REF,
                 "kind": {"type": "string",
                          "enum": ["text", "url", "title", "element", "visual"]},
                 "text": {"type": "string"}, "present": {"type": "boolean"},
                 "expected": {"type": "string"},
                 "match": {"type": "string", "enum": ["contains", "equals"]},
                 "state": {"type": "string",
                           "enum": ["visible", "hidden", "enabled", "disabled", "checked",
                                    "unchecked", "focused", "editable"]},
                 "value": {"type": "string"}, "question": {"type": "string"}},
                ("kind",)),
        READ),
    ToolDef(
        "browser_report",
        "The session's report (v2): steps, states, assertions, screenshot hashes, timing.",
        _schema({"format": {"type": "string", "enum": ["text", "json"]}}),
        READ),
    ToolDef(
        "browser_close",
        "Close the browser (all tabs; nothing a site stored is kept). Returns the final "
        "report. A later browser_navigate starts a fresh browser.",
        _schema({}),
        _CLOSE, "read"),
)
TOOL_NAMES = tuple(tool.name for tool in TOOLS)
