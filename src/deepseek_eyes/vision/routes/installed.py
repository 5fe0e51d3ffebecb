"""The installed version of a distribution, read the way ``importlib.metadata`` reads it.

The local route names its engine and layout model by their wheels' versions in every
answer fingerprint, so a cache hit asks for both. ``importlib.metadata`` answers, but
importing it (email, zipfile, csv, its path finders) and its lookup were about a sixth of a
cached ``see`` on the command line. A wheel installs ``NAME-VERSION.dist-info/METADATA``
in a ``sys.path`` directory, so this looks there, in ``sys.path``'s order as
``importlib.metadata`` does, and reads the ``Version`` header. Anything else (an egg, a
zip, a name found nowhere) goes to ``importlib.metadata`` itself, so the answer is always
the one it gives.
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["NotInstalled", "installed_version"]

_SEPARATORS = re.compile(r"[-_.]+")
#: Enough of METADATA for its headers; ``Version`` is the second of them.
_HEAD_BYTES = 4096


class NotInstalled(LookupError):
    """No distribution of that name is installed."""


def _normalized(name: str) -> str:
    return _SEPARATORS.sub("_", name).lower()


def _version_header(metadata: str) -> str | None:
    for line in metadata.splitlines():
        if not line.strip():
            return None  # the headers end at the first empty line
        if line[:8].lower() == "version:":
            return line[8:].strip()
    return None


def _from_dist_info(distribution: str) -> str | None:
    """The ``Version`` of the first wheel-installed ``distribution`` on ``sys.path``, or
    None where only ``importlib.metadata`` can tell."""
    wanted = _normalized(distribution)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue  # a zip file or a missing directory
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            if _normalized(stem.partition("-")[0]) != wanted:
                continue
            if kind != "dist-info":
                return None
            try:
                with open(os.path.join(entry or ".", name, "METADATA"), "rb") as file:
                    head = file.read(_HEAD_BYTES).decode("utf-8", "replace")
            except OSError:
                return None
            return _version_header(head)
    return None


def installed_version(distribution: str) -> str:
    """The version of the installed ``distribution`` (``"rapid-layout"``), as
    ``importlib.metadata.version`` gives it.

    Raises:
        NotInstalled: no such distribution is installed.
    """
    found = _from_dist_info(distribution)
    if found:
        return found
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError as exc:
        raise NotInstalled(distribution) from exc
