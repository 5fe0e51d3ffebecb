"""The native helper's client: a helper that cannot start, cannot reach the desktop, or
stops answering is a coded failure, and a hung one is killed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from deepseek_eyes.desktop.native import LinuxBackend, NativeHelper
from deepseek_eyes.errors import DesktopError, DesktopTimeoutError
from desktop.support import PYTHON, require_desktop

pytestmark = pytest.mark.anyio


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "helper.py"
    path.write_text(body)
    return path


async def test_a_missing_interpreter_is_unavailable(tmp_path: Path) -> None:
    helper = NativeHelper(tmp_path / "no-python", {}, timeout=2)
    with pytest.raises(DesktopError) as caught:
        await helper.request("windows")
    assert caught.value.code == "DESKTOP_UNAVAILABLE"


async def test_a_helper_that_stops_answering_times_out_and_is_killed(tmp_path: Path) -> None:
    hung = script(tmp_path, "import sys, time\n"
                            "print('{\"id\": 0, \"ok\": true, \"result\": {}}', flush=True)\n"
                            "sys.stdin.readline()\ntime.sleep(60)\n")
    helper = NativeHelper(Path(sys.executable), dict(os.environ), timeout=0.5, script=hung)
    await helper.start()
    proc = helper._proc
    assert proc is not None
    with pytest.raises(DesktopTimeoutError) as caught:
        await helper.request("windows")
    assert caught.value.code == "DESKTOP_TIMEOUT"
    assert proc.returncode is not None  # killed, not left behind
    await helper.aclose()


async def test_a_helper_error_keeps_its_code(tmp_path: Path) -> None:
    echo = script(tmp_path, "import json, sys\n"
                            "print(json.dumps({'id': 0, 'ok': True, 'result': {}}), flush=True)\n"
                            "for line in sys.stdin:\n"
                            "    req = json.loads(line)\n"
                            "    print(json.dumps({'id': req['id'], 'ok': False, 'error': {\n"
                            "        'code': 'DESKTOP_TARGET_GONE', 'message': 'gone'}}),"
                            " flush=True)\n")
    helper = NativeHelper(Path(sys.executable), dict(os.environ), timeout=5, script=echo)
    with pytest.raises(DesktopError) as caught:
        await helper.request("element", bus=":1.1", path="/x")
    assert caught.value.code == "DESKTOP_TARGET_GONE"
    await helper.aclose()


async def test_the_real_helper_without_a_display_is_unavailable() -> None:
    require_desktop()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    helper = NativeHelper(Path(PYTHON), env, timeout=10)
    with pytest.raises(DesktopError) as caught:
        await helper.request("windows")
    assert caught.value.code == "DESKTOP_UNAVAILABLE"


def test_a_windows_ref_stays_when_its_x_window_becomes_known() -> None:
    """A starting app's window is listed from AT-SPI before its X window is mapped (no X
    id matched yet), then with it: one window, one ref (a ref made from the X id changed,
    and the window listed a moment before was "gone" when observed)."""
    backend = LinuxBackend(Path(sys.executable), {}, timeout=5)
    item = {"bus": ":1.42", "path": "/org/a11y/atspi/accessible/7", "name": "Eyes Zenity",
            "app": "zenity", "pid": 4242, "role": "dialog", "states": ["showing"],
            "bounds": [10, 10, 300, 200]}
    before = backend._window({**item, "xid": None})
    after = backend._window({**item, "xid": 0x1200007})
    assert before.ref == after.ref
    assert after.handle["xid"] == 0x1200007
    other = backend._window({**item, "path": "/org/a11y/atspi/accessible/8", "xid": None})
    assert other.ref != before.ref
