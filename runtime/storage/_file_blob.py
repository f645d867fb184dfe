"""Blob in a local directory: one file per key, written atomically and durably."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from tidegate.spec.shard import BlobMeta

__all__ = ["FileBlob"]

_TMP_SUFFIX = ".tmp"


class FileBlob:
    """Objects as files under ``root`` (keys may contain ``/``, never ``..``).

    ``set`` writes a temporary file, fsyncs it, renames it over the key and
    fsyncs the directory, so a crash leaves either the old object or the new
    one, and an acknowledged ``set`` survives a power loss.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

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
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(value)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
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
