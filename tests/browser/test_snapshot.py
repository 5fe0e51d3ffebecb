"""Playwright's AI-mode YAML dialect, parsed: keys, quoting, escapes, states, boxes,
properties and bounds."""

from __future__ import annotations

from deepseek_eyes.browser.snapshot import parse_snapshot

SNAPSHOT = """- generic [active] [ref=e1] [box=8,8,1264,444]:
  - navigation "Main" [ref=e3] [box=8,8,1264,19]:
    - link "Home" [ref=e4] [cursor=pointer] [box=8,8,47,19]:
      - /url: "#a"
  - heading "Sign up" [level=1] [ref=e7] [box=8,48,1264,38]
  - paragraph [ref=e8] [box=8,108,1264,19]: "Text: with a colon"
  - textbox "Email" [ref=e13] [box=294,164,179,21]: x@y
  - checkbox "Subscribe" [checked] [ref=e15] [box=482,166,13,13]
  - checkbox "Some" [checked=mixed] [ref=e16]
  - 'button "a: b" [disabled] [ref=e19]'
  - textbox "Search" [ref=e20]:
    - /placeholder: Find things
  - text: "line one\\nline \\"two\\" \\x41"
  - combobox "Country" [ref=e21]:
    - option "France" [box=0,0,0,0]
    - option "Spain" [selected] [box=0,0,0,0]
"""


def test_keys_states_values_and_properties() -> None:
    parsed = parse_snapshot(SNAPSHOT)
    assert not parsed.truncated
    (root,) = parsed.roots
    assert root.role == "generic"
    assert root.states["active"] is True
    assert root.box == (8, 8, 1264, 444)
    nav, heading, paragraph, email, checked, mixed, button, search, text, combo = root.children
    assert (nav.role, nav.name, nav.ref) == ("navigation", "Main", "e3")
    link = nav.children[0]
    assert (link.name, link.url, link.pointer) == ("Home", "#a", True)
    assert heading.states["level"] == "1"
    assert paragraph.text == "Text: with a colon"
    assert email.text == "x@y"
    assert checked.states["checked"] is True
    assert mixed.states["checked"] == "mixed"
    assert (button.role, button.name, button.states.get("disabled")) == ("button", "a: b", True)
    assert search.placeholder == "Find things"
    assert text.role == "text"
    assert text.text == 'line one\nline "two" A'
    assert [o.states.get("selected", False) for o in combo.children] == [False, True]


def test_single_quoted_key_with_an_apostrophe() -> None:
    (node,) = parse_snapshot("- 'link \"It''s: here\" [ref=e2]'").roots
    assert (node.role, node.name, node.ref) == ("link", "It's: here", "e2")


def test_a_name_with_a_colon_inside_the_json_string() -> None:
    (node,) = parse_snapshot('- button "ratio:2" [ref=e9]: value').roots
    assert (node.name, node.ref, node.text) == ("ratio:2", "e9", "value")


def test_lines_are_bounded() -> None:
    text = "\n".join(f'- button "b{n}" [ref=e{n}]' for n in range(100))
    parsed = parse_snapshot(text, max_lines=10)
    assert parsed.truncated
    assert len(parsed.roots) == 10


def test_unknown_line_shapes_are_skipped() -> None:
    parsed = parse_snapshot("garbage\n- /unknown: x\n- button \"ok\" [ref=e1]\n  not a node")
    assert [n.name for n in parsed.roots] == ["ok"]
