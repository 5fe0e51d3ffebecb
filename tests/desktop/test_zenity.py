"""zenity, a real GTK program that checks itself: it prints the entry's text when OK is
pressed. Observed, typed into and clicked by ref through AT-SPI; launched through
``desktop.apps`` and killed at ``desktop_close``."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator

import anyio
import pytest

from deepseek_eyes.desktop.service import DesktopService
from desktop.support import require_desktop

pytestmark = pytest.mark.anyio


def ref(text: str, line: str) -> str:
    found = re.search(r"\[ref=([ew][0-9a-f]{10})\] " + re.escape(line), text)
    assert found, f"{line!r} not in {text}"
    return found.group(1)


@pytest.fixture
def zenity(desktop_env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    require_desktop(zenity=True)
    proc = subprocess.Popen(
        ["zenity", "--entry", "--title=Eyes Zenity",  # noqa: S607 - Debian's, from PATH
         "--text=Your name"],
        env={**os.environ, **desktop_env}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=5)


async def window_of(service: DesktopService, title: str) -> str:
    with anyio.fail_after(15):
        while True:
            listing = await service.call("desktop_observe", {})
            if f'"{title}"' in listing.text:
                return listing.text
            await anyio.sleep(0.05)


async def test_zenity_entry_typed_and_confirmed_by_ref_prints_the_text(
    desktop: Callable[..., DesktopService], zenity: subprocess.Popen[str]
) -> None:
    service = desktop()
    listing = await window_of(service, "Eyes Zenity")
    window = ref(listing, 'dialog "Eyes Zenity"')
    seen = await service.call("desktop_observe", {"scope": "window", "window": window})
    assert 'label "Your name"' in seen.text
    entry, ok = ref(seen.text, "text"), ref(seen.text, 'push button "OK"')
    typed = await service.call("desktop_type", {"state_id": seen.data["state_id"],
                                                "ref": entry, "text": "Ada"})
    assert not typed.is_error, typed.text
    clicked = await service.call("desktop_click", {"state_id": typed.data["state_id"],
                                                   "ref": ok})
    assert not clicked.is_error, clicked.text
    # The dialog closed: said explicitly, and the state is the desktop's now.
    assert f"window {window}" in clicked.text
    assert "closed after the action" in clicked.text
    assert clicked.data["target_closed"] == window
    out, _ = zenity.communicate(timeout=10)
    assert out == "Ada\n"
    assert zenity.returncode == 0


async def test_launch_starts_only_configured_apps_and_close_kills_them(
    desktop: Callable[..., DesktopService]
) -> None:
    require_desktop(zenity=True)
    service = desktop(apps={"info": ["zenity", "--info", "--title=Eyes Info",
                                     "--text=Launched"]})
    launched = await service.call("desktop_launch", {"app": "info"})
    assert not launched.is_error, launched.text
    assert launched.text.startswith("launched info (pid ")
    assert 'dialog "Eyes Info"' in launched.text
    assert 'label "Launched"' in launched.text
    (pid,) = service.launcher.running
    await service.call("desktop_close", {})
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
