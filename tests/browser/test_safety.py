"""Safety on real Chromium: http(s) only, allow and deny lists (redirects included),
downloads confined to their directory, uploads only from named directories, bounded tabs
and page loads, nothing a site stores kept after close."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from browser.site import Site
from browser.support import ref, state, value
from deepseek_eyes.browser.service import BrowserService

pytestmark = pytest.mark.anyio

Make = Callable[..., BrowserService]


async def test_navigation_policy_blocks_schemes_hosts_and_redirects(
    browser: Make, site: Site
) -> None:
    # "localhost" denies the machine in every spelling, 127.0.0.1 included.
    everywhere = browser(deny_hosts=["localhost"])
    spelled = await everywhere.call("browser_navigate", {"url": site.url("/files.html")})
    assert "deny list" in spelled.text
    svc = browser(deny_hosts=["elsewhere.localhost"])
    for url in ("file:///etc/passwd", "javascript:alert(1)", "chrome://version"):
        refused = await svc.call("browser_navigate", {"url": url})
        assert refused.code == "BROWSER_NAVIGATION_BLOCKED", url
    denied = await svc.call("browser_navigate",
                            {"url": f"http://Elsewhere.LOCALHOST.:{site.port}/"})
    assert denied.code == "BROWSER_NAVIGATION_BLOCKED"
    files = await svc.call("browser_navigate", {"url": site.url("/files.html")})
    assert not files.is_error, files.text
    hits = len(site.hits)
    # A link to an allowed URL that redirects to a denied host: the proxy refuses the hop
    # before it is sent, and the tab is blanked.
    moved = await svc.call("browser_click", {"state_id": state(files),
                                             "ref": ref(files.text, "Redirect elsewhere")})
    assert "elsewhere.localhost" in moved.text
    assert "deny list" in moved.text
    assert 'blocked: GET "http://elsewhere.localhost:' in moved.text
    assert moved.data["url"] == "about:blank"
    assert "/redirect" in site.hits[hits:]
    allow_only = browser(allow_hosts=["example.org"])
    outside = await allow_only.call("browser_navigate", {"url": site.url("/form.html")})
    assert outside.code == "BROWSER_NAVIGATION_BLOCKED"
    assert "allow list" in outside.text


async def test_downloads_stay_in_their_directory(
    browser: Make, site: Site, tmp_path: Path
) -> None:
    svc = browser()
    files = await svc.call("browser_navigate", {"url": site.url("/files.html")})
    got = await svc.call("browser_click", {"state_id": state(files),
                                           "ref": ref(files.text, "Download report")})
    events = " ".join(got.data.get("events", []))
    if "downloaded" not in events:  # the save finishes after the click's settle
        events += " ".join((await svc.call("browser_observe", {})).data.get("events", []))
    assert "report.txt' (18 bytes)" in events
    (saved,) = (tmp_path / "downloads").glob("*report.txt")  # "../../" in its name: no way out
    assert saved.read_text() == "quarterly numbers\n"
    assert not (tmp_path / "report.txt").exists()
    assert not list((tmp_path / "downloads" / ".incoming").iterdir())  # no partial left
    small = browser(max_download_bytes=4)
    files = await small.call("browser_navigate", {"url": site.url("/files.html")})
    again = await small.call("browser_click", {"state_id": state(files),
                                               "ref": ref(files.text, "Download report")})
    events = " ".join(again.data.get("events", []))
    if "deleted" not in events:
        events += " ".join((await small.call("browser_observe", {})).data.get("events", []))
    assert "was cut at 4 bytes (browser.max_download_bytes)" in events


async def test_uploads_only_from_named_directories(
    browser: Make, site: Site, tmp_path: Path
) -> None:
    allowed = tmp_path / "outbox"
    allowed.mkdir()
    (allowed / "cv.txt").write_text("curriculum\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not send\n")
    (allowed / "link.txt").symlink_to(secret)
    off = browser()
    page = await off.call("browser_navigate", {"url": site.url("/files.html")})
    refused = await off.call("browser_upload", {"state_id": state(page),
                                                "ref": ref(page.text, "Attachment"),
                                                "paths": [str(allowed / "cv.txt")]})
    assert refused.code == "BROWSER_UPLOAD_REFUSED"
    svc = browser(upload_roots=[str(allowed)])
    page = await svc.call("browser_navigate", {"url": site.url("/files.html")})
    field = ref(page.text, "Attachment")
    for path in (secret, allowed / "link.txt", allowed / "missing.txt", allowed):
        outside = await svc.call("browser_upload", {"state_id": state(page), "ref": field,
                                                    "paths": [str(path)]})
        assert outside.code == "BROWSER_UPLOAD_REFUSED", path
    assert await value(svc, "document.getElementById('file').files.length") == 0
    sent = await svc.call("browser_upload", {"state_id": state(outside), "ref": field,
                                             "paths": [str(allowed / "cv.txt")]})
    assert not sent.is_error, sent.text
    assert 'new text: "cv.txt (11 bytes)"' in sent.text


async def test_tabs_and_page_loads_are_bounded(browser: Make, site: Site) -> None:
    svc = browser(max_tabs=2, max_navigations=4)
    files = await svc.call("browser_navigate", {"url": site.url("/files.html")})
    opened = await svc.call("browser_click", {"state_id": state(files),
                                              "ref": ref(files.text, "Open the form")})
    assert "a new tab opened and is now the active tab" in opened.text
    assert opened.data["url"] == site.url("/form.html")
    assert svc.session is not None
    assert svc.session.tabs == 2
    back = await svc.call("browser_back", {"state_id": state(opened)})
    assert back.code == "BROWSER_ACTION_FAILED"  # a new tab has no earlier page
    popups = await svc.call("browser_navigate", {"url": site.url("/files.html")})
    storm = await svc.call("browser_click", {"state_id": state(popups),
                                             "ref": ref(popups.text, "Open six popups")})
    assert "at most 2 tabs" in storm.text
    assert svc.session.tabs <= 2
    last = await svc.call("browser_navigate", {"url": site.url("/tabs.html")})
    assert last.code == "BROWSER_LIMIT"
    assert "page loads" in last.text


async def test_nothing_a_site_stores_survives_close(browser: Make, site: Site) -> None:
    svc = browser()
    await svc.call("browser_navigate", {"url": site.url("/form.html")})
    assert svc.session is not None
    await svc.session.page.evaluate("localStorage.setItem('token', 'abc');"
                                    "document.cookie = 'sid=1; max-age=3600'")
    closed = await svc.call("browser_close", {})
    assert closed.data["closed"] is True
    assert closed.data["report"]["summary"]["steps"] == 1
    assert closed.data["report_sha256"] is not None
    again = await svc.call("browser_navigate", {"url": site.url("/form.html")})
    assert state(again) == "s2"  # state ids keep counting across a restart
    assert await value(svc, "localStorage.getItem('token')") is None
    assert await value(svc, "document.cookie") == ""


async def test_every_action_is_on_the_audit_chain_without_what_was_typed(
    site: Site, tmp_path: Path
) -> None:
    from browser.support import require_browser, settings
    from deepseek_eyes.audit.verify import verify_database
    from deepseek_eyes.home import DataHome

    require_browser()
    home = DataHome(tmp_path / "home")
    svc = BrowserService(settings(), downloads_dir=tmp_path / "dl", audit=home.audit,
                         owner="conn-1")
    try:
        first = await svc.call("browser_navigate", {"url": site.url("/form.html?k=tok123")})
        typed = await svc.call("browser_type", {"state_id": state(first),
                                                "ref": ref(first.text, "Password"),
                                                "text": "correct horse"})
        assert not typed.is_error, typed.text
        stale = await svc.call("browser_type", {"state_id": state(first),
                                                "ref": ref(first.text, "Full name"),
                                                "text": "Mallory"})
        assert stale.code == "BROWSER_STATE_STALE"
    finally:
        await svc.aclose()
    rows = [r for r in reversed(home.audit.recent()) if r["kind"] == "browser.action"]
    assert [(r["subject"], r["details"]["outcome"], r["details"]["code"]) for r in rows] == [
        ("browser_navigate", "ok", None), ("browser_type", "ok", None),
        ("browser_type", "refused", "BROWSER_STATE_STALE")]
    assert rows[1]["details"]["arguments"] == ["ref", "state_id", "text"]
    assert rows[1]["details"]["owner"] == "conn-1"
    stored = home.db.query("SELECT details FROM audit")
    assert not any("correct horse" in r["details"] or "Mallory" in r["details"]
                   or "tok123" in r["details"] for r in stored)
    home.seal()  # a chain verifies under a signed checkpoint
    report = verify_database(home.db, home.audit_keys())
    assert report.ok, report.as_json()
    assert report.kinds["browser.action"] == 3
    home.close()


async def test_a_download_is_cut_while_it_streams(
    browser: Make, site: Site, tmp_path: Path
) -> None:
    from browser.site import BIG_BYTES

    limit = 1024 * 1024
    svc = browser(max_download_bytes=limit)
    page = await svc.call("browser_navigate", {"url": site.url("/storm.html")})
    got = await svc.call("browser_click", {"state_id": state(page),
                                           "ref": ref(page.text, "Big download")})
    assert svc.session is not None
    await svc.session.background_done(30)
    events = " ".join(got.data.get("events", []) + (
        await svc.call("browser_observe", {})).data.get("events", []))
    assert f"was cut at {limit} bytes (browser.max_download_bytes)" in events
    assert "big.bin' failed" in events
    assert not list((tmp_path / "downloads").glob("big*"))  # a cut download is not kept
    # The control: under a limit above its size, the same download arrives whole.
    roomy = browser(max_download_bytes=BIG_BYTES + 1)
    page = await roomy.call("browser_navigate", {"url": site.url("/storm.html")})
    await roomy.call("browser_click", {"state_id": state(page),
                                       "ref": ref(page.text, "Big download")})
    assert roomy.session is not None
    await roomy.session.background_done(30)
    (whole,) = (tmp_path / "downloads").glob("big*")
    assert whole.stat().st_size == BIG_BYTES


async def test_a_dialog_storm_is_ended_and_the_browser_stays_usable(
    browser: Make, site: Site
) -> None:
    svc = browser(max_dialogs_per_minute=3)
    page = await svc.call("browser_navigate", {"url": site.url("/storm.html")})
    seen = await svc.call("browser_click", {"state_id": state(page),
                                            "ref": ref(page.text, "Start the storm")})
    answered = 0
    while seen.data.get("dialog") and answered < 10:
        seen = await svc.call("browser_dialog", {"state_id": state(seen), "accept": True})
        answered += 1
    assert answered == 3  # the fourth dialog closed the tab
    assert svc.session is not None
    await svc.session.background_done(10)
    events = " ".join(seen.data.get("events", []) + (
        await svc.call("browser_observe", {})).data.get("events", []))
    assert "more than 3 dialogs in a minute: the tab that opened them was closed" in events
    again = await svc.call("browser_navigate", {"url": site.url("/storm.html")})
    counted = await svc.call("browser_click", {"state_id": state(again),
                                               "ref": ref(again.text, "Count")})
    assert not counted.is_error, counted.text
    assert await value(svc, "window.clicks") == 1
