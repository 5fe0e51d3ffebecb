"""The approval console in headless Chromium (Debian's, driven by Playwright): a person
approves a plan, runs it, and sees its live output and receipt."""

from __future__ import annotations

import secrets
from pathlib import Path

from deepseek_eyes.terminal.policy.paths import Workspace
from deepseek_eyes.terminal.receipts.keyring import Keyring
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService
from deepseek_eyes.terminal.transport.console_login import ConsoleLogins
from deepseek_eyes.terminal.transport.http import HttpOptions, build_http_app
from terminal.support import require_executable, require_module, serve_in_thread

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def test_console_approves_a_plan_and_shows_its_output(workspace: Path, tmp_path: Path) -> None:
    sync_api = require_module("playwright.sync_api")
    chromium = require_executable("chromium")
    token = secrets.token_urlsafe(32)
    service = TerminalService(ServiceConfig(Workspace.of([workspace]), mode="confirm"),
                              Keyring([b"c" * 32]), tmp_path / "receipts")
    session_id = service.open_session()["session_id"]
    plan = service.plan(session_id=session_id,
                        argv=["sh", "-c", "echo approved-and-ran;  echo '  two spaces' >&2"])
    assert plan["decision"]["requires_approval"]
    invisible = service.plan(session_id=session_id, argv=["echo", "a\u200bb"])
    assert invisible["state"] == "refused"
    codes: list[str] = []
    logins = ConsoleLogins(codes.append)
    logins.issue()
    url, server, thread = serve_in_thread(build_http_app(service, HttpOptions(token=token),
                                                         logins=logins))
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                         args=CHROMIUM_ARGS)
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{url}/console/#login={codes[0]}")
            card = page.locator(f"[data-plan='{plan['plan_id']}']")
            sync_api.expect(card).to_contain_text("risk high", timeout=20_000)
            args = card.locator(".arg")
            sync_api.expect(args).to_have_count(3)
            assert args.nth(2).inner_text() == "echo approved-and-ran;  echo '  two spaces' >&2"
            refused = page.locator(f"[data-plan='{invisible['plan_id']}']")
            sync_api.expect(refused).to_contain_text("refused")
            assert "#login" not in page.url  # the code left the address bar
            credential = page.locator("#credential").inner_text()
            assert credential.startswith("console-")
            cookies = page.context.cookies()
            assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [
                ("deepseek_eyes_console", True, "Strict")]
            assert page.evaluate("document.cookie") == ""  # script cannot read it
            card.get_by_role("button", name="Approve").click()
            card.get_by_role("button", name="Run").click()
            sync_api.expect(page.locator("#output")).to_contain_text("approved-and-ran",
                                                                     timeout=20_000)
            sync_api.expect(card.locator(".receipt")).to_be_visible(timeout=20_000)
            sync_api.expect(page.locator("#receipts")).to_contain_text("completed")
            assert errors == []
            browser.close()
    finally:
        server.should_exit = True
        thread.join(30)
    receipts = service.receipts.recent(5)
    assert receipts[-1]["approval"]["via"] == "console"
    assert receipts[-1]["approval"]["by"] == credential
    assert len(codes) == 2  # the code was spent; a fresh one was issued for the next login
    assert receipts[-1]["stdout"]["text"] == "approved-and-ran\n"
