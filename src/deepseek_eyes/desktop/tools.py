"""The desktop's tools, described once: names, JSON schemas, risk and MCP annotations.

``deepseek-eyes desktop serve`` and the runtime's ``desktop`` source offer exactly these;
:class:`~deepseek_eyes.desktop.service.DesktopService` runs them. Reading (observe,
screenshot, assert, report) is read-only; clicking, typing, pressing keys and launching
apps can change or delete anything an application can, so they are destructive. Closing
the session kills only what it launched: the runtime's gate counts it as a read.
"""

from __future__ import annotations

from deepseek_eyes.toolkit.spec import MOVE, OBSERVE, READ, Annotations, ToolDef, object_schema

__all__ = ["TOOLS", "TOOL_NAMES", "DesktopTool"]

DesktopTool = ToolDef  # the name callers and tests know

_ACT = Annotations(read_only=False, destructive=True, idempotent=False, open_world=False)
_FOCUS = Annotations(read_only=False, destructive=False, idempotent=True, open_world=False)

_STATE = {"state_id": {"type": "string",
                       "description": "The state_id of the observation this step was planned "
                                      "on; an older one is refused (DESKTOP_STATE_STALE)."}}
_REF = {"ref": {"type": "string", "description": 'An element ref of that state, e.g. "e3f…".'}}
_XY = {"x": {"type": "number", "minimum": 0,
             "description": "Pixels from the left of the state's screenshot."},
       "y": {"type": "number", "minimum": 0,
             "description": "Pixels from the top of the state's screenshot."}}
_SHOT = {"include_screenshot": {"type": "boolean",
                                "description": "Also deliver the screenshot (as evidence)."}}


_schema = object_schema  # every parameter schema is a closed object

TOOLS: tuple[ToolDef, ...] = (
    ToolDef(
        "desktop_observe",
        'Observe the desktop. scope "desktop" lists the windows ([ref=w…], title, app, '
        'bounds, focus, modal); scope "window" (window: a w… ref or a title) lists that '
        "window's elements ([ref=e…], role, name, text, actions) with bounds in the pixels "
        "of the returned screenshot. Returns a new state_id.",
        _schema({"scope": {"type": "string", "enum": ["desktop", "window"]},
                 "window": {"type": "string", "description": "A window ref or title."},
                 **_SHOT}),
        OBSERVE),
    ToolDef(
        "desktop_click",
        "Click an element by ref (its accessible action), or a point x,y of the state's "
        "screenshot (for canvases). Returns the new state_id and what changed.",
        _schema({**_STATE, **_REF, **_XY,
                 "button": {"type": "string", "enum": ["left", "right", "middle"]},
                 "double": {"type": "boolean"}}, ("state_id",)),
        _ACT),
    ToolDef(
        "desktop_type",
        "Type text into an element by ref, or at a point x,y of a window (window_ref, or the "
        "state's window). Focus, modal dialogs and the target are checked first and the "
        "window's keyboard focus is verified before the first key; any failure sends "
        "nothing. allow_focused_target=true types into whatever holds the focus.",
        _schema({**_STATE, **_REF, **_XY,
                 "window_ref": {"type": "string"}, "text": {"type": "string"},
                 "allow_focused_target": {"type": "boolean"}}, ("state_id", "text")),
        _ACT),
    ToolDef(
        "desktop_press",
        'Press a key or chord ("Enter", "Escape", "Tab", "ctrl+a") in the state\'s window '
        "(its focus is verified first).",
        _schema({**_STATE, "key": {"type": "string"}}, ("state_id", "key")),
        _ACT),
    ToolDef(
        "desktop_scroll",
        "Scroll at an element (ref), a point (x,y) or the state's window centre.",
        _schema({**_STATE, **_REF, **_XY,
                 "direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                 "amount": {"type": "integer", "minimum": 1, "maximum": 50}},
                ("state_id", "direction")),
        MOVE),
    ToolDef(
        "desktop_launch",
        "Launch an application named in the settings (desktop.apps) and observe its window.",
        _schema({"app": {"type": "string"}}, ("app",)),
        _ACT),
    ToolDef(
        "desktop_focus",
        "Give a window (ref or title) the keyboard focus and observe it.",
        _schema({"window": {"type": "string"}}, ("window",)),
        _FOCUS),
    ToolDef(
        "desktop_screenshot",
        "Capture the current target (the state's window, or the whole desktop) as a lossless "
        "PNG with its origin and scale; delivered as visual evidence.",
        _schema({**_STATE, **_SHOT}),
        OBSERVE),
    ToolDef(
        "desktop_assert",
        'Check the desktop and record the result in the report: kind "text" (text present '
        'or absent in the state\'s window), "window" (a window with this title exists), '
        '"element" (ref + state focused|enabled|checked|selected|editable|showing, or '
        'value), "visual" (a question answered from the screenshot, as evidence).',
        _schema({**_STATE, **_REF,
                 "kind": {"type": "string", "enum": ["text", "window", "element", "visual"]},
                 "text": {"type": "string"}, "present": {"type": "boolean"},
                 "state": {"type": "string"}, "value": {"type": "string"},
                 "question": {"type": "string"}}, ("kind",)),
        READ),
    ToolDef(
        "desktop_report",
        "The session's report (v2): steps, states, assertions, screenshot hashes, timing.",
        _schema({"format": {"type": "string", "enum": ["text", "json"]}}),
        READ),
    ToolDef(
        "desktop_close",
        "End the desktop session: launched apps are killed (and a private headless display "
        "stopped). Returns the final report.",
        _schema({}),
        _ACT, "read"),
)
TOOL_NAMES = tuple(tool.name for tool in TOOLS)
