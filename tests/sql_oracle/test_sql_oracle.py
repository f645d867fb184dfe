"""An independent oracle: random plans translated to SQL and run on DuckDB.

Each case (``oracle_cases.py``, a generator written apart from
``tidegate.spec.strategies``) is one to three random input collections with
updates at times ``0..3`` (inserts, later retractions, a few negative
multiplicities), a random plan over every operator and scalar function of the
IR, an ``as_of`` and a feeding schedule. ``oracle_sql.py`` translates the plan
to SQL and runs it on DuckDB over the inputs accumulated at each time; its
answer must equal, at every time from the ``as_of`` on,

* the reference evaluator (``evaluate(plan, inputs, t)``), and
* the ``PythonExecutor`` fed incrementally through the executor contract
  (install; feed each input its updates up to a new upper, the uppers moving
  unevenly; step; accumulate the index export's batches; finally close the
  inputs), and its index's peek at every time;

and, in ``test_sql_oracle_spark.py``, the ``SparkExecutor`` driven the same
way. ``test_sql_oracle_examples.py`` pins the emulations below on examples
with SQL's answers worked out by hand.

How results are compared
------------------------

Rows: as multisets with multiplicities, type-strictly (``True`` is not ``1``,
``1`` is not ``1.0``).

Errors: tidegate carries evaluation errors in a collection's error set, with
multiplicities, and goes on with the other rows; a SQL query fails as a whole.
So the oracle emulates tidegate's model, and both rows and errors are
compared: when an operator's statement fails, the oracle re-runs it row by
row, keeps the rows that succeed, and counts each failing row's multiplicity
against the error's *category* (division by zero, integer out of range, float
out of range, invalid cast, negative substring length, LIKE pattern ending in
the escape, invalid escape string, timestamp out of range); a ``Reduce`` group whose ``sum``/``avg`` is out of range is one
error and no row. Errors reach the output once per path (a ``Let`` value read
twice counts twice; a left join reads its left input three times and its
right input twice, as its documented lowering ``inner + pad(left -
semijoin)`` does, a right join the reverse, a full join each input four
times). tidegate's messages are mapped to the same categories and
the counts per category must be equal; the wording is tidegate's and is not
compared. When a failing row has a negative multiplicity the errors are not
compared (tidegate cancels errors per message, which categories cannot
follow); the rows still are. A peek must answer an error exactly when the
oracle has one (or a negative multiplicity), else the rows.

Within a row, which operands are evaluated, and so which fail, is tidegate's
documented order: left to right, both operands of an operator even when one is
NULL, ``AND``/``OR`` stopping at the first ``false``/``true``, ``COALESCE`` at
the first non-NULL, ``IF`` and a ``Filter``'s predicates evaluating only what
they need. SQL leaves this to the engine (DuckDB evaluates every operand of
``AND`` and skips the right operand of an operator whose left one is a constant
NULL), so the translation spells it out.

What SQL leaves to the implementation, and the translation emulates
----------------------------------------------------------------------

* **Multiplicities.** A collection is a table of rows plus a ``diff`` column,
  consolidated after every operator. For positive multiplicities every
  operator is the SQL one; for signed ones ``Reduce`` follows the IR's rules
  (``count`` = Σ multiplicities, ``min``/``max``/distinct over values of
  positive total multiplicity, a group exists while its input is non-empty),
  and a left join pads a left row that no right key of positive multiplicity
  matches (a right join the mirror image, a full join both). A global aggregate over an empty input has no row (SQL returns one;
  tidegate's ``Reduce`` is Materialize's).
* **Unused work.** Each operator is materialized and DuckDB's optimizer is
  off, so every expression runs on every row that reaches it, as in tidegate.
* **Division.** int64 ``/`` truncates toward zero and ``%`` takes the
  dividend's sign (DuckDB's ``//`` and ``%``); float division or ``%`` by zero
  is an error (DuckDB returns ``inf``/``NaN``), but ``NaN / 0`` is ``NaN``.
* **Overflow.** PostgreSQL's float8 checks: an infinite result of finite
  operands is an error (DuckDB returns ``inf``), and so is a zero product or
  quotient of non-zero operands (underflow), checked after every float
  operation; ``NaN`` and infinities otherwise flow; int64 overflow is an error
  (DuckDB raises too; int64 negation is written ``0 - x``, as DuckDB negates
  a constant ``INT64_MIN`` without one). int64 ``sum`` is exact (HUGEINT) and an error
  beyond int64; float ``sum`` and every ``avg`` are exact and rounded once, as
  the IR documents (DuckDB adds floats in order): the oracle lists each
  group's values in SQL and adds them with Fractions.
* **int64 against float64** (comparisons, join keys) compares as float64, as
  in SQL; two int64 keys of one join class compare exactly.
* **float -> int64** rounds half to even (``round_even``; DuckDB's cast rounds
  half away from zero).
* **Formatting.** float -> string is PostgreSQL's ``float8out`` (the shortest
  digits that read back, positional for exponents -4 to 14, ``1e+15`` beyond):
  ``pg_float8out``, a function of the oracle's own registered in DuckDB;
  timestamp -> string trims the fraction's zeros (DuckDB and PostgreSQL agree).
* **String -> number**: PostgreSQL 15's input syntax in ASCII, which tidegate
  documents: surrounding ASCII whitespace, a sign and decimal digits for int64
  (DuckDB reads ``'5.5'``, ``'1e3'`` and ``'1_000'``: the translation checks the
  syntax first); decimal notation with an optional exponent for float64, where
  a finite number beyond float64 or one that rounds to zero is out of range,
  and ``NaN``, ``Inf``, ``Infinity`` in any case are values (DuckDB reads
  ``1_0``).
* **String -> bool/date/timestamp**: SQL's literal syntax around ASCII
  whitespace: PostgreSQL's words and their unambiguous prefixes (true, tr, t,
  yes, y, on, 1, false, f, no, n, off, of, 0) in any case, ``YYYY-M-D``,
  ``YYYY-M-D[( |T)HH:MM[:SS[.f{1,6}]]]``, years 1..9999 (DuckDB reads offsets,
  hour 24, year 0, seven fraction digits; it reads no ``yes``/``on``).
* **round** rounds halves away from zero (DuckDB's ``round(DOUBLE)`` does).
  ``abs(INT64_MIN)`` is an overflow (DuckDB fails it as a conversion).
* **ILIKE, LIKE ... ESCAPE.** DuckDB lower-cases one character to one, as
  tidegate documents. An escape longer than one character is an error on each
  non-NULL row (DuckDB refuses the statement); a pattern ending in the escape
  is an error on each evaluation, as for LIKE.
* **Timestamps ± milliseconds** are computed in exact microseconds
  (``epoch_us``, HUGEINT) and are an error outside years 1..9999 (DuckDB's
  range is wider). ``extract(epoch)`` is the microseconds as DOUBLE divided by
  10^6, as tidegate documents.
* **string_agg** orders by code point (tidegate's choice; SQL leaves the
  order open): ``ORDER BY`` for the distinct form, a sorted list of each value
  repeated its total multiplicity otherwise.
* **LIKE.** Backslash is the escape (tidegate's default; SQL has none unless
  ``ESCAPE`` is given). A pattern ending in an unpaired escape is an error on
  every evaluation, as tidegate documents (DuckDB and PostgreSQL raise only
  when matching reaches it).
* **Case mapping.** Full Unicode case mapping (SpecialCasing), as tidegate
  documents: ``upper('ß')`` is ``'SS'``, ``upper('ﬁ')`` ``'FI'``, ``lower('İ')``
  ``'i̇'``; DuckDB maps one character to one (``'ẞ'``, ``'ﬁ'``, ``'i'``). The
  translation replaces those characters, the ones the generator uses, first.
  The Greek final sigma (context-dependent) is not emulated: the generator
  has no ``Σ``.
* **SUBSTRING** is PostgreSQL's (a start below 1 still counts toward the
  length; a negative length is an error); DuckDB's counts a negative start
  from the end and refuses offsets beyond 2^32: the translation computes the
  window.
* **TopK** orders NULLs by the plan's ``nulls_last`` per key, and breaks ties
  by the whole row ascending with NULLs first, as ``TopK`` documents: explicit
  ``NULLS FIRST/LAST`` in the ``ORDER BY`` of ``ROW_NUMBER()``.
* Strings compare by code point (DuckDB's default binary collation), booleans
  ``false < true``. Inputs never hold ``-0.0`` (equal to ``0.0``; which of the
  two a GROUP BY keeps is arbitrary).

Findings fixed
--------------

The oracle found that tidegate's casts from string to bool, date and timestamp
read more than SQL's literal syntax: they stripped Unicode whitespace
(``'\u00a0true'``) and read what Python's ``fromisoformat`` reads
(``'20200101'``, ``'2020-W01-1'``, ``'2020-01-01 10'``, any separator instead
of ``T``, seven or more fraction digits). tidegate follows SQL;
those strings are regression examples in ``test_sql_oracle_examples.py``.

Budget: 300 cases (reference and ``PythonExecutor``) under the ``dev`` and
``ci`` profiles, 3,000 under ``nightly``; Spark: 20 and 200.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from oracle_cases import OracleCase, oracle_cases
from oracle_harness import check_case

from tidegate.spec.executor import PythonExecutor

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
CASES = 3000 if _PROFILE == "nightly" else 300

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800 if _PROFILE == "nightly" else 300)]


@settings(
    max_examples=CASES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=oracle_cases())
def test_reference_and_python_executor_agree_with_sql(case: OracleCase) -> None:
    check_case(case, {"PythonExecutor": PythonExecutor})
