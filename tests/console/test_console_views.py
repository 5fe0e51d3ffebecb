"""The web console's reads over a real data directory: the list paged by the server, each
conversation's client and path, the fork tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepseek_eyes.console import views
from deepseek_eyes.errors import ConsoleError
from deepseek_eyes.home import DataHome
from deepseek_eyes.store import scopes
from deepseek_eyes.store.events import Fork, SessionStore, TurnRecord


def _turn(sid: str, n: int, path: str, at: float) -> TurnRecord:
    return TurnRecord(id=f"turn-{sid}-{n}", session_id=sid, started_at=at, ended_at=at + 1,
                      model="deepseek-v4-pro", path=path, outcome="ok", code=None, details={})


@pytest.fixture
def home(tmp_path: Path) -> DataHome:
    data = DataHome(tmp_path / "data")
    store = SessionStore(data.db, clock=lambda: 1000.0)
    for i in range(7):
        sid = f"s{i}"
        store.append(sid, [{"role": "user", "content": f"question {i}"}],
                     create=("cli", "gateway", "gateway:anthropic", "gateway:responses")[i % 4],
                     turn=_turn(sid, 0, "bridged", 1000.0 + i))
    store.append("s1", [{"role": "user", "content": "and now?"}],
                 turn=_turn("s1", 1, "native", 2000.0))
    return data


def test_the_list_is_paged_by_the_server_newest_first(home: DataHome) -> None:
    first = views.conversations(home.db, search=None, limit=3)
    assert len(first["conversations"]) == 3
    assert first["next_offset"] == 3
    second = views.conversations(home.db, search=None, limit=3, offset=3)
    third = views.conversations(home.db, search=None, limit=3, offset=6)
    ids = [c["id"] for page in (first, second, third) for c in page["conversations"]]
    assert sorted(ids) == [f"s{i}" for i in range(7)]  # each once, none lost between pages
    assert third["next_offset"] is None
    assert views.conversations(home.db, search=None, limit=3, offset=70)["conversations"] == []
    found = views.conversations(home.db, search="question 5", limit=50)["conversations"]
    assert [c["id"] for c in found] == ["s5"]
    assert found[0]["preview"] == "question 5"


def test_each_conversation_says_its_client_and_path(home: DataHome) -> None:
    rows = {c["id"]: c for c in views.conversations(home.db, search=None,
                                                    limit=50)["conversations"]}
    assert [rows[f"s{i}"]["client"] for i in range(4)] == [
        "CLI", "OpenAI", "Claude Code", "Codex"]
    assert rows["s1"]["path"] == "both"  # a bridged turn, then a native one
    assert rows["s1"]["turns"] == 2
    assert rows["s0"]["path"] == "bridged"
    shown = views.conversation(home.db, "s2")
    assert (shown["client"], shown["path"]) == ("Claude Code", "bridged")


def test_a_fork_tree_holds_the_root_and_every_branch(home: DataHome) -> None:
    store = SessionStore(home.db)
    store.append("f1", [{"role": "user", "content": "question 0"},
                        {"role": "user", "content": "branch"}],
                 create="cli", fork=Fork("s0", 1))
    store.append("f2", [{"role": "user", "content": "question 0"},
                        {"role": "user", "content": "deeper"}],
                 create="cli", fork=Fork("f1", 1))
    tree = views.fork_tree(home.db, "f1")
    assert [(n["id"], n["parent"], n["depth"], n["current"]) for n in tree] == [
        ("s0", None, 0, False), ("f1", "s0", 1, True), ("f2", "f1", 2, False)]
    shown = views.conversation(home.db, "f2")["tree"]
    assert [(n["id"], n["current"]) for n in shown] == [
        ("s0", False), ("f1", False), ("f2", True)]


def test_an_image_that_is_not_the_conversations_is_not_found(home: DataHome) -> None:
    with pytest.raises(ConsoleError) as caught:
        views.provenance(home.db, "s0", "0" * 64)
    assert caught.value.code == "CONSOLE_NOT_FOUND"
    with pytest.raises(ConsoleError) as caught:
        views.conversations(home.db, search="x" * 201, limit=5)
    assert caught.value.code == "CONSOLE_ARGUMENT_INVALID"


def test_a_pasted_config_is_judged_like_an_imported_file() -> None:
    """The console's paste goes through the importer's own rules (mcp import)."""
    from deepseek_eyes.errors import McpError
    from deepseek_eyes.mcp_host.importer import import_document

    kept = import_document(json.dumps({"mcpServers": {"docs": {
        "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "${DOCS_KEY}"}}}}).encode())
    assert [(e["id"], e["headers"]) for e in kept.servers] == [
        ("docs", {"X-Key": {"env": "DOCS_KEY"}})]
    with pytest.raises(McpError) as caught:
        import_document(b"{not json")
    assert caught.value.code == "MCP_IMPORT_INVALID"
    assert "the pasted config is not valid JSON" in caught.value.message
    with pytest.raises(McpError) as caught:
        import_document(json.dumps({"mcpServers": {"docs": {
            "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "sk-literal-123456abcdef"}}}
        }).encode())
    assert caught.value.code == "MCP_IMPORT_INVALID"
    assert "holds a literal value" in caught.value.message


def _calls(home: DataHome) -> None:
    for i, (server, tool, status) in enumerate((
            ("time", "get_current_time", "ok"), ("time", "convert_time", "failed"),
            ("docs", "search", "ok"))):
        home.audit.write("mcp.call", server, plane="tool", tool=tool, risk="read",
                         status=status, duration_ms=1.5 + i, arguments_sha256=None,
                         code="MCP_TIMEOUT" if status == "failed" else None)


def test_mcp_calls_filter_by_server_tool_and_outcome_each_verified(home: DataHome) -> None:
    _calls(home)
    everything = views.audit_search(home.db, "mcp")
    assert [r["tool"] for r in everything["rows"]] == [
        "search", "convert_time", "get_current_time"]  # newest first
    assert all(r["verified"] and isinstance(r["seq"], int) for r in everything["rows"])
    time_ok = views.audit_search(home.db, "mcp", server="time", outcome="ok")["rows"]
    assert [(r["server"], r["tool"]) for r in time_ok] == [("time", "get_current_time")]
    failed = views.audit_search(home.db, "mcp", tool="convert_time")["rows"]
    assert [(r["outcome"], r["code"]) for r in failed] == [("failed", "MCP_TIMEOUT")]
    newest = everything["rows"][0]
    assert views.audit_search(home.db, "mcp", since=newest["ts"])["rows"] == [newest]
    paged = views.audit_search(home.db, "mcp", limit=2)
    rest = views.audit_search(home.db, "mcp", before=paged["next_before"])
    assert [r["id"] for r in paged["rows"] + rest["rows"]] == [
        r["id"] for r in everything["rows"]]
    assert rest["next_before"] is None
    # A row changed behind the chain's back no longer verifies.
    with home.db.transaction() as conn:
        conn.execute("UPDATE audit SET subject = 'tampered' WHERE id = ?", (newest["id"],))
    again = views.audit_search(home.db, "mcp")["rows"]
    assert [r["verified"] for r in again] == [False, True, True]


def test_bad_audit_filters_and_unknown_records_are_refused(home: DataHome) -> None:
    from deepseek_eyes.errors import AuditError

    for call in (lambda: views.audit_search(home.db, "other"),
                 lambda: views.audit_search(home.db, "mcp", server="x" * 201),
                 lambda: views.audit_record(home.db, " ")):
        with pytest.raises(ConsoleError) as caught:
            call()
        assert caught.value.code == "CONSOLE_ARGUMENT_INVALID"
    with pytest.raises(AuditError) as missing:
        views.audit_record(home.db, "no-such-thing")
    assert missing.value.code == "AUDIT_NOT_FOUND"
    assert views.audit_record(home.db, "s0")["kind"] == "session"


def test_screens_show_each_sessions_latest_state_steps_and_observation(home: DataHome) -> None:
    for i, (state, outcome) in enumerate((("st-1", "ok"), ("st-2", "ok"), ("st-2", "refused"))):
        home.audit.write("browser.action", ("browser_navigate", "browser_click",
                                            "browser_type")[i], owner="s0", outcome=outcome,
                         code="BROWSER_REFUSED" if outcome == "refused" else None,
                         state_before=f"st-{i}", state_after=state, arguments=["ref"],
                         url="https://example.test/", ms=5, screenshot_sha256=None)
    home.audit.write("browser.action", "browser_click", owner="s1", outcome="ok",
                     state_before="x", state_after="other", arguments=[], url=None, ms=1,
                     screenshot_sha256=None)
    SessionStore(home.db).append("s0", [{"role": "tool", "name": "browser_observe",
                                         "tool_call_id": "c1", "content": "a page: <b>hi</b>"}])
    found = views.screens(home.db, "s0")
    browser = found["screens"]["browser"]
    assert browser["state_id"] == "st-2"
    assert [s["action"] for s in browser["steps"]] == [
        "browser_type", "browser_click", "browser_navigate"]
    assert browser["steps"][0]["code"] == "BROWSER_REFUSED"
    assert all(s["verified"] for s in browser["steps"])
    assert browser["screenshot"] is None
    assert "desktop" not in found["screens"]  # no desktop session: nothing said
    assert found["observation"]["tool"] == "browser_observe"
    assert found["observation"]["parts"][0]["text"] == "a page: <b>hi</b>"
    assert views.screens(home.db, "s2") == {"id": "s2", "screens": {}, "observation": None}
    with pytest.raises(ConsoleError) as caught:
        views.screens(home.db, "nope")
    assert caught.value.code == "CONSOLE_NOT_FOUND"


def test_a_turn_lists_its_look_rereads(home: DataHome) -> None:
    calls = [{"tool": "look", "image": "img-1", "route": "local", "cached": True,
              "record_sha256": "a" * 64, "region": [0.1, 0.2, 0.5, 0.5]},
             {"tool": "mcp__time__get_current_time", "server": "time"},
             {"tool": "look", "image": "img-1", "pixels": True, "region": None},
             {"tool": "look", "image": "img-2", "code": "VISION_ALL_ROUTES_FAILED"}]
    SessionStore(home.db, clock=lambda: 3000.0).append(
        "s6", [{"role": "user", "content": "look again"}],
        turn=TurnRecord(id="turn-s6-1", session_id="s6", started_at=3000.0, ended_at=3001.0,
                        model="deepseek-v4-pro", path="bridged", outcome="ok", code=None,
                        details={"rereads": 3, "tool_calls": calls}))
    turns = {t["id"]: t for t in views.conversation(home.db, "s6")["turns"]}
    assert turns["turn-s6-0"]["looks"] == []
    looks = turns["turn-s6-1"]["looks"]
    assert [(x["image"], x["route"], x["cached"], x["code"]) for x in looks] == [
        ("img-1", "local", True, None), ("img-1", "pixels", False, None),
        ("img-2", None, False, "VISION_ALL_ROUTES_FAILED")]
    assert looks[0]["region"] == [0.1, 0.2, 0.5, 0.5]


def test_a_login_bound_to_a_scope_sees_only_that_scopes_conversations(
        home: DataHome) -> None:
    store = SessionStore(home.db)
    mine, other = scopes.gateway("key-one"), scopes.gateway("key-two")
    png = "ab" * 32
    store.append("k1", [{"role": "user", "content": [
        {"type": "text", "text": "mine"}, {"type": "image", "sha256": png}]}],
                 create="gateway", scope=mine)
    store.append("k2", [{"role": "user", "content": "theirs"}], create="gateway", scope=other)
    store.append("k3", [{"role": "user", "content": "my branch"}], create="gateway",
                 scope=mine, fork=Fork("k1", 1))
    listed = views.conversations(home.db, search=None, limit=50, scope=mine)["conversations"]
    assert sorted(c["id"] for c in listed) == ["k1", "k3"]
    found = views.conversations(home.db, search="theirs", limit=50, scope=mine)
    assert found["conversations"] == []
    assert len(views.conversations(home.db, search=None, limit=50)["conversations"]) == 10
    with pytest.raises(ConsoleError) as caught:
        views.conversation(home.db, "k2", scope=mine)
    assert caught.value.code == "CONSOLE_NOT_FOUND"  # as if it were not there
    assert [n["id"] for n in views.conversation(home.db, "k3", scope=mine)["tree"]] == [
        "k1", "k3"]
    assert views.image_in_scope(home.db, png, mine)
    assert not views.image_in_scope(home.db, png, other)
    assert views.image_in_scope(home.db, png, None)  # the person's own login


def test_screens_show_the_report_v2_a_closed_browser_session_stored(home: DataHome) -> None:
    from deepseek_eyes.browser.report import Assertion, ReportRecorder, Step
    from deepseek_eyes.console.reports import stored_reports

    recorder = ReportRecorder(clock=lambda: 5000.0)
    recorder.add_step(Step(1, "browser_navigate", {"url": "https://example.test/<b>"}, None,
                           "st-1", "ok", None, "https://example.test/<b>", 5000.0, 12))
    recorder.add_step(Step(2, "browser_click", {"ref": "e3"}, "st-1", "st-1", "refused",
                           "BROWSER_STATE_STALE", None, 5001.0, 3))
    recorder.add_assertion(Assertion("text", "Total", "Total 42", True, "st-1", 1))
    data = recorder.to_dict([{"state_id": "st-1", "title": "t"}])
    sha = home.blobs.put(json.dumps(data).encode()).sha256
    store = SessionStore(home.db)
    store.append("s3", [
        {"role": "tool", "tool_call_id": "c1", "name": "browser_close",
         "content": f"browser closed; nothing a site stored was kept.\nreport stored as "
                    f"sha256:{sha}"},
        {"role": "tool", "tool_call_id": "c2", "name": "browser_close",
         "content": f"report stored as sha256:{'0' * 64}"}])
    reports = stored_reports(home.db, home.blobs, "s3")
    assert [(r["sha256"], r["unreadable"]) for r in reports] == [
        ("0" * 64, "not stored"), (sha, None)]  # newest first, each said as it is
    shown = reports[1]
    assert shown["schema"] == "deepseekeyes.browser.report.v2"
    assert [(s["index"], s["tool"], s["outcome"], s["code"]) for s in shown["steps"]] == [
        (1, "browser_navigate", "ok", None), (2, "browser_click", "refused",
                                              "BROWSER_STATE_STALE")]
    assert shown["assertions"][0]["passed"] is True
    assert shown["summary"]["steps"] == 2
    assert stored_reports(home.db, home.blobs, "s4") == []
