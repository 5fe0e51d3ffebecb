"""``evidence validate`` takes what ``see --json`` printed, as it is: one record or one
record a line, each record's evidence gated, a failure naming its line and pointer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from e2e.test_cli import RECEIPT, json_error, run


def test_see_json_output_validates_as_it_is(tmp_path: Path, isolated_home: Path) -> None:
    other = tmp_path / "other.png"
    shutil.copyfile(RECEIPT, other)
    one = run("see", str(RECEIPT), "--json")
    assert one.returncode == 0, one.stderr
    (tmp_path / "one.json").write_text(one.stdout, encoding="utf-8")
    done = run("evidence", "validate", str(tmp_path / "one.json"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"valid": True, "file": str(tmp_path / "one.json"),
                                       "variant": "deepseekeyes.evidence.v1"}

    both = run("see", str(RECEIPT), str(other), "--json")
    assert both.returncode == 0, both.stderr
    assert len(both.stdout.splitlines()) == 2
    (tmp_path / "both.jsonl").write_text(both.stdout, encoding="utf-8")
    done = run("evidence", "validate", str(tmp_path / "both.jsonl"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["objects"] == 2
    plain = run("evidence", "validate", str(tmp_path / "both.jsonl"))
    assert plain.returncode == 0
    assert plain.stdout.startswith(f"{tmp_path / 'both.jsonl'}: 2 valid objects")

    first, second = (json.loads(line) for line in both.stdout.splitlines())
    second["evidence"]["confidence"] = 2
    (tmp_path / "bad.jsonl").write_text(f"{json.dumps(first)}\n{json.dumps(second)}\n",
                                        encoding="utf-8")
    error = json_error(run("evidence", "validate", str(tmp_path / "bad.jsonl"), "--json"),
                       "EVIDENCE_SCHEMA_INVALID")
    assert str(error["message"]).startswith("line 2: evidence failed the "
                                            "deepseekeyes.evidence.v1 gate at "
                                            "/evidence/confidence: ")
    details = error["details"]
    assert isinstance(details, dict)
    assert details["line"] == 2
    assert [issue["pointer"] for issue in details["errors"]] == ["/evidence/confidence"]

    refused = {"image": {"path": "x.png"}, "error": {"code": "IMAGE_EMPTY", "message": "empty",
                                                     "details": {}}}
    (tmp_path / "refused.jsonl").write_text(f"{json.dumps(first)}\n{json.dumps(refused)}\n",
                                            encoding="utf-8")
    error = json_error(run("evidence", "validate", str(tmp_path / "refused.jsonl"), "--json"),
                       "EVIDENCE_FILE_INVALID")
    assert "line 2" in str(error["message"])
    assert "IMAGE_EMPTY" in str(error["message"])
