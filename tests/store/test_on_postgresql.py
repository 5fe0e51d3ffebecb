"""The store's tests once more, on PostgreSQL: the same assertions, the other engine.

One pytest run in a child process with ``DEEPSEEK_EYES_TEST_DATABASE=postgresql``
(tests/conftest.py gives each test's data directory a fresh database of a throwaway cluster
and clones module templates as databases). The subset is what the store promises and the
chain proves: sessions and events, compare-and-set appends and leases, the chain and its
batches, tampering as a superuser with the triggers off (verify must catch it), audit
verify/show/export, and a gateway turn end to end in process. Hypothesis-heavy variants
(a fresh database per example) stay on SQLite only, to keep this within the CI budget.
Run the whole suite on PostgreSQL the same way:
``DEEPSEEK_EYES_TEST_DATABASE=postgresql pytest tests/store tests/security/test_audit_tamper.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from services import postgres_bindir as _bindir  # skips (or fails under CI) without PostgreSQL

ROOT = Path(__file__).resolve().parents[2]

SUBSET = (
    "tests/store/test_events.py",
    "tests/store/test_db.py",
    "tests/store/test_session_guard.py::test_a_guarded_append_fails_when_another_turn_appended_first",
    "tests/store/test_session_guard.py::test_attempts_of_one_turn_append_beside_each_other",
    "tests/store/test_session_guard.py::test_a_lease_names_this_process_and_a_dead_one_is_told_apart",
    "tests/store/test_audit_chain.py::test_every_audited_record_is_chained_and_the_chain_verifies",
    "tests/store/test_audit_chain.py::test_one_changed_byte_in_any_record_is_found",
    "tests/store/test_audit_chain.py::test_removed_records_and_entries_are_found",
    "tests/store/test_audit_chain.py::test_swapped_records_and_swapped_entries_are_found",
    "tests/store/test_audit_chain.py::test_a_record_written_behind_the_chains_back_is_found",
    "tests/store/test_audit_chain.py::test_the_export_verifies_alone_and_tampering_in_it_is_found",
    "tests/store/test_audit_chain.py::test_show_resolves_records_with_their_entries",
    "tests/store/test_chain_batches.py::test_batches_verify_and_count_record_by_record",
    "tests/store/test_chain_batches.py::test_audit_show_finds_a_records_batch_entry",
    "tests/store/test_chain_batches.py::test_the_export_carries_a_batchs_records_and_is_checked",
    "tests/security/test_audit_tamper.py::test_the_untampered_copy_and_its_export_verify",
    "tests/security/test_audit_tamper.py::test_a_writer_of_both_database_and_keyring_is_caught_only_by_a_pin",
    "tests/security/test_audit_tamper.py::test_a_runtime_trim_signs_the_checkpoint_naming_its_cut",
    "tests/e2e/test_scopes.py::test_another_keys_session_is_refused_by_id_and_never_found_by_history",
    "tests/store/test_approvals.py",
    "tests/store/test_fences.py",
    "tests/gateway/test_operations.py",
    "tests/runtime/test_turn_lifecycle.py::test_a_stock_clients_turns_are_judged_alike_whether_their_session_is_read_or_held",
)


def test_the_store_suite_passes_on_postgresql() -> None:
    _bindir()
    env = {**os.environ, "DEEPSEEK_EYES_TEST_DATABASE": "postgresql",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(  # noqa: S603 - our own interpreter on our own test files
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SUBSET],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
    assert " failed" not in run.stdout
