"""Unmanaged replica processes over real networks: a connection cut and restored, TLS with a token.

The replicas here run the Python executor (the Spark path is covered by
``test_e2e_spark_replicas.py``); what is under test is the controller's
connection handling: failure detection, reconnect with the history replayed,
and transport security.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.dsl import Schema, count, sum_
from tidegate.runtime.transport import ConnectionRefused, TransportError, Unauthenticated
from tidegate.runtime.transport.grpc_client import ClientTls, GrpcTransport

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]

SCHEMA = Schema.of(("k", "string", False), ("v", "int64", False))


def define(live: Any) -> None:
    """Table ``t``, index ``agg`` (count and sum per key), recorded."""
    env = live.env
    live.ids["t"] = live.call(lambda: env.create_table("t", SCHEMA))
    live.rec.table(live.ids["t"], SCHEMA)
    agg = live.sync(lambda: env.table("t")).group_by("k").agg(count(), sum_("v"))
    live.ids["agg"] = live.call(lambda: env.create_index(agg, ["k"], name="agg"))
    live.rec.installed(live.ids["agg"], "index", agg.plan, (0,))
    live.keep_history("agg")  # peeked at append times, after waiting for them


@pytest.fixture
def replica(e2e: Any, tmp_path: Path) -> Iterator[Any]:
    r = e2e.start_replica(tmp_path)
    yield r
    r.stop()


def test_a_cut_connection_is_detected_and_the_replica_rehydrated_after_it_is_restored(
    e2e: Any, tmp_path: Path, replica: Any
) -> None:
    proxy = e2e.CuttableProxy(replica.address)
    try:
        with e2e.open_live(tmp_path, "cut", {"r1": proxy.address}) as live:
            live.wait_connected(timeout=60)
            define(live)
            ts = live.append("t", [(("a", 1), 1), (("b", 2), 1)])
            assert live.peek("agg", ts) == live.expected("agg", ts)
            epoch = live.sync(lambda: live.env.replicas()[0].epoch)

            proxy.cut()
            live.wait_for("r1 seen failed", lambda: live.replicas()["r1"] != "connected", 30)
            ts = live.append("t", [(("a", 5), 1), (("b", 2), -1)])  # storage takes writes meanwhile
            with pytest.raises(TimeoutError):  # no replica: the index cannot move past ts
                live.call(lambda: live.env.wait_for("agg", ts), timeout=1.0)

            proxy.restore()
            live.wait_connected(timeout=60)  # reconnected
            assert live.sync(lambda: live.env.replicas()[0].epoch) > epoch
            # Read at the freshest time: the rehydrated index jumps to the tables' upper, and
            # its since follows within the index's lag, so ``ts`` may be compacted by now.
            now = live.call(lambda: live.env.freshest("agg"))
            assert now >= ts
            assert live.peek("agg", now) == live.expected("agg", now) == {("a", 2, 6): 1}
            assert live.rec.check() == []
        assert proxy.cuts == 1
    finally:
        proxy.close()


def test_tls_with_a_token_serves_and_refuses_strangers(e2e: Any, tmp_path: Path) -> None:
    certs = e2e.make_certs(tmp_path)
    token = "e2e-s3cret"
    replica = e2e.start_replica(
        tmp_path,
        "--tls-cert",
        str(certs["server"]),
        "--tls-key",
        str(certs["server-key"]),
        "--token",
        token,
    )
    tls = ClientTls.from_files(certs["ca"], server_name="localhost")
    try:
        with e2e.open_live(tmp_path, "tls", {"r1": replica.address}, tls=tls, token=token) as live:
            live.wait_connected(timeout=60)  # over TLS
            define(live)
            ts = live.append("t", [(("x", 7), 1)])
            assert live.peek("agg", ts) == {("x", 1, 7): 1}
            assert live.rec.check() == []

        async def attempt(transport: GrpcTransport) -> None:
            try:
                async with await transport.connect(replica.address):
                    pass
            finally:
                await transport.aclose()

        with pytest.raises(Unauthenticated):
            anyio.run(attempt, GrpcTransport(token="wrong", tls=tls))
        with pytest.raises((ConnectionRefused, TransportError)):
            anyio.run(attempt, GrpcTransport(token=token))  # plaintext to a TLS server
    finally:
        replica.stop()
