"""Desktop observe and act latency: our path vs a naive baseline, side by side in one run.

    .venv/bin/python bench/desktop_latency.py [--runs N] [--extra N ...]

Starts a private headless desktop (Xvfb, D-Bus, AT-SPI; Debian's packages) and our GTK test
window (``tests/desktop/gtk_app.py``) with ``--extra`` additional buttons for bigger trees.
The baseline runs in a persistent ``/usr/bin/python3`` process (pyatspi + python-xlib), so
both sides pay one pipe hop per request and no interpreter start-up.

Printed per tree size (medians over ``--runs``; ratio = ours / baseline, below 1 is faster):

* ``observe_ms``: our ``desktop_observe`` of the window (window list, bounded tree walk,
  window capture, PNG, state, delta) vs a naive full pyatspi walk of the whole desktop
  (every application, every node: role, name, states, extents, text; no bounds, no
  pruning of hidden subtrees, no screenshot);
* ``semantic_ms``: our helper's bounded tree walk alone vs the same naive walk;
* ``click_ms``: our guarded ``desktop_click`` by ref (state check, live window list,
  element recheck, action, re-observation; settle 0) vs a raw XTest click at the same point;
* ``type_ms``: our guarded ``desktop_type`` by ref (all of the above plus focus and the
  foreground recheck) vs raw XTest key events for the same text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from deepseek_eyes.desktop.headless import HeadlessDesktop
from deepseek_eyes.desktop.service import DesktopService
from deepseek_eyes.settings import DesktopSettings
from desktop.support import GtkApp

BASELINE = r'''
import json, sys, time, warnings
warnings.simplefilter("ignore")
import pyatspi
from Xlib import X, XK, display
from Xlib.ext import xtest
d = display.Display()

def walk():
    n = 0
    stack = [pyatspi.Registry.getDesktop(0)]
    while stack:
        acc = stack.pop()
        n += 1
        acc.getRoleName(); acc.name; acc.getState().getStates()
        try:
            acc.queryComponent().getExtents(0)
        except NotImplementedError:
            pass
        try:
            t = acc.queryText(); t.getText(0, t.characterCount)
        except NotImplementedError:
            pass
        stack.extend(acc)
    return n

for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "walk":
        out = {"nodes": walk()}
    elif req["op"] == "click":
        xtest.fake_input(d, X.MotionNotify, x=req["x"], y=req["y"])
        xtest.fake_input(d, X.ButtonPress, 1); xtest.fake_input(d, X.ButtonRelease, 1)
        d.sync(); out = {}
    else:
        for ch in req["text"]:
            code = d.keysym_to_keycode(XK.string_to_keysym(ch))
            xtest.fake_input(d, X.KeyPress, code); xtest.fake_input(d, X.KeyRelease, code)
        d.sync(); out = {}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
'''


class Baseline:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", BASELINE],
                                     env={**os.environ, **env}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "inf"


async def measure(env: dict[str, str], app: GtkApp, runs: int, baseline: Baseline,
                  label: str) -> None:
    service = DesktopService(DesktopSettings(settle=0, max_elements=2000),
                             environment=env)
    observe: list[float] = []
    semantic: list[float] = []
    naive: list[float] = []
    clicks: list[float] = []
    raw_clicks: list[float] = []
    types: list[float] = []
    raw_types: list[float] = []
    nodes = elements = 0
    try:
        await service.call("desktop_observe", {"scope": "window", "window": app.title})
        # Phase by phase, so an input's redraws never land in the other side's reading.
        for _ in range(runs):
            start = time.perf_counter()
            seen = await service.call("desktop_observe", {"scope": "window",
                                                          "window": app.title})
            observe.append(ms(start))
            elements = seen.data["semanticStatus"]["elements"]
            semantic.append(seen.data["semanticStatus"]["elapsed_ms"])
            start = time.perf_counter()
            nodes = baseline.ask(op="walk")["nodes"]
            naive.append(ms(start))
        for _ in range(runs):
            state = service.book.current
            assert state is not None
            clear = next(e for e in state.elements.values() if e.name == "Clear")
            start = time.perf_counter()
            clicked = await service.call("desktop_click", {"state_id": state.state_id,
                                                           "ref": clear.ref})
            clicks.append(ms(start))
            assert not clicked.is_error, clicked.text
            x, y, w, h = clear.bounds
            start = time.perf_counter()
            baseline.ask(op="click", x=x + w // 2, y=y + h // 2)
            raw_clicks.append(ms(start))
        for _ in range(runs):
            state = service.book.current
            assert state is not None
            entry = next(e for e in state.elements.values() if e.role == "text")
            start = time.perf_counter()
            typed = await service.call("desktop_type", {"state_id": state.state_id,
                                                        "ref": entry.ref, "text": "bench"})
            types.append(ms(start))
            assert not typed.is_error, typed.text
            start = time.perf_counter()
            baseline.ask(op="type", text="bench")
            raw_types.append(ms(start))
    finally:
        await service.aclose()
    med = statistics.median
    print(f"{label} tree: ours={elements} elements (bounded, showing only) "
          f"baseline={nodes} nodes (whole desktop)")
    for name, ours, base in (("observe_ms", observe, naive), ("semantic_ms", semantic, naive),
                             ("click_ms", clicks, raw_clicks), ("type_ms", types, raw_types)):
        print(f"{label} {name}: ours={med(ours):.1f} baseline={med(base):.1f} "
              f"ratio={ratio(med(ours), med(base))}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--extra", type=int, nargs="*", default=[0, 250])
    options = parser.parse_args()
    with HeadlessDesktop() as desktop:
        env = desktop.environment
        baseline = Baseline(env)
        try:
            for extra in options.extra:
                app = GtkApp(env, f"Bench {extra}")
                try:
                    if extra:
                        app.send(f"many {extra}")
                    await measure(env, app, options.runs, baseline, f"extra={extra}")
                finally:
                    app.close()
        finally:
            baseline.close()


if __name__ == "__main__":
    asyncio.run(main())
