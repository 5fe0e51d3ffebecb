"""Pages of our own, served on 127.0.0.1 for the browser tests: a form with validation
messages and a toast after a (server-delayed) save, tabs, a modal dialog and a JavaScript
confirm, a paginated table, an iframe, shadow DOM, a long document, two documents whose
Playwright refs collide, a download, an upload, popups and a redirect, an alert storm and
an 8 MiB download.

Every page counts what happened to it in ``window`` (``clicks``, ``deleted``, …) so a test
proves by observation that a refused action never ran.
"""

from __future__ import annotations

import http.server
import threading
import time
from types import TracebackType
from typing import Self
from urllib.parse import parse_qs, urlsplit

__all__ = ["PAGES", "Site"]

FORM = """<!doctype html><html><head><title>Sign up</title></head><body>
<header><nav aria-label="Site"><a href="/tabs.html">Tabs</a>
  <a href="/table.html">Table</a></nav></header>
<main>
<h1>Create your account</h1>
<p>Fill in the form. Every field is checked before anything is sent; the password never
leaves this page in this test.</p>
<form id="signup" novalidate>
  <label>Full name <input id="name" name="name" aria-describedby="name-error"></label>
  <span id="name-error" role="alert"></span>
  <label>Email <input id="email" name="email" type="email"></label>
  <span id="email-error" role="alert"></span>
  <label>Password <input id="password" name="password" type="password"></label>
  <label>Plan <select id="plan" name="plan"><option>Free</option><option>Team</option>
    <option>Enterprise</option></select></label>
  <label><input id="terms" type="checkbox"> I accept the terms</label>
  <button id="create" type="submit">Create account</button>
</form>
<p id="result"></p>
<button id="count" type="button">Clicked 0 times</button>
<button id="save" type="button">Save draft</button>
<div id="toasts"></div>
</main>
<script>
window.clicks = 0; window.submits = 0;
const form = document.getElementById("signup");
function fail(id, message) {
  document.getElementById(id).setAttribute("aria-invalid", "true");
  document.getElementById(id + "-error").textContent = message;
}
form.addEventListener("submit", event => {
  event.preventDefault();
  for (const id of ["name", "email"]) {
    document.getElementById(id).removeAttribute("aria-invalid");
    document.getElementById(id + "-error").textContent = "";
  }
  const name = document.getElementById("name").value.trim();
  const email = document.getElementById("email").value.trim();
  let ok = true;
  if (!name) { fail("name", "Enter your full name"); ok = false; }
  if (!/^[^@ ]+@[^@ ]+\\.[a-z]+$/.test(email)) {
    fail("email", "Enter a valid email address"); ok = false;
  }
  if (!ok) return;
  window.submits += 1;
  document.getElementById("result").textContent =
    "Welcome, " + name + "! Plan: " + document.getElementById("plan").value +
    (document.getElementById("terms").checked ? ", terms accepted" : "");
});
document.getElementById("count").addEventListener("click", event => {
  window.clicks += 1;
  event.target.textContent = "Clicked " + window.clicks + " times";
});
document.getElementById("save").addEventListener("click", async () => {
  const response = await fetch("/api/save");
  const toast = document.createElement("div");
  toast.setAttribute("role", "status");
  toast.textContent = "Draft saved: " + (await response.text());
  document.getElementById("toasts").append(toast);
});
</script></body></html>"""

TABS = """<!doctype html><html><head><title>Tabs</title></head><body><main>
<h1>Settings</h1>
<div role="tablist" aria-label="Sections">
  <button role="tab" id="t1" aria-selected="true" aria-controls="p1">Profile</button>
  <button role="tab" id="t2" aria-selected="false" aria-controls="p2">Billing</button>
</div>
<div role="tabpanel" id="p1" aria-labelledby="t1"><p>Your profile is public.</p>
  <button>Edit profile</button></div>
<div role="tabpanel" id="p2" aria-labelledby="t2" hidden><p>Invoices are monthly.</p>
  <button>Download invoice</button></div>
</main><script>
for (const tab of document.querySelectorAll('[role="tab"]')) {
  tab.addEventListener("click", () => {
    for (const other of document.querySelectorAll('[role="tab"]')) {
      other.setAttribute("aria-selected", String(other === tab));
      document.getElementById(other.getAttribute("aria-controls")).hidden = other !== tab;
    }
  });
}
</script></body></html>"""

