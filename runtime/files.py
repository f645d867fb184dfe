"""Private files: what tidegate writes is readable by its owner only (directories 0700, files 0600).

A data directory holds the shards, the catalog (with the definitions of every
object), the replicas' logs and the secrets file; nobody else on the machine
may read them. Modes are given when a file or directory is created (not
changed afterwards), so no moment exists in which another user could open
one; the process's umask can only take more bits away. ``tidegate up`` and
``tidegate replica`` also run with umask 077, so what their libraries create
(SQLite's journal, Spark's files) is private too.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "PRIVATE_UMASK", "mkdir_private", "write_private"]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
PRIVATE_UMASK = 0o077
"""The umask of tidegate's own processes: nothing they create is group- or world-readable."""


def mkdir_private(path: str | os.PathLike[str]) -> Path:
    """Create directory ``path`` and each missing parent with mode 0700 (existing ones are kept)."""
    p = Path(path)
    missing: list[Path] = []
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            d.mkdir(mode=PRIVATE_DIR)
    return Path(path)


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file, then a rename), mode 0600."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)
