"""Deterministic simulation of tidegate: the spec's controller and replicas under faults.

Everything runs inside one trio run with a :class:`trio.testing.MockClock`
(virtual time that jumps whenever the run is idle), drives the real
:mod:`tidegate.spec` state machines, and draws every nondeterministic choice
from one :class:`ChoiceSource`. The same seed and scenario give a
byte-identical trace.

* :mod:`.choices` -- the one source of nondeterminism (seeded RNG or Hypothesis draws);
* :mod:`.faults` -- fault plans as data (JSON), generated swarm-style from a seed;
* :mod:`.network` -- ordered, reliable-while-up connections with latency, cuts and restores;
* :mod:`.kernel` -- the discrete-event loop on trio's virtual clock;
* :mod:`.trace` -- the canonical event trace and its hash.
"""
