"""The schema of scenario files: pydantic models that validate a file and build a :class:`Scenario`.

:meth:`Scenario.from_json <tidegate.sim.scenario.Scenario.from_json>` (and so
:meth:`~tidegate.sim.scenario.Scenario.load` and ``--scenario FILE``) validates its
input here first: unknown keys are refused with their path (``dataflows.0.kindd``),
values are checked for type and range (integers are integers: ``"3"`` is not 3), and
every problem names its field and says what was expected. The problems are reported
as one :class:`~tidegate.sim.scenario.ScenarioError` (``.problems`` lists them as
``(path, message)`` pairs); pydantic's own error never reaches the caller.

A dataflow's ``plan`` is the JSON form of :func:`tidegate.spec.plan.plan_to_dict`,
checked by decoding it. :func:`json_schema` is the JSON Schema of the whole file
(``tidegate sim scenario schema``).

The models live in :mod:`tidegate.sim.scenario`, beside the types they build (so that
neither module imports the other); this module is their public name.
"""

from __future__ import annotations

from .scenario import (
    ColumnModel,
    DataflowModel,
    ScenarioModel,
    SchemaModel,
    SinkModel,
    SourceModel,
    TableModel,
    WorkloadModel,
    json_schema,
    problems,
    validate,
)

__all__ = [
    "ColumnModel",
    "DataflowModel",
    "ScenarioModel",
    "SchemaModel",
    "SinkModel",
    "SourceModel",
    "TableModel",
    "WorkloadModel",
    "json_schema",
    "problems",
    "validate",
]
