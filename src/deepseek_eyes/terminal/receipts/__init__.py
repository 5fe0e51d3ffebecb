"""Signed, chained receipts of every execution (``chain``: signing, verification, the log
and its signed head) and the HMAC keys that sign them (``keyring``)."""
