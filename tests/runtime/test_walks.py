"""Walks a continued turn takes over what is new only (runtime/walks.py) and the budget's
fitting resumed where the last one stood (runtime/budget.FitMemo): each gives what the
whole walk gives, for histories that grow, change or fork."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from deepseek_eyes.runtime import budget as budget_module
from deepseek_eyes.runtime.budget import FitMemo, fit, message_tokens
from deepseek_eyes.runtime.walks import HistoryWalks, leading_equal


def _message(rng: random.Random, index: int) -> dict[str, Any]:
    kind = rng.choice(["user", "user", "assistant", "assistant", "calls", "tool", "system"])
    text = "x" * rng.randint(1, 400) + str(index)
    if kind == "calls":
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": f"c{index}", "type": "function",
                                "function": {"name": "f", "arguments": "{}"}}]}
    if kind == "tool":
        return {"role": "tool", "tool_call_id": f"c{index - 1}", "content": text}
    return {"role": kind, "content": text}


def test_a_resumed_fitting_gives_what_the_whole_walk_gives(monkeypatch: Any) -> None:
    rng = random.Random(41)
    resumes: list[bool] = []
    resume = budget_module._resume

    def counted(*args: Any) -> Any:
        found = resume(*args)
        resumes.append(found is not None)
        return found

    monkeypatch.setattr(budget_module, "_resume", counted)
    for _ in range(60):
        memo = FitMemo()
        history = [_message(rng, i) for i in range(rng.randint(1, 60))]
        budget = rng.randint(50, 4000)
        for _turn in range(12):
            whole = fit(history, budget)
            assert fit(history, budget, memo=memo, key="s") == whole
            change = rng.random()
            if change < 0.7:  # a continuation: new messages after the same ones
                history = [*history, *(_message(rng, len(history) + i)
                                       for i in range(rng.randint(1, 4)))]
            elif change < 0.8:  # an edit somewhere: a fork
                at = rng.randrange(len(history))
                history = [*history[:at], _message(rng, 10_000 + at)]
            elif change < 0.9:  # equal messages, other objects
                history = [dict(m) for m in history]
            else:  # another budget
                budget = rng.randint(50, 4000)
    assert sum(resumes) > 100  # the memo was used, not only asked


def test_a_long_history_is_fitted_from_where_the_last_fitting_stood() -> None:
    history: list[Mapping[str, Any]] = [
        {"role": "system", "content": "rules"},
        *({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 20}
          for i in range(2000))]
    budget = sum(message_tokens(m) for m in history[-40:])
    memo = FitMemo()
    fit(history, budget, memo=memo, key="s")
    longer = [*history, {"role": "user", "content": "next"}]
    assert fit(longer, budget, memo=memo, key="s") == fit(longer, budget)
    fitted = memo.get("s")
    assert fitted is not None
    assert fitted.boundary > 1900  # the walk stood near the end, not at the start
    assert fitted.systems == [0]


def test_walks_find_what_a_whole_walk_finds() -> None:
    rng = random.Random(6)
    walks = HistoryWalks(entries=4)
    history = [_message(rng, i) for i in range(60)]

    def is_tool(message: Mapping[str, Any]) -> bool:
        return message["role"] == "tool"

    for _ in range(200):
        key = rng.choice(["a", "b", None])
        found = walks.where(key, history, "tools", is_tool)
        assert found == [i for i, m in enumerate(history) if is_tool(m)]
        assert walks.select(key, history, "tools", is_tool) == [history[i] for i in found]
        change = rng.random()
        if change < 0.6:
            history = [*history, _message(rng, len(history))]
        elif change < 0.8:
            history = history[:rng.randrange(50, len(history) + 1)]
        else:
            at = rng.randrange(len(history))
            history = [*history[:at], {"role": "tool", "content": "?"}, *history[at + 1:]]


def test_leading_equal_counts_to_the_first_difference() -> None:
    left = list(range(100))
    for at in (0, 1, 37, 99):
        right = [*left[:at], -1, *left[at + 1:]]
        assert leading_equal(left, right) == at
    assert leading_equal(left, left[:50]) == 50
    assert leading_equal(left, left, limit=10) == 10


def test_the_memos_are_bounded_in_references_too() -> None:
    walks = HistoryWalks(entries=10, items=100)
    for key in "abc":
        walks.where(key, list(range(60)), "w", bool)
    walks.where("d", list(range(10)), "w", bool)  # short: walked whole, not kept
    assert len(walks._kept) == 1  # 180 references would pass the bound
    assert walks._items == 60
    memo = FitMemo(items=100)
    history = [{"role": "user", "content": "x" * 400} for _ in range(60)]
    for key in "abc":
        fit(history, 1000, memo=memo, key=key)
    assert list(memo._kept) == ["c"]
