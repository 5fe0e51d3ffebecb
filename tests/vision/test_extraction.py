"""Extraction: reasoning stripping, bounded scanning, fences, selection by contract."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepseek_eyes.errors import EvidenceError
from deepseek_eyes.vision.evidence.extraction import (
    MAX_CANDIDATES,
    Candidate,
    Candidates,
    find_candidates,
    scan,
    select_candidate,
    strip_reasoning,
)
from deepseek_eyes.vision.types import Variant

TARGET_KEYS = frozenset({"answer", "confidence", "observations", "ocr", "uncertainties"})


# ------------------------------------------------------------------------ strip_reasoning


def test_text_without_reasoning_is_returned_unchanged() -> None:
    assert strip_reasoning('{"a": 1}') == ('{"a": 1}', "")


def test_every_closed_block_is_removed_and_counted() -> None:
    text = "<think>one</think>A<think>two</think>B"

    assert strip_reasoning(text) == ("AB", "2 blocks")


def test_the_block_count_comes_before_the_other_notes() -> None:
    text = "prefix</think>A<think>x</think>B<think>C"

    assert strip_reasoning(text) == ("ABC", "1 block, untagged prefix, unterminated block")


# ----------------------------------------------------------------------------------- scan


def test_scan_numbers_every_object_and_notes_its_fence() -> None:
    text = (
        '{"n": 1}\n```json\n{"n": 2}\n```\n'
        '```\n{"n": 3}\n```\n'
        '```this is prose\n{"n": 4}\n```'
    )

    assert scan(text) == Candidates(
        (
            Candidate({"n": 1}, None, 1),
            Candidate({"n": 2}, "json", 2),
            Candidate({"n": 3}, "", 3),
            Candidate({"n": 4}, "", 4),
        ),
        4,
    )


def test_scan_skips_nested_objects_and_finds_one_inside_a_broken_one() -> None:
    found = scan('{"outer": {"inner": 1}} {"broken": {"n": 2}')

    assert [c.value for c in found.kept] == [{"outer": {"inner": 1}}, {"n": 2}]
    assert found.total == 2


def test_scan_keeps_only_the_last_candidates_but_counts_all() -> None:
    count = MAX_CANDIDATES + 6
    found = scan(" ".join(json.dumps({"n": n}) for n in range(count)))

    assert found.total == count
    assert len(found.kept) == MAX_CANDIDATES
    assert found.kept[0] == Candidate({"n": 6}, None, 7)
    assert found.kept[-1] == Candidate({"n": count - 1}, None, count)


# ------------------------------------------------------------------------ find_candidates


def test_text_candidates_carry_the_reasoning_detail() -> None:
    found = find_candidates('<think>{"n": 1}</think>{"n": 2}', Variant.TARGET)

    assert found == Candidates((Candidate({"n": 2}, None, 1),), 1, "1 block")


def test_a_structured_answer_is_copied_and_never_shared() -> None:
    raw: dict[str, Any] = {"ocr": [{"bbox": (1, 2, 3, 4)}]}

    found = find_candidates(raw, Variant.TARGET)
    found.kept[0].value["ocr"].append("x")

    assert found.total == 1
    assert found.kept[0].fence is None
    assert found.kept[0].value["ocr"][0]["bbox"] == (1, 2, 3, 4)  # a tuple stays a tuple
    assert raw == {"ocr": [{"bbox": (1, 2, 3, 4)}]}


def test_an_answer_that_is_neither_text_nor_a_dict_is_not_found() -> None:
    with pytest.raises(EvidenceError) as caught:
        find_candidates([{"answer": "x"}], Variant.TARGET)  # type: ignore[arg-type]

    assert caught.value.code == "EVIDENCE_NOT_FOUND"
    assert caught.value.details == {"variant": Variant.TARGET.value, "reason": "not_an_object"}


# ----------------------------------------------------------------------- select_candidate


def found_in(*values: dict[str, Any]) -> Candidates:
    return scan(" ".join(json.dumps(value) for value in values))


def test_the_last_declared_object_wins() -> None:
    declared = {"schema": Variant.TARGET.value}
    found = found_in({**declared, "n": 1}, {**declared, "n": 2}, {"answer": "a", "ocr": []})

    assert select_candidate(found, Variant.TARGET, TARGET_KEYS) == Candidate(
        {**declared, "n": 2}, None, 2
    )


def test_undeclared_objects_are_judged_by_the_keys_given() -> None:
    found = found_in({"answer": "a", "ocr": []}, {"summary": "s", "regions": []})

    chosen = select_candidate(found, Variant.TARGET, TARGET_KEYS)
    assert chosen.value == {"answer": "a", "ocr": []}
    chosen = select_candidate(found, Variant.TARGET, frozenset({"summary", "regions"}))
    assert chosen.value == {"summary": "s", "regions": []}


def test_no_acceptable_object_reports_how_many_were_seen() -> None:
    found = found_in({"schema": Variant.EVIDENCE.value, "answer": "a", "ocr": []}, {"answer": 1})

    with pytest.raises(EvidenceError) as caught:
        select_candidate(found, Variant.TARGET, TARGET_KEYS)

    assert caught.value.code == "EVIDENCE_NOT_FOUND"
    assert caught.value.details == {
        "variant": Variant.TARGET.value,
        "reason": "no_candidate",
        "candidates": 2,
    }


def test_a_literal_close_tag_inside_the_answer_does_not_cut_it() -> None:
    answer = '{"schema": "deepseekeyes.target.v1", "answer": "the page shows </think>"}'
    found = find_candidates(answer, Variant.TARGET)
    assert [c.value["answer"] for c in found.kept] == ["the page shows </think>"]
    assert found.reasoning == ""
