"""The audit: privacy-reduced rows (:mod:`.log`) on one tamper-evident hash chain.

Every audited record is chained where it is written (:mod:`deepseek_eyes.store.chain`);
this package signs checkpoints of the chain (:mod:`.checkpoints`), verifies the chain in
the database or in an export (:mod:`.verify`), exports it (:mod:`.export`) and resolves an
answer's provenance (:mod:`.show`). Only the log is imported here, so writing a row stays
as cheap to import as it was.
"""

from deepseek_eyes.audit.log import AuditLog, message_digest, reduce_for_audit

__all__ = ["AuditLog", "message_digest", "reduce_for_audit"]
