from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from deepseek_eyes.audit import AuditLog, reduce_for_audit
from deepseek_eyes.audit.keys import AuditKeyring, audit_directory
from deepseek_eyes.audit.verify import verify_path
from deepseek_eyes.home import DataHome
from deepseek_eyes.store.db import Database
from deepseek_eyes.usage import ProviderUsage, UsageCategory, UsageTracker


def test_provider_usage_reads_deepseek_fields() -> None:
    usage = ProviderUsage.from_openai({
        "prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
        "prompt_cache_hit_tokens": 100, "prompt_cache_miss_tokens": 20,
        "completion_tokens_details": {"reasoning_tokens": 12},
    })
    assert usage == ProviderUsage(120, 30, 12, 100, 20)
    assert ProviderUsage.from_openai(None) == ProviderUsage()
    assert ProviderUsage.from_openai({"prompt_tokens": "9"}).prompt_tokens == 0


def test_exact_and_estimated_are_kept_apart(tmp_path: Path) -> None:
    tracker = UsageTracker(Database(tmp_path / "eyes.db"))
    tracker.record_exact(UsageCategory.VISION, ProviderUsage(100, 20), source="qwen")
    tracker.record_exact(UsageCategory.PROBE, ProviderUsage(50, 5), source="qwen")
    tracker.record_estimate(UsageCategory.AVOIDED_REPLAY, 120, calls=1)
    tracker.count(UsageCategory.NATIVE_VISUAL_TURNS)
    summary = tracker.summary()
    assert summary["exact"]["vision"]["prompt_tokens"] == 100
    assert summary["exact"]["probe"]["completion_tokens"] == 5
    assert summary["estimated"]["avoided_replay"] == {"events": 1, "estimated_tokens": 120}
    assert summary["estimated"]["native_visual_turns"]["events"] == 1
    with pytest.raises(ValueError, match="exact"):
        tracker.record_estimate(UsageCategory.VISION, 1)
    with pytest.raises(ValueError, match="not an exact"):
        tracker.record_exact(UsageCategory.BRIDGE_INPUT, ProviderUsage())


def test_summed_estimates_are_one_row_a_source_written_with_the_log_queue(
    tmp_path: Path,
) -> None:
    home = DataHome(tmp_path)
    db = home.db
    tracker, log = UsageTracker(db, clock=lambda: 5.0), home.audit
    for tokens in (10, 20, 30):
        tracker.add_estimate(UsageCategory.MCP_RESULT, tokens, source="a")
        log.append("mcp.call", "a", status="ok")
    tracker.add_estimate(UsageCategory.MCP_RESULT, 7, source="b")
    outside = sqlite3.connect(tmp_path / "eyes.db")  # sees only what was committed
    count = "SELECT COUNT(*) FROM usage"
    assert outside.execute(count).fetchone()[0] == 0  # summed, with the queued rows
    db.flush()
    rows = outside.execute("SELECT ts, category, exact, source, calls, estimated_tokens"
                           " FROM usage ORDER BY source").fetchall()
    assert rows == [(5.0, "mcp_result", 0, "a", 3, 60), (5.0, "mcp_result", 0, "b", 1, 7)]
    db.flush()  # handed over once: a later flush writes nothing again
    assert outside.execute(count).fetchone()[0] == 2
    tracker.add_estimate(UsageCategory.MCP_RESULT, 1, source="a")
    with db.transaction():  # a write transaction takes them first, like the queued rows
        pass
    assert outside.execute(count).fetchone()[0] == 3
    tracker.add_estimate(UsageCategory.MCP_RESULT, 2, source="a")
    # a reader through the database sees them (it flushes first), same totals as one row each
    assert tracker.summary()["estimated"]["mcp_result"] == {"events": 6, "estimated_tokens": 70}
    home.close()
    report = verify_path(tmp_path / "eyes.db", AuditKeyring.read_only(audit_directory(tmp_path)))
    assert report.ok
    assert report.records == 7  # 3 audit rows, 4 usage rows, each chained
    with pytest.raises(ValueError, match="exact"):
        tracker.add_estimate(UsageCategory.VISION, 1)


