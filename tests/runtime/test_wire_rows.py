"""Row payloads (``runtime/wire/_rows.py``): Arrow IPC streams of rows and extra columns."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.wire._rows import decode_table, encode_table
from tidegate.runtime.wire.errors import MalformedMessage
from tidegate.spec.plan.numeric import reduce

_INT64 = st.integers(-(2**63), 2**63 - 1)
_NUMERIC = st.builds(
    lambda i, e: reduce(Decimal(i).scaleb(-e)), st.integers(-(10**40), 10**40), st.integers(-5, 60)
)
_COLUMN = st.sampled_from([_INT64, st.text(max_size=8), st.booleans(), _NUMERIC, st.none()])


@st.composite
def payloads(draw: st.DrawFn) -> tuple[list[tuple[object, ...]], int, dict[str, list[int]]]:
    """Rows whose every column holds one type (or NULLs), and extra count/time/diff columns."""
    arity = draw(st.integers(0, 3))
    kinds = [draw(_COLUMN) for _ in range(arity)]
    n = draw(st.integers(0, 5))
    nullable = [draw(st.booleans()) for _ in range(arity)]
    rows = [
        tuple(
            draw(st.none() | k) if nul else draw(k) for k, nul in zip(kinds, nullable, strict=True)
        )
        for _ in range(n)
    ]
    names = draw(st.sampled_from([(), ("__count",), ("__time", "__diff"), ("__diff",)]))
    extra = {
        name: [draw(st.integers(0, 2**63 - 1) if name == "__time" else _INT64) for _ in rows]
        for name in names
    }
    return rows, arity, extra


@given(payloads())
def test_rows_and_extra_columns_round_trip(
    payload: tuple[list[tuple[object, ...]], int, dict[str, list[int]]],
) -> None:
    rows, arity, extra = payload
    got_rows, got_extra = decode_table(encode_table(rows, arity, extra), arity, list(extra))
    assert got_rows == rows and got_extra == extra


@given(payloads())
def test_the_bytes_are_the_stream_pyarrow_writes(
    payload: tuple[list[tuple[object, ...]], int, dict[str, list[int]]],
) -> None:
    """The payload is an ordinary Arrow IPC stream: pyarrow's own writer, given the batch
    the payload holds, writes the same bytes."""
    rows, arity, extra = payload
    data = encode_table(rows, arity, extra)
    reader = pa.ipc.open_stream(pa.py_buffer(data))
    [batch] = list(reader)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, reader.schema) as writer:
        writer.write_batch(batch)
    assert sink.getvalue().to_pybytes() == data


def test_rows_that_do_not_fit_arrow_columns_are_malformed() -> None:
    with pytest.raises(MalformedMessage, match="differing arity"):
        encode_table([(1, 2), (3,)], 2, {})
    with pytest.raises(MalformedMessage, match="cannot be encoded"):
        encode_table([(1,), ("a",)], 1, {})  # one column, two types
    with pytest.raises(MalformedMessage, match="cannot be encoded"):
        encode_table([(1,)], 1, {"__count": [2**63]})  # past int64
    with pytest.raises(MalformedMessage, match="not an Arrow IPC stream"):
        decode_table(b"\x00garbage", 1, [])
