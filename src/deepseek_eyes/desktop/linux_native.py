"""The Linux native helper: AT-SPI for the tree and actions, XTest for input, XGetImage for
pixels — one process, spoken to in line JSON over stdin/stdout.

Why a separate script run by another interpreter: Debian builds ``gi``, ``pyatspi`` and
``python-xlib`` for its own ``/usr/bin/python3``; the project's virtual environment cannot
import them (another Python build, no system site-packages). So this file imports nothing
from ``deepseek_eyes`` and runs under ``[desktop] python``. The venv side
(:mod:`deepseek_eyes.desktop.native`) owns everything that is policy — state ids, refs,
guards, deltas, PNG encoding — and this helper only reads and acts, each request bounded
(AT-SPI's D-Bus calls get :func:`Atspi.set_timeout`; the caller kills the helper when a
request runs past its own deadline).

Protocol: one JSON object per line in, ``{"id", "op", ...}``; one per line out,
``{"id", "ok": true, "result": ...}`` or ``{"id", "ok": false, "error": {"code", "message"}}``.

Identity: an accessible is named by (bus name, object path) — stable for the life of the
object in its application — and resolved from this process's cache of the objects its last
walks met (AT-SPI has no lookup by path). A window is also matched to its X window id by
process id, title and geometry, because input focus is an X notion.

The guarded ``type`` is one request so nothing runs between the foreground recheck and the
first keystroke: focus the window (X input focus, raise), focus the control (AT-SPI
``grabFocus``) or click the point, let the display settle, read the X focus back, and refuse
(``DESKTOP_FOCUS_LOST``) unless it is the intended window — only then send text.
"""
# ruff: noqa: ARG002, S112, SIM105 - op_* methods share one signature; the helper skips
# objects that vanish mid-walk and must not import contextlib-style helpers it does not need.

import base64
import json
import os
import sys
import time

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, GLib  # noqa: E402
from Xlib import XK, X, display  # noqa: E402
from Xlib.ext import xtest  # noqa: E402

MAX_CHILDREN = 1000  # children read of one node (huge tables are cut, and say so)
MAX_TEXT = 400  # characters of a node's text
CACHE_LIMIT = 100_000
SECRET_ROLES = {"password text"}
KEY_NAMES = {
    "enter": "Return", "return": "Return", "escape": "Escape", "esc": "Escape",
    "tab": "Tab", "backspace": "BackSpace", "delete": "Delete", "space": "space",
    "arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right", "home": "Home",
    "end": "End", "pageup": "Prior", "pagedown": "Next", "insert": "Insert",
}
MODIFIERS = {"ctrl": "Control_L", "control": "Control_L", "shift": "Shift_L",
             "alt": "Alt_L", "super": "Super_L", "meta": "Meta_L"}
