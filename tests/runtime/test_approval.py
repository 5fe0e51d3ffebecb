"""The terminal approval prompt on a real (pseudo-)terminal device, not a stand-in stream."""

from __future__ import annotations

import os
import select

import pytest

from deepseek_eyes.runtime.approval import TerminalPrompt

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal"),
]

PLAN = {"argv": ["touch", "made.txt"], "cwd": "/work",
        "decision": {"risk": "medium", "effects": ["write"], "reasons": ["touch changes files"]}}


@pytest.mark.parametrize(("typed", "decision"), [("y\n", "approved"), ("\n", "denied")])
async def test_the_prompt_opens_the_terminal_device(typed: str, decision: str) -> None:
    controller, terminal = os.openpty()
    try:
        os.write(controller, typed.encode())  # typed ahead: the terminal queues it
        prompt = TerminalPrompt(timeout=30, tty=os.ttyname(terminal))
        assert await prompt.decide(PLAN) == decision
        # The echo of the typed answer and the prompt may arrive in separate reads.
        shown = ""
        while "Approve? [y/N] " not in shown:
            ready, _, _ = select.select([controller], [], [], 10)
            assert ready, f"the prompt did not reach the terminal: {shown!r}"
            shown += os.read(controller, 65536).decode()
        assert "argv: ['touch' 'made.txt']" in shown
        assert "Approve? [y/N] " in shown
    finally:
        os.close(terminal)
        os.close(controller)
