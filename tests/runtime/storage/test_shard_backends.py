"""The Blob and Consensus contracts, checked against every backend (live servers included)."""

from __future__ import annotations

import threading
import uuid

import pytest

from tidegate.runtime.storage import (
    FileBlob,
    MemoryBlob,
    MemoryConsensus,
    SqliteConsensus,
    VersionedData,
    open_blob,
    open_consensus,
)
from tidegate.spec.errors import ConsensusError
from tidegate.spec.shard import MAX_SEQNO

CONSENSUS = ["mem", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
BLOBS = ["mem", "file", pytest.param("s3", marks=pytest.mark.processes)]


@pytest.fixture(params=CONSENSUS)
def consensus_factory(request, tmp_path):
    if request.param == "mem":
        shared = MemoryConsensus()
        return lambda: shared
    if request.param == "sqlite":
        return lambda: SqliteConsensus(tmp_path / "c.db")
    url = request.getfixturevalue("postgres_url")
    return lambda: open_consensus(url)


@pytest.fixture(params=BLOBS)
def blob(request, tmp_path):
    if request.param == "mem":
        return MemoryBlob()
    if request.param == "file":
        return FileBlob(tmp_path / "blob")
    endpoint = request.getfixturevalue("s3_endpoint")
    return open_blob(f"s3://tidegate/{uuid.uuid4().hex}?endpoint={endpoint}")


def key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


def test_consensus_contract(consensus_factory):
    c = consensus_factory()
    k = key()
    assert c.head(k) is None
    assert c.compare_and_set(k, 0, VersionedData(1, b"a")) is False  # expects data, has none
    assert c.compare_and_set(k, None, VersionedData(0, b"zero"))
    assert c.compare_and_set(k, None, VersionedData(1, b"again")) is False
    assert c.head(k) == VersionedData(0, b"zero")
    assert c.compare_and_set(k, 0, VersionedData(1, b"one"))
    assert c.compare_and_set(k, 0, VersionedData(2, b"stale")) is False  # head is 1
    assert c.compare_and_set(k, 2, VersionedData(3, b"future")) is False  # smaller head
    assert c.compare_and_set(k, 1, VersionedData(5, b"five"))
    with pytest.raises(ConsensusError):
        c.compare_and_set(k, 5, VersionedData(5, b"not after"))
    with pytest.raises(ConsensusError):
        c.compare_and_set(k, 5, VersionedData(MAX_SEQNO + 1, b"too big"))
    assert [v.seqno for v in c.scan(k, 0, 10)] == [0, 1, 5]
    assert [v.seqno for v in c.scan(k, 1, 1)] == [1]
    assert c.scan(k, 6, 10) == []
    assert c.truncate(k, 5) == 2
    assert c.truncate(k, 5) == 0
    with pytest.raises(ConsensusError):
        c.truncate(k, 6)
    with pytest.raises(ConsensusError):
        c.truncate(key(), 0)
    assert c.head(k) == VersionedData(5, b"five")
    assert k in c.list_keys()


def test_racing_compare_and_set_commits_exactly_once(consensus_factory):
    k = key()
    first = consensus_factory()
    first.compare_and_set(k, None, VersionedData(0, b"0"))
    for round_ in range(5):
        stores = [consensus_factory() for _ in range(2)]
        barrier = threading.Barrier(2)
        results: list[bool] = []

        def go(c, tag, barrier=barrier, results=results, seq=round_):
            barrier.wait()
            results.append(c.compare_and_set(k, seq, VersionedData(seq + 1, tag)))

        threads = [threading.Thread(target=go, args=(c, b"x%d" % i)) for i, c in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [False, True]
        assert first.head(k).seqno == round_ + 1


def test_blob_contract(blob):
    assert blob.get("s/a") is None
    blob.set("s/a", b"hello")
    blob.set("s/b", b"")
    blob.set("t/c", b"x" * 1000)
    assert blob.get("s/a") == b"hello" and blob.get("s/b") == b""
    blob.set("s/a", b"replaced")
    assert blob.get("s/a") == b"replaced"
    assert [(m.key, m.size) for m in blob.list_keys("s/")] == [("s/a", 8), ("s/b", 0)]
    assert [m.key for m in blob.list_keys()] == ["s/a", "s/b", "t/c"]
    assert blob.delete("s/a") == 8
    assert blob.delete("s/a") is None
    assert blob.get("s/a") is None


def test_file_blob_rejects_escaping_keys(tmp_path):
    b = FileBlob(tmp_path)
    for bad in ("../x", "a/../../x", "", "a//b"):
        with pytest.raises(ValueError):
            b.set(bad, b"")