MODAL = """<!doctype html><html><head><title>Modal</title></head><body><main>
<h1>Danger zone</h1>
<button id="open">Delete project</button>
<button id="ask">Reset settings</button>
<p id="status">Nothing deleted</p>
<dialog id="confirm" aria-label="Confirm deletion">
  <h2>Delete the project?</h2><p>This cannot be undone.</p>
  <button id="yes">Delete</button> <button id="no">Cancel</button>
</dialog>
</main><script>
window.deleted = 0; window.resets = 0;
const dialog = document.getElementById("confirm");
document.getElementById("open").onclick = () => dialog.showModal();
document.getElementById("no").onclick = () => dialog.close();
document.getElementById("yes").onclick = () => {
  window.deleted += 1; dialog.close();
  document.getElementById("status").textContent = "Project deleted";
};
document.getElementById("ask").onclick = () => {
  const name = prompt("Type RESET to confirm", "");
  if (name === "RESET" && confirm("Really reset?")) {
    window.resets += 1;
    document.getElementById("status").textContent = "Settings reset";
  }
};
</script></body></html>"""


def _table() -> str:
    rows = ",".join(f'["Order {n:03d}", "{(n * 37) % 1000}.{n % 100:02d} EUR"]' for n in
                    range(1, 51))
    return """<!doctype html><html><head><title>Orders</title></head><body><main>
<h1>Orders</h1>
<table aria-label="Orders"><thead><tr><th>Order</th><th>Total</th><th>Action</th></tr></thead>
<tbody id="rows"></tbody></table>
<nav aria-label="Pages"><button id="prev">Previous</button> <span id="where"></span>
<button id="next">Next</button></nav>
</main><script>
const data = [""" + rows + """];
let page = 0; window.opened = [];
function show() {
  const body = document.getElementById("rows"); body.textContent = "";
  for (const [order, total] of data.slice(page * 10, page * 10 + 10)) {
    const tr = document.createElement("tr");
    tr.innerHTML = "<td></td><td></td><td><button>Open</button></td>";
    tr.children[0].textContent = order; tr.children[1].textContent = total;
    tr.querySelector("button").setAttribute("aria-label", "Open " + order);
    tr.querySelector("button").onclick = () => window.opened.push(order);
    body.append(tr);
  }
  document.getElementById("where").textContent = "Page " + (page + 1) + " of 5";
  document.getElementById("prev").disabled = page === 0;
  document.getElementById("next").disabled = page === 4;
}
document.getElementById("next").onclick = () => { page += 1; show(); };
document.getElementById("prev").onclick = () => { page -= 1; show(); };
show();
</script></body></html>"""


FRAMES = """<!doctype html><html><head><title>Widgets</title></head><body><main>
<h1>Widgets</h1>
<iframe title="Payment" src="/inner.html" width="500" height="160"></iframe>
<fancy-counter></fancy-counter>
</main><script>
window.shadowClicks = 0;
customElements.define("fancy-counter", class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: "closed"});
    root.innerHTML = '<label>Coupon <input id="coupon"></label>' +
      '<button id="apply">Apply coupon</button><p id="msg"></p>';
    root.getElementById("apply").onclick = () => {
      window.shadowClicks += 1;
      const code = root.getElementById("coupon").value;
      root.getElementById("msg").textContent = "Coupon " + code + " applied";
    };
  }
});
</script></body></html>"""

INNER = """<!doctype html><html><head><title>Payment</title></head><body>
<label>Card number <input id="card"></label><button id="pay">Pay now</button><p id="paid"></p>
<script>
window.paid = 0;
document.getElementById("pay").onclick = () => {
  window.paid += 1;
  const card = document.getElementById("card").value;
  document.getElementById("paid").textContent = "Paid with " + card;
};
</script></body></html>"""


def _long() -> str:
    sections = []
    for n in range(1, 41):
        paragraphs = "".join(
            f"<p>Section {n}, paragraph {k}: the quick brown fox jumps over the lazy dog "
            "while the documentation explains, at some length, what each option does.</p>"
            for k in range(1, 6))
        sections.append(f'<h2 id="s{n}">Section {n}</h2>{paragraphs}'
                        f'<a href="#s{n}">Permalink {n}</a>')
    return ("<!doctype html><html><head><title>Manual</title></head><body><main>"
            "<h1>The manual</h1>" + "".join(sections) +
            '<button id="last" onclick="window.bottomClicks=(window.bottomClicks||0)+1">'
            "Bottom button</button><p>NEEDLE-at-the-end</p></main></body></html>")


