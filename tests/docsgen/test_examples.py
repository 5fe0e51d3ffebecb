"""Every example of README.md and the guides is run, or says why not (tests/docsgen/
examples.py), so a documented command that stops working fails CI.

Runnable examples run as a reader would run them: in a scratch directory holding a copy of
``examples/``, with a data directory and config directory of their own, no settings file,
and DeepSeek played by the loopback upstream (``DEEPSEEK_BASE_URL``). One upstream and one
gateway serve the whole module, so the file costs one gateway start."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from docsgen.examples import ROOT, Example, examples_in, guide_files
from helpers import GATEWAY_KEY, ServedGateway, serve_gateway
from runtime.upstream import LoopbackUpstream

EXAMPLES = [example for path in guide_files() for example in examples_in(path)]
RUNNABLE = [e for e in EXAMPLES if e.mode.startswith("run")]
#: What a reader's machine has that the examples use: the API key (any value: the loopback
#: upstream takes any) and the gateway's key.
API_KEY = "sk-docs-example"


def test_every_example_is_run_or_says_why_not() -> None:
    assert len(EXAMPLES) >= 10, "the guides lost their examples"
    unmarked = [e.id for e in EXAMPLES if not e.mode]
    assert unmarked == [], f"examples without <!-- example: run|skip REASON -->: {unmarked}"
    silent = [e.id for e in EXAMPLES if e.mode == "skip" and len(e.reason) < 10]
    assert silent == [], f"skipped examples must say why: {silent}"
    readme = [e for e in RUNNABLE if e.path == "README.md"]
    assert {e.language for e in readme} >= {"python"}, "README.md's recipes must run"


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_test_command_is_what_ci_runs() -> None:
    """README.md's test command is the one .ci/run calls."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "./scripts/test.sh" in readme
    assert "./scripts/test.sh" in ci
    assert "./scripts/demo.sh" in readme


@pytest.fixture(scope="module")
def upstream() -> Iterator[LoopbackUpstream]:
    with LoopbackUpstream() as served:
        yield served


@pytest.fixture(scope="module")
def gateway(upstream: LoopbackUpstream,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedGateway]:
    root = tmp_path_factory.mktemp("docs-gateway")
    config = root / "eyes.toml"
    config.write_text(f'[llm]\nbase_url = "{upstream.base_url}"\n'
                      'api_key = { env = "DEEPSEEK_API_KEY" }\n', encoding="utf-8")
    env = {**os.environ, "DEEPSEEK_EYES_HOME": str(root / "data"),
           "DEEPSEEK_API_KEY": API_KEY, "DEEPSEEK_EYES_GATEWAY_KEY": GATEWAY_KEY}
    with serve_gateway(config, env) as served:
        yield served


def _scratch(tmp_path: Path, upstream: LoopbackUpstream) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ,
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "DEEPSEEK_EYES_HOME": str(tmp_path / "home"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "DEEPSEEK_BASE_URL": upstream.base_url,
           "DEEPSEEK_API_KEY": API_KEY,
           "DEEPSEEK_EYES_GATEWAY_KEY": GATEWAY_KEY}
    return work, env


@pytest.mark.parametrize("example", RUNNABLE, ids=[e.id for e in RUNNABLE])
def test_example_runs(example: Example, tmp_path: Path, upstream: LoopbackUpstream,
                      request: pytest.FixtureRequest) -> None:
    work, env = _scratch(tmp_path, upstream)
    code = example.code
    if example.mode == "run gateway":
        served: ServedGateway = request.getfixturevalue("gateway")
        address = served.base.removeprefix("http://").removesuffix("/v1")
        assert "127.0.0.1:8765" in code, "a gateway example names the gateway's address"
        code = code.replace("127.0.0.1:8765", address)
    if example.language in ("python", "py"):
        argv = [sys.executable, "-c", code]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", code]
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,  # noqa: S603
                          timeout=180, check=False)
    assert done.returncode == 0, (
        f"{example.id} failed ({done.returncode}):\n{code}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")
    assert done.stdout.strip(), f"{example.id} printed nothing"
