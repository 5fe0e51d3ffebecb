"""docs/architecture.md's "Packages" map names every package and module under
src/deepseek_eyes/, each under its own package's entry, so the map cannot silently fall
behind the tree.

The rule, kept simple so that prose can stay prose:

* The map is the first fenced block after ``## Packages``. An *entry* is a line whose first
  word is ``name/`` (a package) or ``name.py`` (a top-level module); it covers the lines
  below it that are indented deeper. Entries nest by indentation (``terminal/`` holds
  ``policy/``, ...).
* Every package (a directory with ``__init__.py``) has an entry, inside its parent's entry;
  a top-level module has one of its own (``errors.py``).
* Inside a package's entry, each of its modules' stems and each of its subpackages' names
  appears as a word (``router``, ``routing``). A subpackage without an entry of its own
  (``vision/routing``) is then judged inside the nearest entry above it.
* Every entry names something that exists: a renamed package cannot leave its old entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "deepseek_eyes"
MAP = ROOT / "docs" / "architecture.md"
_ENTRY = re.compile(r"^( *)([a-z_][a-z0-9_]*)(/|\.py)(?:\s|$)")


@dataclass
class Entry:
    name: str
    indent: int
    lines: list[str] = field(default_factory=list)
    children: dict[str, Entry] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def packages_block() -> list[str]:
    text = MAP.read_text(encoding="utf-8")
    after = text.split("\n## Packages\n", 1)[1]
    block = after.split("```", 2)[1]
    lines = block.splitlines()
    start = lines.index("src/deepseek_eyes/")
    out: list[str] = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break  # tests/, bench/, docs/: outside the source tree
        out.append(line)
    return out


def entry_tree() -> Entry:
    """The map's entries as a tree; each entry holds its own and its children's lines."""
    root = Entry("deepseek_eyes", -1)
    stack = [root]
    for line in packages_block():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack[-1] is not root and indent <= stack[-1].indent:
            stack.pop()
        match = _ENTRY.match(line)
        # A first word is an entry only where a child may start: at the parent's
        # children's indent, not in the continuation lines of a description.
        if match is not None and (stack[-1] is root or indent <= stack[-1].indent + 2):
            suffix = match.group(3)
            entry = Entry(match.group(2) + (".py" if suffix == ".py" else ""), indent)
            stack[-1].children[entry.name] = entry
            stack.append(entry)
        for open_entry in stack[1:]:
            open_entry.lines.append(line)
    return root


def is_package(path: Path) -> bool:
    return path.is_dir() and (path / "__init__.py").is_file()


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z0-9_]+", text))


def unmapped(package: Path, entry: Entry) -> list[str]:
    """Names under ``package`` that ``entry`` (its own, or the nearest above) leaves out."""
    said = words(entry.text)
    missing: list[str] = []
    for child in sorted(package.iterdir()):
        rel = child.relative_to(SRC).as_posix()
        if child.suffix == ".py" and child.stem != "__init__" and child.stem != "__main__":
            if child.stem not in said:
                missing.append(rel)
        elif is_package(child):
            if child.name not in said:
                missing.append(rel + "/")
            missing.extend(unmapped(child, entry.children.get(child.name, entry)))
    return missing


def test_every_package_and_module_is_on_the_map() -> None:
    tree = entry_tree()
    missing: list[str] = []
    for child in sorted(SRC.iterdir()):
        if child.suffix == ".py" and child.stem not in ("__init__", "__main__"):
            if child.name not in tree.children:
                missing.append(child.name)
        elif is_package(child):
            entry = tree.children.get(child.name)
            if entry is None:
                missing.append(child.name + "/")
            else:
                missing.extend(unmapped(child, entry))
    assert missing == [], f"not named in docs/architecture.md's Packages map: {missing}"


def test_every_entry_names_something_that_exists() -> None:
    def stale(entry: Entry, where: Path) -> list[str]:
        out: list[str] = []
        for name, child in entry.children.items():
            path = where / name
            exists = path.is_file() if name.endswith(".py") else is_package(path)
            if not exists:
                out.append(path.relative_to(SRC).as_posix())
            elif not name.endswith(".py"):
                out.extend(stale(child, path))
        return out

    assert stale(entry_tree(), SRC) == []


def test_the_rule_sees_nesting_and_catches_an_omission() -> None:
    tree = entry_tree()
    assert {"vision", "errors.py", "terminal"} <= set(tree.children)
    assert "policy" in tree.children["terminal"].children
    assert "router" in words(tree.children["vision"].text)
    blank = Entry("vision", 2, ["  vision/       the bridge"])
    assert "vision/routing/router.py" in unmapped(SRC / "vision", blank)
