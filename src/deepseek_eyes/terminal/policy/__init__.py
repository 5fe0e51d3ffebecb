"""The policy engine: argv in, a decision out. Triage, not the boundary (the sandbox is).

``engine`` decides under a mode from the facts the readers record in ``analysis.Findings``:
``commandline`` splits a command string without a shell, ``getopt`` + ``options`` read each
program's argv with its own option table, ``programs`` says what each option means,
``grammars``/``transfer`` read the programs with grammars of their own, ``sedscript`` and
``awkprogram`` read those languages, ``gitrepo`` judges the repository git runs in, and
``paths`` resolves every path and walks what a recursive read reaches.
"""

from deepseek_eyes.terminal.policy.engine import (
    MODES,
    Decision,
    Mode,
    PolicyEngine,
    PolicyResult,
    Resolution,
)

__all__ = ["MODES", "Decision", "Mode", "PolicyEngine", "PolicyResult", "Resolution"]