BUTTONS = {"left": 1, "middle": 2, "right": 3}
SCROLL_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class Helper:
    def __init__(self):
        Atspi.set_timeout(int(os.environ.get("DSE_ATSPI_TIMEOUT_MS", "3000")), -1)
        self.x = display.Display()
        self.root = self.x.screen().root
        self.cache = {}
        self.atoms = {name: self.x.intern_atom(name) for name in
                      ("_NET_WM_PID", "_NET_WM_NAME", "UTF8_STRING")}

    # -- AT-SPI -----------------------------------------------------------------------------
    def remember(self, acc):
        bus = acc.app.bus_name if acc.app is not None else ""
        key = bus + "\0" + acc.path
        if len(self.cache) > CACHE_LIMIT:
            self.cache.clear()
        self.cache[key] = acc
        return bus

    def lookup(self, bus, path):
        acc = self.cache.get(bus + "\0" + path)
        if acc is None:
            raise Failure("DESKTOP_TARGET_GONE", "the element is not known (observe again)")
        return acc

    @staticmethod
    def states(acc):
        return [s.value_nick for s in acc.get_state_set().get_states()]

    def node(self, acc, depth=0, parent=-1):
        bus = self.remember(acc)
        states = self.states(acc)
        out = {"bus": bus, "path": acc.path, "role": acc.get_role_name(),
               "name": acc.get_name() or "", "states": states, "depth": depth,
               "parent": parent}
        if "defunct" in states:
            out["bounds"] = [-1, -1, -1, -1]
            return out
        try:
            ext = acc.get_extents(Atspi.CoordType.SCREEN)
            out["bounds"] = [ext.x, ext.y, ext.width, ext.height]
        except GLib.Error:
            out["bounds"] = [-1, -1, -1, -1]
        try:
            action = acc.get_action_iface()
            if action is not None:
                out["actions"] = [action.get_action_name(i)
                                  for i in range(min(8, action.get_n_actions()))]
        except GLib.Error:
            pass
        text = acc.get_text_iface()
        if text is not None and out["role"] not in SECRET_ROLES:
            try:
                count = text.get_character_count()
                out["text"] = text.get_text(0, min(count, MAX_TEXT))
            except GLib.Error:
                pass
        if acc.get_editable_text_iface() is not None:
            out["editable_text"] = True
        return out

    def applications(self):
        desktop = Atspi.get_desktop(0)
        for i in range(min(desktop.get_child_count(), 256)):
            app = desktop.get_child_at_index(i)
            if app is not None:
                yield app

    def op_windows(self, req):
        xwins = self.x_toplevels()
        focus = self.x_focus()
        windows = []
        for app in self.applications():
            try:
                pid = app.get_process_id()
                count = min(app.get_child_count(), 64)
            except GLib.Error:
                continue
            for j in range(count):
                win = app.get_child_at_index(j)
                if win is None:
                    continue
                try:
                    item = self.node(win)
                except GLib.Error:
                    continue
                item["app"] = app.get_name() or ""
                item["pid"] = pid
                item["xid"] = self.match_x(item, pid, xwins)
                windows.append(item)
        return {"windows": windows, "focus_xid": focus,
                "screen": [self.x.screen().width_in_pixels, self.x.screen().height_in_pixels]}

    def op_tree(self, req):
        root = self.lookup(req["bus"], req["path"])
        limit = int(req.get("max_elements", 2000))
        deadline = time.monotonic() + float(req.get("time_cap", 2.0))
        started = time.monotonic()
        nodes, reason = [], None
        stack = [(root, 0, -1)]
        while stack:
            if len(nodes) >= limit:
                reason = "max_elements"
                break
            if time.monotonic() > deadline:
                reason = "time"
                break
            acc, depth, parent = stack.pop()
            try:
                item = self.node(acc, depth, parent)
            except GLib.Error:
                continue
            index = len(nodes)
            nodes.append(item)
            states = item["states"]
            if "defunct" in states or (depth > 0 and "showing" not in states):
                continue  # what is not on screen is not read (its subtree may be huge)
            try:
                count = acc.get_child_count()
            except GLib.Error:
                continue
            if count > MAX_CHILDREN:
                item["children_cut"] = count - MAX_CHILDREN
                count = MAX_CHILDREN
            children = []
            for i in range(count):
                try:
                    child = acc.get_child_at_index(i)
                except GLib.Error:
                    continue
                if child is not None:
                    children.append((child, depth + 1, index))
            stack.extend(reversed(children))
        return {"nodes": nodes, "truncated": reason is not None, "reason": reason,
                "remaining": len(stack), "elapsed_ms": (time.monotonic() - started) * 1000}

    def op_element(self, req):
        acc = self.cache.get(req["bus"] + "\0" + req["path"])
        if acc is None:
            return {"gone": True}
        try:
            item = self.node(acc)
        except GLib.Error:
            return {"gone": True}
        if "defunct" in item["states"]:
            return {"gone": True}
        return {"gone": False, "node": item}

    def op_act(self, req):
        acc = self.alive(req["bus"], req["path"])
        action = acc.get_action_iface()
        if action is None:
            raise Failure("DESKTOP_ACTION_FAILED", "the element has no action")
        names = [action.get_action_name(i) for i in range(action.get_n_actions())]
        wanted = req.get("action")
        order = [wanted] if wanted else ["click", "press", "toggle", "jump"]
        for name in order:
            if name in names:
                if not action.do_action(names.index(name)):
                    raise Failure("DESKTOP_TARGET_GONE", "the element refused the action")
                return {"action": name}
        raise Failure("DESKTOP_ACTION_FAILED", f"no action {wanted!r} (has {names})")

    def alive(self, bus, path):
        acc = self.lookup(bus, path)
        try:
            states = self.states(acc)
        except GLib.Error as exc:
            raise Failure("DESKTOP_TARGET_GONE", f"the element is gone: {exc.message}") from exc
        if "defunct" in states:
            raise Failure("DESKTOP_TARGET_GONE", "the element was destroyed")
        return acc

    # -- X ----------------------------------------------------------------------------------
    def x_toplevels(self):
        out = []
        for win in self.root.query_tree().children[-512:]:
            try:
                attrs = win.get_attributes()
                if attrs.map_state != X.IsViewable:
                    continue
                geo = win.get_geometry()
                pid = win.get_full_property(self.atoms["_NET_WM_PID"], X.AnyPropertyType)
                name = win.get_full_property(self.atoms["_NET_WM_NAME"], 0)
                title = name.value.decode("utf-8", "replace") if name else (win.get_wm_name() or "")
                out.append({"xid": win.id, "pid": int(pid.value[0]) if pid else None,
                            "title": title if isinstance(title, str) else "",
                            "bounds": [geo.x, geo.y, geo.width, geo.height]})
            except Exception:  # a window that vanished while we looked
                continue
        return out

    @staticmethod
    def match_x(item, pid, xwins):
        same = [w for w in xwins if w["pid"] == pid]
        for w in same:
            if w["bounds"] == item["bounds"] and w["title"] == item["name"]:
                return w["xid"]
        for w in same:
            if w["bounds"] == item["bounds"]:
                return w["xid"]
        titled = [w for w in same if w["title"] == item["name"]]
        return titled[0]["xid"] if len(titled) == 1 else None

    def x_focus(self):
        focus = self.x.get_input_focus().focus
        if not hasattr(focus, "id") or focus.id in (0, 1, self.root.id):
            return None  # None, PointerRoot or the root itself: no window has the focus
        # The focus may be a child of a top-level window: walk up to the root's child.
        win = focus
        for _ in range(32):
            try:
                parent = win.query_tree().parent
            except Exception:
                return None
            if not hasattr(parent, "id") or parent.id in (0, self.root.id):
                return win.id
            win = parent
        return None

    def op_focused(self, req):
        return {"xid": self.x_focus()}

    def focus_window(self, xid):
        win = self.x.create_resource_object("window", xid)
        try:
            win.configure(stack_mode=X.Above)
            win.set_input_focus(X.RevertToParent, X.CurrentTime)
            self.x.sync()
        except Exception as exc:
            raise Failure("DESKTOP_TARGET_GONE", f"the window cannot be focused: {exc}") from exc

    def settle(self, seconds):
        """Let the applications react (focus events, redraws) while their events flow."""
        end = time.monotonic() + seconds
        context = GLib.MainContext.default()
        while time.monotonic() < end:
            while context.pending():
                context.iteration(False)
            self.x.sync()
            time.sleep(0.005)

    def op_focus(self, req):
        self.focus_window(int(req["xid"]))
        if req.get("bus"):
            acc = self.alive(req["bus"], req["path"])
            try:
                acc.grab_focus()
            except GLib.Error:
                pass
        self.settle(float(req.get("settle", 0.05)))
        return {"focus_xid": self.x_focus()}

    def op_capture(self, req):
        x, y, w, h = (int(req[k]) for k in ("x", "y", "w", "h"))
        image = self.root.get_image(x, y, w, h, X.ZPixmap, 0xFFFFFFFF)
        return {"w": w, "h": h, "format": "BGRX",
                "data": base64.b64encode(image.data).decode("ascii")}

    def pointer(self, x, y, button=1, count=1):
        xtest.fake_input(self.x, X.MotionNotify, x=int(x), y=int(y))
        for _ in range(count):
            xtest.fake_input(self.x, X.ButtonPress, button)
            xtest.fake_input(self.x, X.ButtonRelease, button)
        self.x.sync()

    def op_click(self, req):
        self.pointer(req["x"], req["y"], BUTTONS[req.get("button", "left")],
                     int(req.get("count", 1)))
        return {}

    def op_scroll(self, req):
        self.pointer(req["x"], req["y"], SCROLL_BUTTONS[req["direction"]],
                     max(1, min(50, int(req.get("amount", 3)))))
        return {}

    def keycode(self, keysym):
        """(keycode, shifted) for a keysym, mapping a spare keycode when none has it."""
        code = self.x.keysym_to_keycode(keysym)
        if code:
            shifted = self.x.keycode_to_keysym(code, 0) != keysym
            return code, shifted
        first = self.x.display.info.min_keycode
        count = self.x.display.info.max_keycode - first + 1
        mapping = self.x.get_keyboard_mapping(first, count)
        for offset, syms in enumerate(mapping):
            if not any(syms):
                spare = first + offset
                self.x.change_keyboard_mapping(spare, [(keysym,) * len(syms)])
                self.x.sync()
                return spare, False
        raise Failure("DESKTOP_ACTION_FAILED", "no keycode is free for this character")

    def tap(self, keysym, modifiers=()):
        code, shifted = self.keycode(keysym)
        held = [self.x.keysym_to_keycode(XK.string_to_keysym(m)) for m in modifiers]
        if shifted:
            held.append(self.x.keysym_to_keycode(XK.string_to_keysym("Shift_L")))
        for mod in held:
            xtest.fake_input(self.x, X.KeyPress, mod)
        xtest.fake_input(self.x, X.KeyPress, code)
        xtest.fake_input(self.x, X.KeyRelease, code)
        for mod in reversed(held):
            xtest.fake_input(self.x, X.KeyRelease, mod)
        self.x.sync()

    @staticmethod
    def char_keysym(char):
        point = ord(char)
        if char == "\n":
            return XK.string_to_keysym("Return")
        if char == "\t":
            return XK.string_to_keysym("Tab")
        if 0x20 <= point <= 0x7E or 0xA0 <= point <= 0xFF:
            return point
        return 0x01000000 + point

    def op_press(self, req):
        parts = [p for p in req["key"].replace("-", "+").split("+") if p] or [req["key"]]
        *mods, last = parts
        modifiers = []
        for mod in mods:
            name = MODIFIERS.get(mod.lower())
            if name is None:
                raise Failure("DESKTOP_ARGUMENT_INVALID", f"unknown modifier {mod!r}")
            modifiers.append(name)
        name = KEY_NAMES.get(last.lower())
        if name is None and len(last) == 1:
            keysym = self.char_keysym(last.lower() if modifiers else last)
        else:
            keysym = XK.string_to_keysym(name or last)
        if not keysym:
            raise Failure("DESKTOP_ARGUMENT_INVALID", f"unknown key {last!r}")
        self.tap(keysym, modifiers)
        return {}

    def op_type(self, req):
        """Focus, recheck the foreground, and only then send the text (one request)."""
        xid = int(req["xid"])
        self.focus_window(xid)
        element = None
        if req.get("bus"):
            element = self.alive(req["bus"], req["path"])
            try:
                element.grab_focus()
            except GLib.Error:
                pass
        elif req.get("point"):
            px, py = req["point"]
            self.pointer(px, py)
        self.settle(float(req.get("settle", 0.08)))
        focus = self.x_focus()
        if focus != xid:
            raise Failure("DESKTOP_FOCUS_LOST",
                          f"after focusing window {xid:#x} the input focus is on "
                          f"{focus:#x}" if focus else "the input focus is on no window")
        if element is not None:
            states = self.states(element)
            if "defunct" in states:
                raise Failure("DESKTOP_TARGET_GONE", "the element was destroyed")
            editable = element.get_editable_text_iface()
            if editable is not None and "focused" not in states:
                raise Failure("DESKTOP_FOCUS_LOST", "the element did not take the focus")
            if editable is not None:
                text_iface = element.get_text_iface()
                caret = text_iface.get_caret_offset() if text_iface else 0
                if caret < 0:
                    caret = text_iface.get_character_count() if text_iface else 0
                if not editable.insert_text(caret, req["text"], len(req["text"].encode())):
                    raise Failure("DESKTOP_ACTION_FAILED", "the element refused the text")
                return {"typed": len(req["text"]), "via": "atspi"}
        for char in req["text"]:
            self.tap(self.char_keysym(char))
        return {"typed": len(req["text"]), "via": "xtest"}

    def op_hello(self, req):
        screen = self.x.screen()
        return {"screen": [screen.width_in_pixels, screen.height_in_pixels],
                "display": os.environ.get("DISPLAY", ""), "pid": os.getpid()}

    def handle(self, req):
        method = getattr(self, "op_" + str(req.get("op")), None)
        if method is None:
            raise Failure("DESKTOP_ARGUMENT_INVALID", f"no operation {req.get('op')!r}")
        return method(req)


def main():
    try:
        helper = Helper()
    except Exception as exc:
        sys.stdout.write(json.dumps({"id": 0, "ok": False, "error": {
            "code": "DESKTOP_UNAVAILABLE", "message": f"{type(exc).__name__}: {exc}"}}) + "\n")
        sys.stdout.flush()
        return 1
    sys.stdout.write(json.dumps({"id": 0, "ok": True, "result": {"ready": True}}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        try:
            reply = {"id": req.get("id"), "ok": True, "result": helper.handle(req)}
        except Failure as exc:
            reply = {"id": req.get("id"), "ok": False,
                     "error": {"code": exc.code, "message": exc.message}}
        except GLib.Error as exc:
            reply = {"id": req.get("id"), "ok": False,
                     "error": {"code": "DESKTOP_ACTION_FAILED", "message": exc.message}}
        except Exception as exc:
            reply = {"id": req.get("id"), "ok": False, "error": {
                "code": "DESKTOP_ACTION_FAILED", "message": f"{type(exc).__name__}: {exc}"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
