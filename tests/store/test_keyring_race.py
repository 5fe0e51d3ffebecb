"""Keyrings made and rotated by several processes at once lose no key.

Two processes that open a fresh data directory at the same moment both create "the"
keyring. Before creation was atomic, 19 of 20 such races broke (a temporary file removed
under the other writer, a process signing with a key that was not in the file, once an
unparseable file). Here each trial forks two real processes that wait on one pipe and then
call ``load_or_create``: both must succeed, hold the same key, and that key must be the one
in the file. Rotations at once must each add their key.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from deepseek_eyes.audit.keys import AuditKeyring
from deepseek_eyes.store.keyring import Keyring
from deepseek_eyes.terminal.receipts.keyring import Keyring as ReceiptKeyring

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork (POSIX)")

TRIALS = 100


def _race(count: int, act: Callable[[], str]) -> list[str]:
    """Fork ``count`` processes that start ``act`` together; what each returned, or
    ``ERROR <type>: <message>`` for one that raised."""
    gate_read, gate_write = os.pipe()
    children = []
    for _ in range(count):
        out_read, out_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait for the gate, act, report, leave without cleanup
            os.close(out_read)
            os.close(gate_write)
            os.read(gate_read, 1)
            try:
                result = act()
            except BaseException as exc:  # reported to the parent
                result = f"ERROR {type(exc).__name__}: {exc}"
            os.write(out_write, result.encode())
            os._exit(0)
        os.close(out_write)
        children.append((pid, out_read))
    os.close(gate_read)
    os.write(gate_write, b"x" * count)  # everyone at once
    os.close(gate_write)
    results = []
    for pid, out_read in children:
        with os.fdopen(out_read, "rb") as out:
            results.append(out.read().decode())
        os.waitpid(pid, 0)
    return results


@pytest.mark.parametrize("ring", [AuditKeyring, ReceiptKeyring], ids=["audit", "receipts"])
def test_two_processes_creating_a_keyring_at_once_get_the_one_key(
        tmp_path: Path, ring: type[Keyring]) -> None:
    failures = []
    for trial in range(TRIALS):
        directory = tmp_path / f"t{trial}" / "keys"
        results = _race(2, lambda d=directory: ring.load_or_create(d).active_id)
        on_file = ring.read_only(directory)
        if (any(r.startswith("ERROR") for r in results) or len(set(results)) != 1
                or on_file is None or on_file.active_id != results[0]):
            failures.append((trial, results, on_file and on_file.active_id))
        leftovers = [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]
        assert not leftovers, leftovers
    assert not failures, failures[:3]


def test_rotations_at_once_each_add_their_key(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    first = AuditKeyring.load_or_create(directory).active_id
    results = _race(4, lambda: AuditKeyring.load_or_create(directory).rotate())
    assert not [r for r in results if r.startswith("ERROR")], results
    ring = AuditKeyring.read_only(directory)
    assert ring is not None
    assert set(results) | {first} == set(ring.ids())  # no rotation lost another's key
    assert ring.active_id in results


if __name__ == "__main__":  # pragma: no cover - for running a trial by hand
    print(_race(2, lambda: AuditKeyring.load_or_create(Path(sys.argv[1])).active_id))
