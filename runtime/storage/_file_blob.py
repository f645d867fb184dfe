"""Blob in a local directory: one file per key, written atomically and durably."""

from __future__ import annotations

import contextlib
import errno
import os
import time
import uuid
from pathlib import Path

from tidegate.spec.errors import StorageUnavailable
from tidegate.spec.shard import BlobMeta

from ..files import PRIVATE_FILE, mkdir_private

__all__ = ["STALE_TMP_S", "FileBlob", "refused_by_os"]

_TMP_SUFFIX = ".tmp"
STALE_TMP_S = 600.0
"""A temporary file older than this (seconds) is a leftover of a writer that died mid-write."""

_REFUSALS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}
)
"""OS errors that refuse a write outright (nothing was written): no room, or no permission."""


def refused_by_os(e: OSError) -> bool:
    """Whether ``e`` is the OS refusing a write (full disk, file too large, read-only or
    inaccessible directory) rather than an IO failure of unknown outcome."""
    return e.errno in _REFUSALS


def _unavailable(key: str, operation: str, e: OSError) -> StorageUnavailable:
    shard = key.split("/", 1)[0] if "/" in key else ""
    reason = f"{os.strerror(e.errno)} (errno {e.errno})" if e.errno else str(e)
    return StorageUnavailable(shard, "blob", key, operation, reason, errno=e.errno)


class FileBlob:
    """Objects as files under ``root`` (keys may contain ``/``, never ``..``).

    Directories are created 0700 and objects 0600: readable by their owner only.
    ``set`` writes a temporary file, fsyncs it, renames it over the key and
    fsyncs the directory, so a crash leaves either the old object or the new
    one, and an acknowledged ``set`` survives a power loss. A write the OS
    refuses (a full disk, a file over the size limit, a read-only or
    inaccessible directory) raises :class:`StorageUnavailable` and leaves
    nothing behind, its temporary file removed. Opening removes temporary files
    older than ``stale_tmp_s`` (those of writers that died mid-write; younger
    ones may belong to a live writer in another process).
    """

    local = True
    """Calls are IO on this machine's disk, or memory: a small write is brief (see
    :attr:`~tidegate.runtime.storage.ShardStore.local`)."""

    def __init__(self, root: str | os.PathLike[str], *, stale_tmp_s: float = STALE_TMP_S) -> None:
        self.root = Path(root)
        try:
            mkdir_private(self.root)
        except OSError as e:
            if refused_by_os(e):
                raise _unavailable(str(self.root), "open", e) from e
            raise
        self.removed_tmp = self.remove_stale_tmp(stale_tmp_s)
        """How many stale temporary files opening removed."""

    def remove_stale_tmp(self, min_age_s: float = STALE_TMP_S) -> int:
        """Remove temporary files older than ``min_age_s``; returns how many (best effort: a
        read-only directory keeps them)."""
        cutoff = time.time() - min_age_s
        removed = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                if not (name.startswith(".") and name.endswith(_TMP_SUFFIX)):
                    continue
                full = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    if os.stat(full).st_mtime <= cutoff:
                        os.unlink(full)
                        removed += 1
        return removed

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") for p in parts) or key.endswith(_TMP_SUFFIX):
            raise ValueError(f"invalid blob key {key!r}")
        return self.root.joinpath(*parts)

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        tmp: Path | None = None
        try:
            mkdir_private(path.parent)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
            try:
                view = memoryview(value)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as e:
            if tmp is not None:  # never leave a partial temporary file behind
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            if isinstance(e, OSError) and refused_by_os(e):
                raise _unavailable(key, "write", e) from e
            raise
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def delete(self, key: str) -> int | None:
        path = self._path(key)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return None
        except OSError as e:
            if refused_by_os(e):
                raise _unavailable(key, "delete", e) from e
            raise
        return size

    def list_keys(self, prefix: str = "") -> list[BlobMeta]:
        out: list[BlobMeta] = []
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                if name.endswith(_TMP_SUFFIX):
                    continue
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    try:
                        st = full.stat()
                    except FileNotFoundError:
                        continue
                    out.append(BlobMeta(key, st.st_size, st.st_mtime))
        return sorted(out, key=lambda m: m.key)
