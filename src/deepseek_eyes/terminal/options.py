"""Placeholder: the complete option tables arrive from the options work."""

from __future__ import annotations

from deepseek_eyes.terminal.getopt import OptionTable

__all__ = ["NOT_GETOPT", "OPTION_TABLES"]

OPTION_TABLES: dict[str, OptionTable] = {
    "sed": OptionTable.of(
        "bsnrzuEe:f:l:i::",
        "binary debug expression= file= follow-symlinks help in-place[=] line-length= "
        "null-data zero-terminated posix quiet silent regexp-extended sandbox separate "
        "unbuffered version",
    ),
}
NOT_GETOPT: dict[str, str] = {}
