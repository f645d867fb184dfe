"""The executable model of tidegate: pure, deterministic, free of IO.

Everything in this package is synchronous and takes time and randomness as
arguments. ``sim``, ``runtime`` and ``replica`` drive these objects; none of
them re-implements protocol or controller behaviour.
"""
