"""The examples of README.md and the guides, as the tests read them.

A shell or Python block is an example, and the line before its fence says what the test
does with it, in an HTML comment the site does not show:

* ``<!-- example: run -->`` runs it in a scratch directory holding ``examples/``, with a data
  directory of its own and DeepSeek played by the loopback upstream;
* ``<!-- example: run gateway -->`` the same, with a gateway the test started on that
  upstream: the block's ``127.0.0.1:8765`` is pointed at it;
* ``<!-- example: skip REASON -->`` is not run, and says why (a long-running server, a
  client this machine runs in its own e2e test).

A block with no such line fails the suite: every example is run or says why not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GUIDES", "LANGUAGES", "ROOT", "Example", "examples_in", "guide_files"]

ROOT = Path(__file__).resolve().parents[2]
#: README.md and the pages a reader follows step by step; reference pages show fragments.
GUIDES = ("README.md", "docs/tutorials", "docs/how-to")
LANGUAGES = frozenset({"sh", "bash", "shell", "console", "python", "py"})
_FENCE = re.compile(r"^(`{3,})\s*([\w-]*)")
_MARK = re.compile(r"^<!-- example: (run gateway|run|skip)\b ?(.*?) ?-->$")


@dataclass(frozen=True)
class Example:
    path: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    language: str
    mode: str  # "run", "run gateway", "skip" or "" (unmarked)
    reason: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def guide_files() -> list[Path]:
    out: list[Path] = []
    for name in GUIDES:
        path = ROOT / name
        out += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    return out


def examples_in(path: Path) -> list[Example]:
    """Every shell and Python block of ``path``, with its marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Example] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        end = next((j for j in range(index + 1, len(lines))
                    if lines[j].startswith(fence.group(1))), len(lines))
        language = fence.group(2).lower()
        if language in LANGUAGES:
            before = next((lines[j].strip() for j in range(index - 1, -1, -1)
                           if lines[j].strip()), "")
            mark = _MARK.match(before)
            out.append(Example(
                str(path.relative_to(ROOT)), index + 1, language,
                mark.group(1) if mark else "", mark.group(2) if mark else "",
                "\n".join(lines[index + 1:end]) + "\n"))
        index = end + 1
    return out
