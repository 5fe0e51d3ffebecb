"""The exposure wrappers: each one job, composed in order, generic over the candidates."""

from __future__ import annotations

from dataclasses import dataclass

from deepseek_eyes.runtime.tools import ToolHub, ToolOutcome, ToolSpec, TurnContext
from deepseek_eyes.toolkit import exposure


@dataclass(frozen=True)
class Item:
    name: str
    owner: str
    risk: str = "read"
    cost: int = 1


ITEMS = [Item("a_one", "a_"), Item("a_two", "a_", "write", 5), Item("b_one", "b_", cost=3),
         Item("a_one", "b_"), Item("a_three", "a_", cost=2)]


def test_filter_and_risk_gate() -> None:
    keep = exposure.filtered(lambda item: item.name != "b_one")
    assert [i.name for i in keep(ITEMS)] == ["a_one", "a_two", "a_one", "a_three"]
    gate = exposure.risk_gated(True, lambda item: item.risk)
    assert "a_two" not in [i.name for i in gate(ITEMS)]
    assert exposure.risk_gated(False, lambda item: item.risk)(ITEMS) == ITEMS


def test_namespace_keeps_each_name_once_inside_its_owner() -> None:
    stage = exposure.namespaced(lambda item: item.name, lambda item: item.owner)
    kept = stage(ITEMS)
    assert [(i.name, i.owner) for i in kept] == [("a_one", "a_"), ("a_two", "a_"),
                                                 ("b_one", "b_"), ("a_three", "a_")]


def test_budget_skips_what_does_not_fit_and_goes_on() -> None:
    stage = exposure.budgeted(10, 6, lambda item: item.cost)
    # 1 fits, 5 fits (6), 3 does not, 1 does not (7 > 6), 2 does not.
    assert [i.cost for i in stage(ITEMS)] == [1, 5]
    assert [i.cost for i in exposure.budgeted(2, 100, lambda item: item.cost)(ITEMS)] == [1, 5]
    cheap_after = [Item("x_big", "x_", cost=9), Item("x_small", "x_", cost=1)]
    assert [i.name for i in exposure.budgeted(5, 5, lambda i: i.cost)(cheap_after)] == \
        ["x_small"]


def test_stages_compose_in_order() -> None:
    gate = exposure.risk_gated(True, lambda item: item.risk)
    budget = exposure.budgeted(10, 6, lambda item: item.cost)
    # Gate first: the write tool frees its budget for later reads.
    assert [i.name for i in exposure.chained([gate, budget])(ITEMS)] == \
        ["a_one", "b_one", "a_one"]
    assert [i.name for i in exposure.chained([budget, gate])(ITEMS)] == ["a_one"]


class Source:
    def __init__(self, name: str, prefix: str, specs: list[ToolSpec]) -> None:
        self.name, self.prefix, self.specs = name, prefix, specs

    def tools(self, context: TurnContext) -> list[ToolSpec]:
        return self.specs

    async def call(self, spec: ToolSpec, arguments: object, context: TurnContext) -> ToolOutcome:
        raise AssertionError("not called")

    async def close(self) -> None:
        return None


def _spec(name: str, risk: str = "read") -> ToolSpec:
    return ToolSpec(name, "d", {"type": "object", "properties": {}}, risk=risk)


def test_the_tool_hub_chain_is_made_of_these_wrappers() -> None:
    first = Source("one", "one_", [_spec("one_read"), _spec("one_write", "write"),
                                   _spec("two_stolen")])
    second = Source("two", "two_", [_spec("two_stolen"), _spec("two_mine")])
    context = TurnContext("s", {}, max_tool_calls=4, max_rereads=1)
    hub = ToolHub([first, second], read_only=True)  # type: ignore[list-item]
    offer = hub.offer(context, exclude=frozenset({"two_mine"}))
    assert [s.name for s in offer.specs] == ["one_read", "two_stolen"]
    assert offer.routes["two_stolen"] is second  # outside its namespace, one's is dropped
    tight = ToolHub([first, second], max_tools=1)  # type: ignore[list-item]
    assert [s.name for s in tight.offer(context).specs] == ["one_read"]
