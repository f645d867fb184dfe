"""The cost of smallint, integer and real arithmetic in the evaluator (``python
bench/narrow_numbers.py``).

The plan's arithmetic takes the wide types (int64, float64, numeric): the SQL front end
lowers ``a + b`` of two integers to ``int32(int64(a) + int64(b))``, whose outer cast is
PostgreSQL's "integer out of range" check, and of two reals to ``float32(float64(a) +
float64(b))``. This prints the CPU time per row (``time.process_time``, which other
processes on a shared machine do not inflate; best of ``--repeat`` runs) of each against
the same addition on the wide type, over ``--rows`` rows.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from tidegate.spec.plan import ScalarType as S
from tidegate.spec.plan.scalar import BinaryFunc, CallBinary, Cast, ColumnRef, ScalarExpr
from tidegate.spec.plan.scalar_eval import compile_scalar, to_float32


def _narrowed(wide: S, narrow: S) -> ScalarExpr:
    add = CallBinary(BinaryFunc.ADD, Cast(ColumnRef(0), wide), Cast(ColumnRef(1), wide))
    return Cast(add, narrow)


def _cpu_per_row(f: Callable[[Any], Any], rows: Sequence[Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for r in rows:
            f(r)
        best = min(best, time.process_time() - start)
    return best / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ints = [(i, i + 1) for i in range(args.rows)]
    floats = [(to_float32(i / 7), to_float32(i / 3)) for i in range(args.rows)]
    plain = compile_scalar(CallBinary(BinaryFunc.ADD, ColumnRef(0), ColumnRef(1)))
    cases = [
        ("bigint + bigint", plain, ints),
        ("integer + integer (widened, cast back)", compile_scalar(_narrowed(S.INT64, S.INT32)), ints),
        ("smallint + smallint (widened, cast back)", compile_scalar(_narrowed(S.INT64, S.INT16)), [(i % 100, 1) for i, _ in ints]),
        ("double + double", plain, floats),
        ("real + real (widened, cast back)", compile_scalar(_narrowed(S.FLOAT64, S.FLOAT32)), floats),
    ]  # fmt: skip
    for name, f, rows in cases:
        print(f"{name:45s} {_cpu_per_row(f, rows, args.repeat) * 1e6:6.2f} us/row CPU")


if __name__ == "__main__":
    main()
