"""A small GTK 3 window the desktop tests drive (run by Debian's /usr/bin/python3).

It has an entry, two buttons, a list and a modal dialog, and it reads commands from stdin
(one per line) so a test can change it behind the tool's back:

* ``dump``      print its state as one JSON line (``{"state": …}``): the entry's text, the
                clicks, the selected row — read back independently of AT-SPI;
* ``modal``     open a modal dialog over the window;
* ``unmodal``   close it;
* ``destroy``   destroy the "Apply" button;
* ``thief``     open a second window that takes the keyboard focus and keeps taking it back;
* ``many N``    add N buttons (a tree over ``desktop.max_elements``);
* ``quit``      exit.

It prints ``{"ready": true}`` once its window is shown. Everything it prints is one JSON
object a line, flushed.
"""

import json
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

TITLE = sys.argv[1] if len(sys.argv) > 1 else "Eyes Test"


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class App:
    def __init__(self):
        self.clicks = {"Apply": 0, "Clear": 0}
        self.window = Gtk.Window(title=TITLE)
        self.window.set_default_size(420, 360)
        self.window.move(40, 40)
        self.window.connect("destroy", Gtk.main_quit)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        self.box = box
        self.window.add(box)
        label = Gtk.Label(label="Your name")
        box.pack_start(label, False, False, 0)
        self.entry = Gtk.Entry()
        self.entry.get_accessible().set_name("Name")
        box.pack_start(self.entry, False, False, 0)
        buttons = Gtk.Box(spacing=6)
        self.apply = Gtk.Button(label="Apply")
        self.apply.connect("clicked", self.on_click, "Apply")
        self.clear = Gtk.Button(label="Clear")
        self.clear.connect("clicked", self.on_clear)
        buttons.pack_start(self.apply, False, False, 0)
        buttons.pack_start(self.clear, False, False, 0)
        box.pack_start(buttons, False, False, 0)
        self.status = Gtk.Label(label="clicked 0")
        box.pack_start(self.status, False, False, 0)
        self.store = Gtk.ListStore(str)
        for fruit in ("Apple", "Banana", "Cherry"):
            self.store.append([fruit])
        self.tree = Gtk.TreeView(model=self.store)
        self.tree.append_column(Gtk.TreeViewColumn("Fruit", Gtk.CellRendererText(), text=0))
        box.pack_start(self.tree, True, True, 0)
        self.extra = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
        box.pack_start(self.extra, False, False, 0)
        self.dialog = None
        self.thief = None
        self.window.show_all()
        GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, self.on_command)
        GLib.idle_add(self.ready)

    def ready(self):
        say({"ready": True})
        return False

    def on_click(self, _button, name):
        self.clicks[name] += 1
        self.status.set_text(f"clicked {self.clicks['Apply']}")

    def on_clear(self, _button):
        self.clicks["Clear"] += 1
        self.entry.set_text("")

    def state(self):
        model, it = self.tree.get_selection().get_selected()
        return {"entry": self.entry.get_text(), "clicks": self.clicks,
                "selected": model[it][0] if it is not None else None,
                "modal": self.dialog is not None,
                "thief": self.thief.get_child().get_text() if self.thief else None}

    def on_command(self, source, condition):
        line = source.readline()
        if not line:
            Gtk.main_quit()
            return False
        words = line.split()
        command = words[0] if words else ""
        if command == "dump":
            say({"state": self.state()})
        elif command == "modal":
            self.dialog = Gtk.Dialog(title="Confirm", transient_for=self.window, modal=True)
            self.dialog.add_button("OK", Gtk.ResponseType.OK)
            self.dialog.connect("response", lambda d, _r: self.close_modal())
            self.dialog.show_all()
            say({"done": "modal"})
        elif command == "unmodal":
            self.close_modal()
            say({"done": "unmodal"})
        elif command == "destroy":
            self.apply.destroy()
            say({"done": "destroy"})
        elif command == "thief":
            self.thief = Gtk.Window(title="Thief")
            self.thief.add(Gtk.Entry())
            self.thief.move(600, 100)
            self.thief.show_all()
            self.thief.present()
            GLib.timeout_add(5, self.steal)
            say({"done": "thief"})
        elif command == "many":
            for i in range(int(words[1])):
                self.extra.pack_start(Gtk.Button(label=f"Extra {i}"), False, False, 0)
            self.extra.show_all()
            say({"done": "many"})
        elif command == "quit":
            Gtk.main_quit()
        return True

    def steal(self):
        if self.thief is None:
            return False
        window = self.thief.get_window()
        if window is not None:
            window.focus(Gtk.get_current_event_time())
        return True

    def close_modal(self):
        if self.dialog is not None:
            self.dialog.destroy()
            self.dialog = None


App()
Gtk.main()
