"""The command line switches pydantic's plugins off unless its environment asks for them,
and then answers pydantic's plugin lookup without importing ``importlib.metadata``
(cli/__init__.py: ``_no_pydantic_plugins``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pydantic

import deepseek_eyes

SRC = Path(deepseek_eyes.__file__).resolve().parents[1]

_PROBE = """
import json, sys
from deepseek_eyes import cli
cli._no_pydantic_plugins()
from pydantic import BaseModel, ValidationError

class Model(BaseModel):
    x: int

ok = Model(x="1").x == 1
try:
    Model(x="one")
    refused = False
except ValidationError:
    refused = True
loader = sys.modules["pydantic.plugin._loader"]
print(json.dumps({"ok": ok, "refused": refused, "metadata": "importlib.metadata" in sys.modules,
                  "real_loader": hasattr(loader, "_plugins"),
                  "switch": __import__("os").environ.get("PYDANTIC_DISABLE_PLUGINS")}))
"""


def _probe(**env: str) -> dict[str, object]:
    environ = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    environ.update(env, PYTHONPATH=str(SRC))
    out = subprocess.run(  # noqa: S603 (this interpreter, our own probe)
        [sys.executable, "-c", _PROBE], env=environ, capture_output=True,
        text=True, check=True, timeout=60,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_plugins_off_by_default_without_importlib_metadata() -> None:
    assert _probe() == {"ok": True, "refused": True, "metadata": False, "real_loader": False,
                        "switch": "__all__"}


def test_a_switch_the_user_set_keeps_pydantic_s_own_loader() -> None:
    result = _probe(PYDANTIC_DISABLE_PLUGINS="")
    assert result["real_loader"] is True
    assert result["switch"] == ""
    assert result["ok"] is True
    assert result["refused"] is True


def test_pydantic_takes_only_get_plugins_from_its_loader() -> None:
    """What stands in for the loader offers ``get_plugins`` alone: pydantic must ask for
    nothing else (checked in the installed pydantic's sources)."""
    root = Path(pydantic.__file__).parent
    takes: set[str] = set()
    for path in root.rglob("*.py"):
        if path.name == "_loader.py":
            continue
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"from (?:\.|pydantic\.plugin\.)_loader import ([^\n]+)", text):
            takes.update(name.strip() for name in match.group(1).split(","))
        assert "import _loader" not in text, path
        assert "_loader." not in text.replace("._loader import", ""), path
    assert takes == {"get_plugins"}
