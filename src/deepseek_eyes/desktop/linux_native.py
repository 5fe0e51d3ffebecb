"""The Linux native helper: AT-SPI over D-Bus for the tree and actions, XTest for input,
XGetImage for pixels — one process, spoken to in line JSON over stdin/stdout.

Why a separate script run by another interpreter: Debian builds ``gi`` (Gio, and the
Atspi typelib for role and state names) and ``python-xlib`` for its own
``/usr/bin/python3``; the project's virtual environment cannot import them (another Python
build, no system site-packages). So this file imports nothing from ``deepseek_eyes`` and
runs under ``[desktop] python``. The venv side (:mod:`deepseek_eyes.desktop.native`) owns
everything that is policy — state ids, refs, guards, deltas, PNG encoding — and this helper
only reads and acts, each request bounded (every D-Bus call has ``DSE_ATSPI_TIMEOUT_MS``;
the caller kills the helper when a request runs past its own deadline).

It is one file on purpose: it runs isolated (``python3 -I``), so the package directory —
whose ``http.py`` would shadow the standard library's — is not on its path, and it cannot
import siblings without path tricks.

Protocol: one JSON object per line in, ``{"id", "op", ...}``; one per line out,
``{"id", "ok": true, "result": ...}`` or ``{"id", "ok": false, "error": {"code", "message"}}``.

Identity: an accessible is named by (bus name, object path) — stable for the life of the
object in its application — and every request addresses it by exactly that, on the AT-SPI
bus, so nothing is cached here: an object that is gone answers with an error or the
``defunct`` state, and is reported gone. A window is also matched to its X window id by
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
from gi.repository import Atspi, Gio, GLib  # noqa: E402
from Xlib import XK, X, display  # noqa: E402
from Xlib.ext import xtest  # noqa: E402

MAX_CHILDREN = 1000  # children read of one node (huge tables are cut, and say so)
MAX_TEXT = 400  # characters of a node's text
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


def document_order(nodes):
    """Breadth-first nodes (as collected, so a cut keeps the upper levels) in document
    order — each node before its children — with parent indexes renumbered."""
    children = {}
    roots = []
    for index, node in enumerate(nodes):
        (children.setdefault(node["parent"], []) if node["parent"] >= 0 else roots).append(index)
    out, new_index = [], {}
    stack = list(reversed(roots))
    while stack:
        index = stack.pop()
        node = nodes[index]
        new_index[index] = len(out)
        node["parent"] = new_index.get(node["parent"], -1)
        out.append(node)
        stack.extend(reversed(children.get(index, [])))
    return out


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


A11Y = "org.a11y.atspi."
PROPS = "org.freedesktop.DBus.Properties"


class A11yBus:
    """The AT-SPI bus, spoken to directly with Gio.

    Why not pyatspi for the walk: pyatspi asks one property at a time and waits for each
    answer, about ten round trips per node. Here a whole level of the tree is asked at once
    (all calls sent, then all answers collected), so a walk costs a few round trips per
    level, not per node.
    """

    def __init__(self, timeout_ms):
        self.timeout_ms = timeout_ms
        session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        reply = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus",
                                  "GetAddress", None, GLib.VariantType("(s)"),
                                  Gio.DBusCallFlags.NONE, timeout_ms, None)
        address = reply.unpack()[0]
        self.conn = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
            | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
        self.context = GLib.MainContext.default()

    def call(self, dest, path, iface, method, args=None):
        reply = self.conn.call_sync(dest, path, iface, method, args, None,
                                    Gio.DBusCallFlags.NONE, self.timeout_ms, None)
        return reply.unpack()

    def batch(self, calls):
        """Send every call, then collect every answer (a tuple, or the GLib.Error)."""
        results = [None] * len(calls)
        pending = [len(calls)]

        def done(conn, res, index):
            try:
                results[index] = conn.call_finish(res).unpack()
            except GLib.Error as exc:
                results[index] = exc
            pending[0] -= 1

        for index, (dest, path, iface, method, args) in enumerate(calls):
            self.conn.call(dest, path, iface, method, args, None, Gio.DBusCallFlags.NONE,
                           self.timeout_ms, None, done, index)
        while pending[0] > 0:
            self.context.iteration(True)
        return results


def state_names(words):
    names = []
    for word_index, word in enumerate(words[:2]):
        for bit in range(32):
            if word & (1 << bit):
                try:
                    names.append(Atspi.StateType(word_index * 32 + bit).value_nick)
                except ValueError:
                    continue
    return names


def role_name(number):
    try:
        return Atspi.role_get_name(Atspi.Role(number)) or "unknown"
    except ValueError:
        return "unknown"


def ok(value):
    return not isinstance(value, GLib.Error) and value is not None


class Helper:
    def __init__(self):
        timeout_ms = int(os.environ.get("DSE_ATSPI_TIMEOUT_MS", "3000"))
        self.bus = A11yBus(timeout_ms)
        self.x = display.Display()
        self.root = self.x.screen().root
        self.atoms = {name: self.x.intern_atom(name) for name in
                      ("_NET_WM_PID", "_NET_WM_NAME", "UTF8_STRING")}

    # -- AT-SPI -----------------------------------------------------------------------------
    def describe(self, targets, children=True):
        """Nodes for (bus, path) pairs, read in two batched rounds; with ``children`` each
        node also lists its children's (bus, path)."""
        first = []
        for bus, path in targets:
            first += [
                (bus, path, A11Y + "Accessible", "GetRole", None),
                (bus, path, A11Y + "Accessible", "GetState", None),
                (bus, path, A11Y + "Accessible", "GetInterfaces", None),
                (bus, path, PROPS, "Get", GLib.Variant("(ss)", (A11Y + "Accessible", "Name"))),
                (bus, path, A11Y + "Component", "GetExtents", GLib.Variant("(u)", (0,))),
            ]
            if children:
                first.append((bus, path, A11Y + "Accessible", "GetChildren", None))
        width = 6 if children else 5
        answers = self.bus.batch(first)
        nodes = []
        second = []
        for index, (bus, path) in enumerate(targets):
            role, state, ifaces, name, extents = answers[index * width:index * width + 5]
            if not ok(state) or not ok(role):
                nodes.append({"bus": bus, "path": path, "role": "unknown", "name": "",
                              "states": ["defunct"], "bounds": [-1, -1, -1, -1]})
                continue
            node = {"bus": bus, "path": path, "role": role_name(role[0]),
                    "name": name[0] if ok(name) else "", "states": state_names(state[0]),
                    "bounds": list(extents[0]) if ok(extents) else [-1, -1, -1, -1]}
            interfaces = set(ifaces[0]) if ok(ifaces) else set()
            if children:
                kids = answers[index * width + 5]
                node["_children"] = [tuple(k) for k in kids[0]] if ok(kids) else []
            if A11Y + "EditableText" in interfaces:
                node["editable_text"] = True
            if A11Y + "Action" in interfaces:
                second.append((len(nodes), "actions",
                               (bus, path, A11Y + "Action", "GetActions", None)))
            if A11Y + "Text" in interfaces and node["role"] not in SECRET_ROLES:
                second.append((len(nodes), "text", (bus, path, A11Y + "Text", "GetText",
                                                    GLib.Variant("(ii)", (0, -1)))))
            nodes.append(node)
        # A destroyed GTK widget's accessible still answers, with no state at all and no
        # place in a parent: that is the "defunct" libatspi would report.
        empty = [i for i, n in enumerate(nodes) if not n["states"]]
        if empty:
            places = self.bus.batch([(nodes[i]["bus"], nodes[i]["path"], A11Y + "Accessible",
                                      "GetIndexInParent", None) for i in empty])
            for i, place in zip(empty, places, strict=True):
                if not ok(place) or place[0] < 0:
                    nodes[i].update(states=["defunct"], bounds=[-1, -1, -1, -1])
                    nodes[i].pop("_children", None)
        if second:
            answers = self.bus.batch([c for _, _, c in second])
            for (at, kind, _), answer in zip(second, answers, strict=True):
                if not ok(answer):
                    continue
                if kind == "actions":
                    # GetActions' names are localized for display; op_act matches the
                    # stable names (GetName) before acting.
                    nodes[at]["actions"] = [a[0].lower() for a in answer[0][:8]]
                else:
                    nodes[at]["text"] = answer[0][:MAX_TEXT]
        return nodes

    def op_windows(self, req):
        xwins = self.x_toplevels()
        focus = self.x_focus()
        registry = self.bus.call("org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root",
                                 A11Y + "Accessible", "GetChildren")[0][:256]
        calls = []
        for bus, path in registry:
            calls += [(bus, path, PROPS, "Get", GLib.Variant("(ss)", (A11Y + "Accessible",
                                                                      "Name"))),
                      (bus, path, A11Y + "Accessible", "GetChildren", None),
                      ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                       "GetConnectionUnixProcessID", GLib.Variant("(s)", (bus,)))]
        answers = self.bus.batch(calls)
        owners, targets = [], []
        for index, _ in enumerate(registry):
            name, kids, pid = answers[index * 3:index * 3 + 3]
            if not ok(kids):
                continue
            for kid in kids[0][:64]:
                targets.append(tuple(kid))
                owners.append((name[0] if ok(name) else "", pid[0] if ok(pid) else None))
        windows = []
        for node, (app, pid) in zip(self.describe(targets, children=False), owners, strict=True):
            if "defunct" in node["states"]:
                continue
            node.update(app=app, pid=pid, depth=0, parent=-1)
            node["xid"] = self.match_x(node, pid, xwins)
            windows.append(node)
        return {"windows": windows, "focus_xid": focus,
                "screen": [self.x.screen().width_in_pixels, self.x.screen().height_in_pixels]}

    def op_tree(self, req):
        limit = int(req.get("max_elements", 2000))
        deadline = time.monotonic() + float(req.get("time_cap", 2.0))
        started = time.monotonic()
        nodes, reason = [], None
        level = [((req["bus"], req["path"]), 0, -1)]
        while level:
            if time.monotonic() > deadline:
                reason = "time"
                break
            room = limit - len(nodes)
            if room <= 0:
                reason = "max_elements"
                break
            if len(level) > room:
                level, reason = level[:room], "max_elements"
            described = self.describe([target for target, _, _ in level])
            following = []
            for (_, depth, parent), node in zip(level, described, strict=True):
                node["depth"], node["parent"] = depth, parent
                kids = node.pop("_children", [])
                index = len(nodes)
                nodes.append(node)
                states = node["states"]
                if "defunct" in states or (depth > 0 and "showing" not in states):
                    continue  # what is not on screen is not read (its subtree may be huge)
                if len(kids) > MAX_CHILDREN:
                    node["children_cut"] = len(kids) - MAX_CHILDREN
                    kids = kids[:MAX_CHILDREN]
                following += [(kid, depth + 1, index) for kid in kids]
            if reason:
                break
            level = following
        remaining = len(level) if reason else 0
        return {"nodes": document_order(nodes), "truncated": reason is not None,
                "reason": reason, "remaining": remaining,
                "elapsed_ms": (time.monotonic() - started) * 1000}

    def op_element(self, req):
        (node,) = self.describe([(req["bus"], req["path"])], children=False)
        if "defunct" in node["states"]:
            return {"gone": True}
        return {"gone": False, "node": node}

    def alive(self, bus, path):
        (node,) = self.describe([(bus, path)], children=False)
        if "defunct" in node["states"]:
            raise Failure("DESKTOP_TARGET_GONE", "the element was destroyed")
        return node

    def op_act(self, req):
        bus, path = req["bus"], req["path"]
        self.alive(bus, path)
        count = len(self.describe([(bus, path)], children=False)[0].get("actions", []))
        names = [answer[0] if ok(answer) else "" for answer in self.bus.batch(
            [(bus, path, A11Y + "Action", "GetName", GLib.Variant("(i)", (i,)))
             for i in range(count)])]
        if not names:
            raise Failure("DESKTOP_ACTION_FAILED", "the element has no action")
        wanted = req.get("action")
        for name in [wanted] if wanted else ["click", "press", "toggle", "jump"]:
            if name in names:
                done = self.bus.call(bus, path, A11Y + "Action", "DoAction",
                                     GLib.Variant("(i)", (names.index(name),)))[0]
                if not done:
                    raise Failure("DESKTOP_TARGET_GONE", "the element refused the action")
                return {"action": name}
        raise Failure("DESKTOP_ACTION_FAILED", f"no action {wanted!r} (has {names})")

    def grab_focus(self, bus, path):
        try:
            self.bus.call(bus, path, A11Y + "Component", "GrabFocus")
        except GLib.Error:
            pass

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
            self.alive(req["bus"], req["path"])
            self.grab_focus(req["bus"], req["path"])
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
        bus, path = req.get("bus"), req.get("path")
        if bus:
            self.alive(bus, path)
            self.grab_focus(bus, path)
        elif req.get("point"):
            px, py = req["point"]
            self.pointer(px, py)
        self.settle(float(req.get("settle", 0.08)))
        focus = self.x_focus()
        if focus != xid:
            raise Failure("DESKTOP_FOCUS_LOST",
                          f"after focusing window {xid:#x} the input focus is on "
                          f"{focus:#x}" if focus else "the input focus is on no window")
        if bus:
            node = self.alive(bus, path)
            if node.get("editable_text"):
                if "focused" not in node["states"]:
                    raise Failure("DESKTOP_FOCUS_LOST", "the element did not take the focus")
                caret = self.bus.call(bus, path, PROPS, "Get", GLib.Variant(
                    "(ss)", (A11Y + "Text", "CaretOffset")))[0]
                if caret < 0:
                    caret = len(node.get("text", ""))
                text = req["text"]
                done = self.bus.call(bus, path, A11Y + "EditableText", "InsertText",
                                     GLib.Variant("(isi)", (caret, text, len(text))))[0]
                if not done:
                    raise Failure("DESKTOP_ACTION_FAILED", "the element refused the text")
                return {"typed": len(text), "via": "atspi"}
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
