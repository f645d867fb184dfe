"""A shard store under a full disk, in a process of its own (for ``test_shard_integrity``).

    python full_disk_worker.py ROOT

Opens a store under ROOT (file blob + SQLite), appends a batch, then limits the
size of every file it writes to one byte (``RLIMIT_FSIZE``, with ``SIGXFSZ``
ignored, so a write past it fails with ``EFBIG`` as on a full disk) and tries a
blob write (an append with rows), a consensus write (an append without rows
that moves the upper; a reader registration) and a compaction. Each must raise
``StorageUnavailable`` with the state, the snapshot and the blob directory
unchanged (no temporary file left). Then it lifts the limit and appends again.
Prints one JSON line of what it saw.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

import pyarrow as pa

from tidegate.runtime.storage import CompactionPolicy, ShardStore, default_urls
from tidegate.spec.errors import StorageUnavailable

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def files(root: str) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
    )


def main(root: str) -> None:
    store = ShardStore.open(
        *default_urls(root), policy=CompactionPolicy(max_batches=1), auto_compact=False
    )
    store.create_shard("s", SCHEMA)
    store.compare_and_append("s", [((i, f"r{i}"), 0, 1) for i in range(100)], 0, 1)
    store.compare_and_append("s", [((100, "x"), 1, 1)], 1, 2)
    before = store.state("s")
    snapshot = store.snapshot_rows("s", 1)
    blob_dir = os.path.join(root, "blob")
    blob_files = files(blob_dir)

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))
    seen: dict[str, object] = {}
    attempts = {
        "blob": lambda: store.compare_and_append(
            "s", [((i, "y" * 100), 2, 1) for i in range(1000)], 2, 3
        ),
        "consensus": lambda: store.compare_and_append("s", [], 2, 3),
        "reader": lambda: store.register_leased_reader("s", "r1"),
        "compaction": lambda: store.compact("s"),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            seen[name] = "applied"
        except StorageUnavailable as e:
            seen[name] = {"store": e.store, "errno": e.errno, "message": str(e)}
        except Exception as e:  # the test reports the untyped error
            seen[name] = f"untyped {type(e).__name__}: {e}"
        seen[f"{name}_state_unchanged"] = store.state("s") == before
        seen[f"{name}_snapshot_unchanged"] = store.snapshot_rows("s", 1) == snapshot
        seen[f"{name}_blob_files_unchanged"] = files(blob_dir) == blob_files
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    seen["after"] = str(store.compare_and_append("s", [((7, "z"), 2, 1)], 2, 3))
    seen["after_rows"] = len(store.snapshot_rows("s", 2))
    store.close()
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
