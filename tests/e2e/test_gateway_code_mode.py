"""Code Mode behind the Anthropic Messages and Responses fronts: a real ``serve`` process in
code mode, a real stdio MCP server of our own, the loopback DeepSeek scripted to send one
``run_code`` program. Each official SDK (``anthropic``, ``openai``'s responses API) sees one
ordinary answer: the program's printed output and its markers, no tool call of ours, and
nothing of the intermediate result (the 300 rows)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from deepseek_eyes.runtime.code.source import MARKER
from deepseek_eyes.terminal.execution.sandbox import bwrap_available
from helpers import GATEWAY_KEY, require_module, serve_blind
from runtime.upstream import LoopbackUpstream

anthropic = require_module("anthropic")
openai = require_module("openai")

pytestmark = pytest.mark.skipif(bwrap_available() is None, reason="needs bubblewrap")

PRO = "deepseek-v4-pro"
LEDGER = """
import json
from mcp.server.mcpserver import MCPServer

app = MCPServer("ledger")


@app.tool()
def list_rows() -> str:
    \"\"\"All 300 rows as a JSON list of {id, status}.\"\"\"
    return json.dumps([{"id": i, "status": "overdue" if i % 100 == 7 else "paid"}
                       for i in range(300)])


@app.tool()
def remind(row: int) -> str:
    \"\"\"Remind the customer of one row.\"\"\"
    return f"reminded {row}"


app.run("stdio")
"""
PROGRAM = """import json
rows = json.loads(tools.ledger__list_rows())
late = [r["id"] for r in rows if r["status"] == "overdue"]
for i in late:
    tools.ledger__remind(row=i)
print("reminded:", late)
"""
ASK = "CALL[run_code]: " + json.dumps({"code": PROGRAM})


@dataclass
class Setup:
    base: str  # http://127.0.0.1:PORT/v1
    upstream: LoopbackUpstream


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("code-fronts")
    server = root / "ledger.py"
    server.write_text(LEDGER, encoding="utf-8")
    more = ('\n[runtime]\ntool_mode = "code"\n\n[[mcp.servers]]\nid = "ledger"\n'
            f'transport = "stdio"\ncommand = {json.dumps(sys.executable)}\n'
            f"args = [{json.dumps(str(server))}]\n"
            'allow = { tools = ["list_rows", "remind"] }\n')
    with LoopbackUpstream() as upstream, serve_blind(root, upstream.base_url, PRO,
                                                     more=more) as gateway:
        yield Setup(gateway.base, upstream)


def check_answer(text: str, upstream: LoopbackUpstream) -> None:
    """The answer carries the program's output and four ok markers; the model was offered
    the two code tools and read no row."""
    assert text.startswith("after run_code: run_code: exit 0"), text
    assert "reminded: [7, 107, 207]" in text
    found = [json.loads(line.removeprefix(MARKER)) for line in text.splitlines()
             if line.startswith(MARKER)]
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", m["digest"]) for m in found), found
    assert [(m["tool"], m["status"]) for m in found] == [
        ("mcp__ledger__list_rows", "ok"), *[("mcp__ledger__remind", "ok")] * 3]
    first, second = upstream.requests[-2:]
    assert [t["function"]["name"] for t in first["tools"]] == ["tools_search", "run_code"]
    assert '"id": 150' not in json.dumps(second["messages"])


def test_code_mode_behind_the_anthropic_front(setup: Setup) -> None:
    root = setup.base.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key=GATEWAY_KEY, max_retries=0,
                             timeout=60) as client:
        message = client.messages.create(model="claude-opus-4-8", max_tokens=400,
                                         messages=[{"role": "user", "content": ASK}])
    assert message.stop_reason == "end_turn"
    assert [b.type for b in message.content if b.type != "thinking"] == ["text"]
    text = next(b.text for b in message.content if b.type == "text")
    check_answer(text, setup.upstream)


def test_code_mode_behind_the_responses_front(setup: Setup) -> None:
    with openai.OpenAI(base_url=setup.base, api_key=GATEWAY_KEY, max_retries=0,
                       timeout=60) as client:
        response = client.responses.create(model=PRO, input=ASK)
    assert response.status == "completed"
    assert [i.type for i in response.output if i.type != "reasoning"] == ["message"]
    check_answer(response.output_text, setup.upstream)
