"""The terminal MCP server: plan, approve, execute, with signed receipts.

A capability: it imports foundation modules (settings, errors, audit, store) and the ``mcp``
SDK, never ``vision``, ``llm`` or the CLI. Model output is data here: a command is planned,
judged by the policy engine on its argv, approved when the policy asks, executed without a
shell inside hard limits (and inside bubblewrap where it works), and leaves a signed receipt.
"""

from deepseek_eyes.terminal.policy.engine import MODES, Decision, PolicyEngine, PolicyResult
from deepseek_eyes.terminal.receipts.chain import share_export, verify_chain, verify_receipt
from deepseek_eyes.terminal.service import ServiceConfig, TerminalService

__all__ = [
    "MODES",
    "Decision",
    "PolicyEngine",
    "PolicyResult",
    "ServiceConfig",
    "TerminalService",
    "share_export",
    "verify_chain",
    "verify_receipt",
]
