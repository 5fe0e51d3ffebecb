"""The shipped table of DeepSeek's documented models: the priors of which model sees."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from deepseek_eyes.llm.known import known_model, known_models, renamed, renamed_note
from deepseek_eyes.llm.thinking import thinking_mode
from deepseek_eyes.settings import LLMSettings


def test_the_table_says_which_model_sees_and_dates_every_fact() -> None:
    flash, pro = known_model("deepseek-flash"), known_model("deepseek-v4-pro")
    assert flash is not None
    assert pro is not None
    assert (flash.sees, pro.sees) == (True, False)
    assert flash.image_in_tool_results
    assert flash.thinks_by_default
    assert pro.thinks_by_default
    raw = json.loads(resources.files("deepseek_eyes.llm").joinpath(
        "data/deepseek-models.json").read_text(encoding="utf-8"))
    for section in ("models", "aliases", "retired"):
        for entry in raw[section]:
            assert entry["checked"] >= "2026-12-01", entry  # each fact says when it was seen
    assert [m.id for m in known_models()] == ["deepseek-flash", "deepseek-v4-pro"]


@pytest.mark.parametrize(("name", "successor", "kind"), [
    ("deepseek-v4-flash", "deepseek-flash", "alias"),
    ("deepseek-v4-flash-vision-exp", "deepseek-flash", "alias"),
    ("deepseek-chat", "deepseek-flash", "retired"),
    ("deepseek-reasoner", "deepseek-flash", "retired"),
])
def test_aliases_and_retired_names_resolve_to_their_successor(
    name: str, successor: str, kind: str
) -> None:
    found = renamed(name)
    assert found is not None
    assert (found.successor, found.kind) == (successor, kind)
    model = known_model(name)
    assert model is not None
    assert model.id == successor
    note = renamed_note(name)
    assert note is not None
    assert successor in note


def test_a_current_or_unknown_name_is_not_renamed() -> None:
    assert renamed("deepseek-flash") is None
    assert renamed_note("my-model") is None
    assert known_model("my-model") is None


def test_thinking_follows_the_table_not_the_name() -> None:
    settings = LLMSettings()
    assert thinking_mode("deepseek-flash", {}, settings) == "enabled"
    assert thinking_mode("deepseek-v4-flash", {}, settings) == "enabled"  # an alias
    assert thinking_mode("deepseek-v4-something-new", {}, settings) is None  # not known


@pytest.mark.parametrize(("size", "detail", "tokens"), [
    ((640, 640), "auto", 262), ((896, 896), "auto", 512), ((1024, 1024), "high", 669),
    ((20, 20), "auto", 187), ((4000, 3000), "auto", 1024), ((4000, 3000), "low", 187),
])
def test_image_cost_follows_the_documented_figures(
    size: tuple[int, int], detail: str, tokens: int
) -> None:
    flash = known_model("deepseek-flash")
    assert flash is not None
    assert flash.image_cost is not None
    assert flash.image_cost.tokens(*size, detail) == tokens


def test_limits_share_a_request_between_its_images() -> None:
    flash = known_model("deepseek-flash")
    assert flash is not None
    limits = flash.image_limits
    assert limits is not None
    assert limits.side_limit(14) == 8192
    assert limits.side_limit(15) == 4096
    assert limits.per_image_bytes(1) == 32 * 1024 * 1024
    assert limits.per_image_bytes(8) * 8 * 4 // 3 < limits.max_request_bytes
