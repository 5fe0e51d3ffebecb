"""What a Code Mode program sees of the tools: Python signatures and the ``tools`` module.

The model writes against declarations generated from each allowed tool's input schema
(``tools_search`` hands them out on request), so the generator is the one place the two
must agree: :func:`declaration` for the model, :func:`module_source` for the program. Both
come from the same :func:`function_name` and :func:`parameters`.

:data:`RUNNER` is the program's first code inside the sandbox: it sets the resource limits
(soft = hard: the sandbox holds no capability to raise them again) before anything else
runs, builds the ``tools`` module whose calls go over the inherited pipes as JSON lines,
then executes the model's program. It imports only the standard library of the system
Python (``python3 -I``: no site packages, no environment, no script directory).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RUNNER", "Declared", "declaration", "function_name", "module_source", "summary"]

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")
_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
               "array": "list", "object": "dict", "null": "None"}


@dataclass(frozen=True)
class Declared:
    """One tool as the program knows it: its public name, its function and its schema."""

    public_name: str
    description: str
    parameters: Mapping[str, Any]


def function_name(public_name: str) -> str:
    """``mcp__time__get-current-time`` → ``time__get_current_time`` (a Python identifier)."""
    name = _NOT_IDENT.sub("_", public_name.removeprefix("mcp__"))
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = "t_" + name
    return name


def _annotation(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        names = [_JSON_TYPES.get(str(k), "Any") for k in kind]
        return " | ".join(dict.fromkeys(names)) or "Any"
    if kind == "array":
        return f"list[{_annotation(schema.get('items'))}]"
    return _JSON_TYPES.get(str(kind), "Any")


def parameters(schema: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """``(name, annotation, required)`` of each property that is a Python identifier,
    required ones first (the order a signature needs)."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    required = schema.get("required")
    wanted = set(required) if isinstance(required, list) else set()
    out = [(str(name), _annotation(prop), name in wanted) for name, prop in props.items()
           if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)]
    return sorted(out, key=lambda item: not item[2])


def summary(description: str, limit: int = 120) -> str:
    """The first line of a description, at most ``limit`` characters."""
    line = (description.strip().splitlines() or [""])[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def declaration(tool: Declared) -> str:
    """The Python signature the model is shown: ``tools.name(*, a: str, b: int = ...) -> str``."""
    args = [f"{name}: {ann}" + ("" if req else " = ...")
            for name, ann, req in parameters(tool.parameters)]
    star = "*, " if args else ""
    doc = summary(tool.description)
    return f"tools.{function_name(tool.public_name)}({star}{', '.join(args)}) -> str" + (
        f"  # {doc}" if doc else "")


def module_source(tools: Iterable[Declared]) -> str:
    """The generated part of the ``tools`` module: one function per tool, each a call of
    ``call`` with its public name. Names that collide or are not identifiers are left out
    (``tools.call(public_name, **arguments)`` still reaches them)."""
    lines: list[str] = []
    seen: set[str] = {"call", "search", "ToolError"}
    for tool in tools:
        fn = function_name(tool.public_name)
        if fn in seen:
            continue
        seen.add(fn)
        params = parameters(tool.parameters)
        sig = ", ".join(f"{n}=_MISSING" if not req else n for n, _, req in params)
        body = ", ".join(f"{n!r}: {n}" for n, _, _ in params)
        lines.append(f"def {fn}({'*, ' + sig if sig else '**_extra'}):")
        if params:
            lines.append(f"    return call({tool.public_name!r}, **{{k: v for k, v in "
                         f"{{{body}}}.items() if v is not _MISSING}})")
        else:
            lines.append(f"    return call({tool.public_name!r}, **_extra)")
    return "\n".join(lines) + "\n"


#: The program's entry point inside the sandbox (``python3 -I -c RUNNER IN OUT``); its
#: stdin is one JSON document: ``{"limits": {...}, "sdk": "...", "code": "..."}``.
RUNNER = r'''
import json, os, resource, sys, types
_doc = json.loads(sys.stdin.buffer.read())
sys.stdin.close()
for _name, (_soft, _hard) in _doc["limits"].items():
    resource.setrlimit(getattr(resource, _name), (_soft, _hard))
_requests = os.fdopen(int(sys.argv[2]), "wb", buffering=0)
_answers = os.fdopen(int(sys.argv[1]), "rb", buffering=0)

class ToolError(Exception):
    """A tool call that failed: ``code`` is its stable error code."""
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code

def _ask(message):
    _requests.write(json.dumps(message).encode() + b"\n")
    line = _answers.readline()
    if not line:
        raise SystemExit("the host closed the tool channel")
    answer = json.loads(line)
    if answer.get("error"):
        raise ToolError(answer.get("code") or "RUNTIME_CODE_FAILED", answer.get("error"))
    return answer

def call(_tool, /, **arguments):
    """Call the tool ``_tool`` (its public name); returns its result text. Positional
    only: a tool may take an argument called ``name`` (the prompt tool does)."""
    return _ask({"op": "call", "tool": _tool, "arguments": arguments})["content"]

def search(query=""):
    """Names and one-line summaries of the tools matching ``query``."""
    return _ask({"op": "search", "query": query})["tools"]

tools = types.ModuleType("tools")
tools.__dict__.update(call=call, search=search, ToolError=ToolError, _MISSING=object())
exec(compile(_doc["sdk"], "<tools>", "exec"), tools.__dict__)
sys.modules["tools"] = tools
_main = {"__name__": "__main__", "tools": tools}
del _doc["sdk"]
exec(compile(_doc.pop("code"), "<program>", "exec"), _main)
'''
