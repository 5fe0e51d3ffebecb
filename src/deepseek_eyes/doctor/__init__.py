"""``deepseek-eyes doctor``: one command that says what is wrong with a setup and how to
fix it, one check a line.

It sits above the gateway in the layers because it asks what the gateway and every
capability would: the settings, the upstream, the final models' sight, the vision routes,
the MCP servers, Chromium, the desktop stack, bubblewrap, the data directory and its audit
chain, the gateway's key and port. Each check reuses the rule the part applies when it runs;
the CLI (:mod:`deepseek_eyes.cli.doctor`) only renders.
"""

from __future__ import annotations

from .report import Check, CheckView, Status, failed
from .run import DEFAULT_TIMEOUT_S, DoctorOptions, run_doctor

__all__ = ["DEFAULT_TIMEOUT_S", "Check", "CheckView", "DoctorOptions", "Status", "failed",
           "run_doctor"]
