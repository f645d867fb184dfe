"""What a run (or a campaign) exercised: the rules, error types and effect kinds it reached.

A checker that never sees a rule broken, an error raised or an effect
carried out cannot say anything about it. :class:`RuleCounter` counts, while
a run lasts, every typed error created (by class and by protocol ``rule``)
and every effect the production driver carried out (by kind), and, with a
storage replica, every output its core asked the storage service for; its report
lists the ones that never happened too, so an unreached rule is visible.
It instruments the process for the run's duration (the counters are the
simulator's own, nothing in ``tidegate.spec`` or ``tidegate.runtime``
changes). Line coverage of the runtime is a campaign option on top
(``tidegate sim campaign --coverage``, with coverage.py).
"""

from __future__ import annotations

import typing
from collections import Counter
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

__all__ = [
    "RuleCounter",
    "all_effect_kinds",
    "all_error_types",
    "all_storage_output_kinds",
    "merge_reports",
    "render_report",
]


def all_error_types() -> dict[str, str | None]:
    """Every typed error of the spec and the runtime, by name, with its protocol ``rule`` if any."""
    import tidegate.runtime.controller.errors as driver_errors
    import tidegate.runtime.errors as runtime_errors
    import tidegate.spec.errors as spec_errors

    out: dict[str, str | None] = {}
    for module in (spec_errors, runtime_errors, driver_errors):
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, spec_errors.TidegateError):
                out[name] = getattr(cls, "rule", None)
    return out


def all_storage_output_kinds() -> list[str]:
    """Every output the storage replica core can ask its driver for (``StorageReplicaOutput``)."""
    from tidegate.spec.storage_replica import StorageReplicaOutput

    return sorted(k.__name__ for k in typing.get_args(StorageReplicaOutput))


def all_effect_kinds() -> list[str]:
    """Every effect the composed controller can emit (the ``ControllerEffect`` union)."""
    from tidegate.spec.compute.effects import Effect
    from tidegate.spec.storage.effects import StorageEffect

    kinds = [*typing.get_args(Effect), *typing.get_args(StorageEffect)]
    return sorted(k.__name__ for k in kinds)


class RuleCounter:
    """Counts errors and effects while entered (see the module docstring)."""

    def __init__(self) -> None:
        self.errors: Counter[str] = Counter()
        self.rules: Counter[str] = Counter()
        self.effects: Counter[str] = Counter()
        self.storage_outputs: Counter[str] = Counter()
        self._undo: list[Any] = []

    def __enter__(self) -> RuleCounter:
        from tidegate.runtime.controller.driver import ControllerDriver
        from tidegate.spec.errors import TidegateError
        from tidegate.spec.storage_replica import StorageReplica

        counter = self
        original_init = TidegateError.__init__
        original_apply = ControllerDriver._apply_one
        original_drain = StorageReplica.drain

        def counting_drain(self: Any) -> Any:
            outputs = original_drain(self)
            counter.storage_outputs.update(type(o).__name__ for o in outputs)
            return outputs

        def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
            counter.errors[type(self).__name__] += 1
            rule = getattr(self, "rule", None)
            if rule:
                counter.rules[str(rule)] += 1
            original_init(self, *args, **kwargs)

        def counting_apply(self: Any, effect: Any) -> None:
            counter.effects[type(effect).__name__] += 1
            original_apply(self, effect)

        TidegateError.__init__ = counting_init  # type: ignore[method-assign]
        ControllerDriver._apply_one = counting_apply  # type: ignore[method-assign,assignment]
        StorageReplica.drain = counting_drain  # type: ignore[method-assign]
        self._undo = [
            (TidegateError, "__init__", original_init),
            (ControllerDriver, "_apply_one", original_apply),
            (StorageReplica, "drain", original_drain),
        ]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for owner, name, original in self._undo:
            setattr(owner, name, original)
        self._undo = []

    def report(self) -> dict[str, dict[str, int]]:
        """``{"errors": ..., "rules": ..., "effects": ...}`` with every known name (zero if unseen)."""
        known = all_error_types()
        errors = {name: self.errors.get(name, 0) for name in sorted(known)}
        errors.update({k: v for k, v in self.errors.items() if k not in errors})
        rules = {r: 0 for r in sorted({r for r in known.values() if r})}
        rules.update(self.rules)
        effects = {k: self.effects.get(k, 0) for k in all_effect_kinds()}
        effects.update({k: v for k, v in self.effects.items() if k not in effects})
        out = {"errors": errors, "rules": rules, "effects": effects}
        if self.storage_outputs:  # a run with a storage replica: what its core asked for
            outputs = {k: self.storage_outputs.get(k, 0) for k in all_storage_output_kinds()}
            out["storage_outputs"] = outputs
        return out


def merge_reports(reports: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """The sum of several runs' reports."""
    out: dict[str, Counter[str]] = {}
    for report in reports:
        for section, counts in report.items():
            bucket = out.setdefault(section, Counter())
            for name, n in counts.items():
                bucket[name] += n
                bucket.setdefault(name, 0)
    return {s: dict(sorted(c.items())) for s, c in sorted(out.items())}


def render_report(report: Mapping[str, Mapping[str, int]], *, limit: int = 40) -> str:
    """A readable summary: for each section, how many were reached, and the unreached ones."""
    lines: list[str] = []
    for section, counts in report.items():
        reached = [k for k, n in counts.items() if n]
        never = [k for k, n in counts.items() if not n]
        lines.append(f"{section}: {len(reached)} of {len(counts)} reached")
        busiest = sorted(reached, key=lambda k: -counts[k])[:limit]
        if busiest:
            lines.append("  reached: " + ", ".join(f"{k} {counts[k]}" for k in busiest))
        if never:
            lines.append("  never:   " + ", ".join(never))
    return "\n".join(lines)
