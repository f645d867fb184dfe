"""The Blob and Consensus contracts, checked against every backend (live servers included)."""

from __future__ import annotations

import threading
import time
import uuid

import pyarrow as pa
import pytest

from tidegate.runtime.storage import (
    FileBlob,
    MemoryBlob,
    MemoryConsensus,
    ShardStore,
    SqliteConsensus,
    VersionedData,
    Watchable,
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


@pytest.fixture(params=["mem", pytest.param("postgres", marks=pytest.mark.postgres)])
def watchable_factory(request):
    """The backends that say when a key changed (SQLite cannot tell another process)."""
    if request.param == "mem":
        shared = MemoryConsensus()
        yield lambda: shared
        return
    url = request.getfixturevalue("postgres_url")
    opened = []

    def new():
        c = open_consensus(url)
        opened.append(c)
        return c

    yield new
    for c in opened:
        c.close()


def _heard(heard, expected, timeout=15.0):
    deadline = time.monotonic() + timeout
    while sorted(heard) != sorted(expected) and time.monotonic() < deadline:
        time.sleep(0.01)
    return sorted(heard)


def _until_listening(consensus, heard):
    """PostgreSQL's listener connects in the background and then tells every watcher once
    (commits before it listened went unheard): wait for that, and forget it."""
    listening = getattr(consensus, "_listening", None)
    if listening is not None:
        assert listening.wait(15)
    heard.clear()


def test_a_watcher_hears_of_every_commit_to_its_key_by_anyone(watchable_factory):
    """A commit through another client (another process, for PostgreSQL) reaches the watchers
    of its key, and only those; a stopped watch hears nothing more."""
    reader, writer = watchable_factory(), watchable_factory()
    assert isinstance(reader, Watchable)
    k, other = key(), key()
    heard: list[str] = []
    heard_other: list[str] = []
    stop = reader.watch(k, heard.append)
    reader.watch(other, heard_other.append)
    _until_listening(reader, heard)
    heard_other.clear()
    assert writer.compare_and_set(k, None, VersionedData(0, b"a"))
    assert _heard(heard, [k]) == [k]
    assert writer.compare_and_set(k, 0, VersionedData(1, b"b"))
    assert not writer.compare_and_set(k, 0, VersionedData(2, b"lost"))  # no commit, no news
    assert writer.compare_and_set(other, None, VersionedData(0, b"c"))
    assert _heard(heard_other, [other]) == [other]
    assert _heard(heard, [k, k]) == [k, k]
    stop()
    stop()  # idempotent
    assert writer.compare_and_set(k, 1, VersionedData(2, b"d"))
    assert writer.compare_and_set(other, 0, VersionedData(1, b"e"))
    assert _heard(heard_other, [other, other]) == [other, other]
    assert heard == [k, k]


@pytest.mark.postgres
def test_postgres_watchers_are_told_after_the_listening_connection_comes_back(postgres_url):
    """Notifications sent while the listening connection is down are lost; once it is back,
    every watcher is called (a reader then looks again rather than wait for its next poll)."""
    reader, writer = open_consensus(postgres_url), open_consensus(postgres_url)
    try:
        k = key()
        heard: list[str] = []
        reader.watch(k, heard.append)
        _until_listening(reader, heard)
        pid = reader._listen_pid
        writer._conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 15
        while reader._listening.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not reader._listening.is_set()  # the listener saw its connection go
        assert writer.compare_and_set(k, None, VersionedData(0, b"a"))  # while it is down
        assert k in _heard(heard, [k])  # told on reconnecting
        assert reader._listening.wait(15) and reader._listen_pid != pid
        heard.clear()
        assert writer.compare_and_set(k, 0, VersionedData(1, b"b"))
        assert _heard(heard, [k]) == [k]
    finally:
        reader.close()
        writer.close()


def test_a_shard_store_watches_where_its_consensus_can(tmp_path):
    mem = ShardStore(MemoryBlob(), MemoryConsensus())
    heard: list[str] = []
    stop = mem.watch("s1", heard.append)
    assert stop is not None
    mem.create_shard("s1", pa.schema([("k", pa.int64())]))
    assert heard == ["s1"]
    stop()
    sqlite = ShardStore(FileBlob(tmp_path / "blob"), SqliteConsensus(tmp_path / "c.db"))
    assert sqlite.watch("s1", heard.append) is None  # other processes' commits go unseen


@pytest.mark.postgres
def test_postgres_close_stops_its_listener(postgres_url):
    c = open_consensus(postgres_url)
    c.watch(key(), lambda k: None)
    listener = c._listener
    assert listener is not None and listener.is_alive()
    c.close()
    assert not listener.is_alive()


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
