"""What the policy engine learns about one command while it reads the argv.

The grammars (:mod:`.programs`, :mod:`.grammars`) only *record* facts here: which effects a
command has (read, write, code execution, network, privilege), which arguments are paths
(and whether they are written), which inner commands a wrapper runs, and why. The engine
(:mod:`.policy`) alone turns the facts into a decision under a mode, so every grammar stays
a small reader that cannot accidentally allow something.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["RISK_ORDER", "Effect", "Findings", "risk_of"]


class Effect(StrEnum):
    READ = "read"
    WRITE = "write"
    EXEC = "exec"  # runs code the policy cannot read: interpreters, build tools, -exec
    NETWORK = "network"
    UNKNOWN = "unknown"  # the grammar could not be sure; treated like EXEC (fail closed)
    PRIVILEGE = "privilege"  # sudo, mount, signals to other processes: always refused


RISK_ORDER = ("low", "medium", "high", "critical")

_EFFECT_RISK = {
    Effect.READ: "low",
    Effect.WRITE: "medium",
    Effect.EXEC: "high",
    Effect.NETWORK: "high",
    Effect.UNKNOWN: "high",
    Effect.PRIVILEGE: "critical",
}


def risk_of(effects: set[Effect], blocked: bool) -> str:
    """The highest risk among ``effects``; a hard refusal is always critical."""
    if blocked:
        return "critical"
    levels = [_EFFECT_RISK[e] for e in effects] or ["low"]
    return max(levels, key=RISK_ORDER.index)


@dataclass
class Findings:
    """Facts about one command (and, merged in, the commands it wraps)."""

    effects: set[Effect] = field(default_factory=set)
    reasons: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # arguments resolved and kept in the workspace
    write_paths: list[str] = field(default_factory=list)
    inner: list[list[str]] = field(default_factory=list)  # commands a wrapper runs
    # Directories read recursively, and whether symlinks inside them are followed: the
    # engine checks what such a read will reach, not only the argument itself.
    reach: list[tuple[str, bool]] = field(default_factory=list)

    def add(self, effect: Effect, reason: str) -> None:
        self.effects.add(effect)
        if reason not in self.reasons:
            self.reasons.append(reason)

    def block(self, reason: str) -> None:
        if reason not in self.blocked:
            self.blocked.append(reason)

    def path(self, arg: str, *, write: bool = False) -> None:
        if arg in ("", "-"):
            return  # "-" is stdin/stdout by convention, and stdin is /dev/null
        (self.write_paths if write else self.paths).append(arg)

    def reach_path(self, arg: str, *, follow: bool) -> None:
        """``arg`` will be read recursively (following symlinks when ``follow``)."""
        if arg in ("", "-"):
            return
        if arg not in self.paths:
            self.path(arg)
        if (arg, follow) not in self.reach:
            self.reach.append((arg, follow))
