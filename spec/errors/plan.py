"""Errors of the plan area: invalid plans, scalar evaluation errors, executor misuse."""

from __future__ import annotations

from .base import TidegateError

__all__ = [
    "ArityMismatch",
    "CardinalityViolation",
    "CompactionRegression",
    "DivisionByZero",
    "DuplicateExport",
    "EvaluationError",
    "ExecutorError",
    "InputFrontierRegression",
    "InvalidArgument",
    "InvalidCast",
    "InvalidImport",
    "InvalidInputRow",
    "InvalidPlan",
    "NumericOverflow",
    "PeekNotReady",
    "PeekOutOfRange",
    "PlanCycle",
    "PlanDecodeError",
    "PlanError",
    "PlanTooDeep",
    "TypeMismatch",
    "UnknownColumn",
    "UnknownExport",
    "UnknownInput",
    "UnsupportedTimestamp",
    "UpdateBeforeFrontier",
]


class PlanError(TidegateError, ValueError):
    """Base class of errors about a plan's shape or types (raised before anything runs)."""


class PlanTooDeep(PlanError):
    """A plan (or its JSON form) nested deeper than :data:`~tidegate.spec.plan.depth.MAX_NESTING`.

    Refused before anything walks it, so that no part of tidegate hits Python's
    recursion limit on it.
    """


class UnknownColumn(PlanError):
    """A column index out of range, or a column name that the schema does not have."""


class TypeMismatch(PlanError):
    """An expression or operator applied to values of the wrong type."""


class ArityMismatch(PlanError):
    """Rows or inputs with the wrong number of columns (e.g. a union of differently shaped inputs)."""


class UnknownInput(PlanError):
    """A ``Get`` of a collection the dataflow neither imports nor builds, or an unbound ``Let`` name."""


class PlanCycle(PlanError):
    """Objects of one dataflow that depend on each other in a cycle."""


class InvalidPlan(PlanError):
    """Any other structural rule a plan breaks (negative limit, empty join class, no exports, ...)."""


class PlanDecodeError(PlanError):
    """A serialised plan that cannot be decoded."""


class EvaluationError(TidegateError, ArithmeticError):
    """A scalar expression failed on one row; the row goes to the error collection.

    Executors never let these escape: an erroring row becomes an update of the
    object's error collection, and a peek at a time with errors answers with
    ``PeekError``. ``str(err)`` is the deterministic message recorded there.
    """


class DivisionByZero(EvaluationError):
    """``x / 0`` or ``x % 0``."""


class NumericOverflow(EvaluationError):
    """An int64 result out of range, or a float result that is not finite."""


class InvalidCast(EvaluationError):
    """A cast whose input cannot be represented in the target type (``'abc'::int64``)."""


class InvalidArgument(EvaluationError):
    """A function argument outside its domain (a negative substring length)."""


class CardinalityViolation(EvaluationError):
    """A scalar subquery produced more than one row (SQLSTATE 21000)."""


class ExecutorError(TidegateError, ValueError):
    """Base class of errors from misusing an executor (the contract in ``tidegate.spec.executor``)."""


class UnsupportedTimestamp(ExecutorError):
    """The executor needs totally ordered ``int`` timestamps and got something else."""


class DuplicateExport(ExecutorError):
    """A dataflow exports an id that an installed dataflow already exports."""


class UnknownExport(ExecutorError):
    """An id that is not an export (or dataflow input) the executor knows."""


class InputFrontierRegression(ExecutorError):
    """An input's new upper is behind its previous upper."""


class UpdateBeforeFrontier(ExecutorError):
    """An input update at a time its upper already declared complete."""


class InvalidInputRow(ExecutorError):
    """An input row whose shape or values do not match the imported collection's schema."""


class InvalidImport(ExecutorError):
    """An index import the executor does not have, or whose since is beyond the dataflow's as_of."""


class CompactionRegression(ExecutorError):
    """``allow_compaction`` to a frontier behind the export's current since."""


class PeekOutOfRange(ExecutorError):
    """A peek at a time before the index's since (it can never be answered)."""


class PeekNotReady(ExecutorError):
    """A peek at a time not yet complete (``upper <= time``); retry once the upper passes it."""
