"""Backends by URL.

Blob: ``file:///dir`` (default), ``s3://bucket/prefix?endpoint=http://host:port&region=r``,
``mem://name``. Consensus: ``sqlite:///path/to/file.db`` (default),
``postgresql://user@host:port/db`` (or ``postgres://``), ``mem://name``.
``mem://`` stores are process-local and shared by name.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tidegate.spec.shard import Blob, Consensus, MemoryBlob, MemoryConsensus

from ._file_blob import FileBlob
from ._sqlite_consensus import SqliteConsensus

__all__ = ["default_urls", "open_blob", "open_consensus"]

_MEM_BLOBS: dict[str, MemoryBlob] = {}
_MEM_CONSENSUS: dict[str, MemoryConsensus] = {}


def default_urls(root: str | Path) -> tuple[str, str]:
    """The embedded defaults under directory ``root``: a blob directory and a SQLite file."""
    root = Path(root).absolute()
    return f"file://{root / 'blob'}", f"sqlite://{root / 'consensus.db'}"


def open_blob(url: str) -> Blob:
    """The Blob store ``url`` names."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file blob URL must be file:///absolute/path, got {url!r}")
        return FileBlob(parts.path)
    if parts.scheme == "mem":
        return _MEM_BLOBS.setdefault(parts.netloc + parts.path, MemoryBlob())
    if parts.scheme == "s3":
        from ._s3_blob import S3Blob

        q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return S3Blob(
            parts.netloc,
            parts.path.strip("/"),
            endpoint=q.get("endpoint"),
            region=q.get("region"),
        )
    raise ValueError(f"unknown blob URL scheme in {url!r} (file, s3, mem)")


def open_consensus(url: str) -> Consensus:
    """The Consensus store ``url`` names."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        if not parts.path:
            raise ValueError(f"sqlite URL needs a path: sqlite:///path/to/file.db, got {url!r}")
        return SqliteConsensus(parts.path)
    if parts.scheme == "mem":
        return _MEM_CONSENSUS.setdefault(parts.netloc + parts.path, MemoryConsensus())
    if parts.scheme in ("postgres", "postgresql"):
        from ._postgres_consensus import PostgresConsensus

        return PostgresConsensus(url)
    raise ValueError(f"unknown consensus URL scheme in {url!r} (sqlite, postgresql, mem)")