def test_local_ocr_is_a_counter_not_provider_usage(tmp_path: Path) -> None:
    tracker = UsageTracker(Database(tmp_path / "eyes.db"))
    tracker.count(UsageCategory.LOCAL_OCR, source="local")
    tracker.count(UsageCategory.LOCAL_OCR, source="local")
    assert UsageCategory.LOCAL_OCR.counter
    assert not UsageCategory.LOCAL_OCR.exact
    assert UsageCategory.NATIVE_VISUAL_TURNS.counter
    assert not UsageCategory.AVOIDED_REPLAY.counter
    summary = tracker.summary()
    assert summary["exact"] == {}
    assert summary["estimated"]["local_ocr"] == {"events": 2, "estimated_tokens": 0}
    with pytest.raises(ValueError, match="not an exact"):
        tracker.record_exact(UsageCategory.LOCAL_OCR, ProviderUsage())


def test_usage_command_lists_counters_apart_without_tokens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from deepseek_eyes.cli import main
    from deepseek_eyes.home import DataHome
    from deepseek_eyes.settings import Settings

    with DataHome.open(Settings()) as home:
        home.usage.record_exact(UsageCategory.VISION, ProviderUsage(100, 20), source="qwen")
        home.usage.record_estimate(UsageCategory.AVOIDED_REPLAY, 120, calls=1)
        home.usage.count(UsageCategory.LOCAL_OCR, source="local")
    main(["usage"])
    text = capsys.readouterr().out
    exact, rest = text.split("estimated attribution and avoided replay:")
    estimated, counters = rest.split("counters (no provider, no tokens):")
    assert "vision" in exact
    assert "local_ocr" not in exact
    assert "avoided_replay" in estimated
    assert "events=1 tokens≈120" in estimated
    assert "local_ocr" not in estimated
    assert counters.split() == ["local_ocr", "events=1"]


def test_audit_never_holds_free_text_or_secrets(tmp_path: Path) -> None:
    log = AuditLog(Database(tmp_path / "eyes.db"))
    long_message = "upstream said: " + "x" * 500
    log.append("vision.acquire", "sha", message=long_message, api_key="sk-1", code="E")
    (row,) = log.recent()
    details = row["details"]
    assert details["api_key"] == "[redacted]"
    assert details["message"].startswith("sha256:")
    assert "x" * 100 not in str(details)
    assert details["code"] == "E"


def test_credentials_are_redacted_but_token_counts_are_kept() -> None:
    reduced = reduce_for_audit({
        "access_token": "abc", "Token": "abc", "id-token": "abc", "X-Auth-Token": "abc",
        "prompt_tokens": 12, "usage": {"completion_tokens": 3, "refresh_token": "r"},
    })
    assert reduced == {
        "access_token": "[redacted]", "Token": "[redacted]", "id-token": "[redacted]",
        "X-Auth-Token": "[redacted]", "prompt_tokens": 12,
        "usage": {"completion_tokens": 3, "refresh_token": "[redacted]"},
    }


def test_reduction_is_bounded() -> None:
    reduced = reduce_for_audit({"items": list(range(1000))})
    assert len(reduced["items"]) == 65
    deep: dict[str, object] = {}
    cursor = deep
    for _ in range(20):
        cursor["d"] = {}
        cursor = cursor["d"]  # type: ignore[assignment]
    assert "…" in str(reduce_for_audit(deep))


def test_a_row_appended_later_is_the_row_append_writes(tmp_path: Path) -> None:
    """AuditLog.append_later (an MCP call's row) stores, reduced and chained, the very row
    append stores for the same fields: no free text, no secret, the same details."""
    home = DataHome(tmp_path)
    clock = iter([1.0, 2.0])
    log = AuditLog(home.db, clock=lambda: next(clock))
    fields = {"tool": "echo", "message": "said: " + "x" * 500, "api_key": "sk-1",
              "duration_ms": 1.5, "code": None, "parent": "run-1"}
    log.append("mcp.call", "srv", **fields)
    log.append_later("mcp.call", "srv", dict(fields))
    first, second = home.db.query("SELECT ts, kind, subject, details FROM audit ORDER BY id")
    assert (first["ts"], second["ts"]) == (1.0, 2.0)  # the time of the call, not the flush
    assert tuple(first)[1:] == tuple(second)[1:]
    assert "x" * 100 not in second["details"]
    assert "sk-1" not in second["details"]
    home.close()
    report = verify_path(tmp_path / "eyes.db", AuditKeyring.read_only(audit_directory(tmp_path)))
    assert report.ok
    assert report.records == 2