# Two documents with the same structure, so Playwright gives their buttons the same refs.
KEEP = """<!doctype html><html><head><title>Keep</title></head><body><main>
<h1>First document</h1><button onclick="window.kept=(window.kept||0)+1">Keep everything</button>
<a href="/delete.html">Next document</a></main></body></html>"""
DELETE = """<!doctype html><html><head><title>Delete</title></head><body><main>
<h1>Second document</h1>
<button onclick="window.deleted=(window.deleted||0)+1">Delete everything</button>
<a href="/keep.html">Previous document</a></main></body></html>"""

FILES = """<!doctype html><html><head><title>Files</title></head><body><main>
<h1>Files</h1>
<a href="/download/report.txt">Download report</a>
<label>Attachment <input id="file" type="file"></label>
<p id="chosen">No file chosen</p>
<a href="/form.html" target="_blank">Open the form in a new tab</a>
<button id="popups" onclick="for (let i = 0; i < 6; i++) window.open('/tabs.html')">
  Open six popups</button>
<a href="/redirect?to=ELSEWHERE/form.html">Redirect elsewhere</a>
</main><script>
document.getElementById("file").onchange = e => {
  document.getElementById("chosen").textContent =
    Array.from(e.target.files).map(f => f.name + " (" + f.size + " bytes)").join(", ");
};
</script></body></html>"""

CANVAS = """<!doctype html><html><head><title>Canvas</title></head><body>
<canvas id="c" width="600" height="400"></canvas><script>
const g = document.getElementById("c").getContext("2d");
g.fillStyle = "#c00"; g.fillRect(0, 0, 600, 400);
g.fillStyle = "#fff"; g.font = "48px sans-serif"; g.fillText("PRICE 42", 150, 220);
</script></body></html>"""

STORM = """<!doctype html><html><head><title>Storm</title></head><body><main>
<h1>Alerts</h1>
<button onclick="for (let i = 1; ; i++) alert('Message ' + i)">Start the storm</button>
<button onclick="window.clicks = (window.clicks || 0) + 1;
                 this.textContent = 'Counted ' + window.clicks">Count</button>
<a id="big" href="/download/big.bin" download>Big download</a>
</main></body></html>"""
BIG_BYTES = 8 * 1024 * 1024  # /download/big.bin: far over any test's max_download_bytes

PAGES: dict[str, str] = {
    "/form.html": FORM, "/tabs.html": TABS, "/modal.html": MODAL, "/table.html": _table(),
    "/frames.html": FRAMES, "/inner.html": INNER, "/long.html": _long(), "/keep.html": KEEP,
    "/delete.html": DELETE, "/files.html": FILES, "/canvas.html": CANVAS,
    "/storm.html": STORM,
}
SAVE_DELAY_S = 0.4  # the server takes this long to save: the toast comes after the fetch


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        return

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.server.hits.append(parts.path)
        if parts.path in PAGES:
            page = PAGES[parts.path].replace(
                "ELSEWHERE", f"http://elsewhere.localhost:{self.server.port}")
            self._send(200, page.encode(), "text/html; charset=utf-8")
        elif parts.path == "/api/save":
            time.sleep(SAVE_DELAY_S)  # server-side work; the client waits on the response
            self._send(200, b"version 2", "text/plain")
        elif parts.path == "/download/report.txt":
            self._send(200, b"quarterly numbers\n", "text/plain",
                       {"Content-Disposition": 'attachment; filename="../../report.txt"'})
        elif parts.path == "/download/big.bin":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(BIG_BYTES))
            self.send_header("Content-Disposition", 'attachment; filename="big.bin"')
            self.end_headers()
            chunk = b"\0" * 65536
            try:
                for _ in range(BIG_BYTES // len(chunk)):
                    self.wfile.write(chunk)
                    self.server.big_sent += len(chunk)
            except OSError:  # the browser's proxy cut the download
                return
        elif parts.path == "/redirect":
            target = parse_qs(parts.query).get("to", ["/"])[0]
            self._send(302, b"", "text/plain", {"Location": target})
        else:
            self._send(404, b"<h1>Not found</h1>", "text/html")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    hits: list[str]
    port: int
    big_sent: int


class Site:
    """``with Site() as site: site.url("/form.html")``."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.hits = []
        self._server.big_sent = 0
        self.port = self._server.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=f"site-{self.port}")

    @property
    def hits(self) -> list[str]:
        return self._server.hits

    @property
    def big_sent(self) -> int:
        """Bytes of /download/big.bin written to the socket so far."""
        return self._server.big_sent

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
