"""Simulated processes: a name, an incarnation, alive or dead.

Every actor of a simulation that the fault plan can kill -- the controller
(an embedding application with its ``Environment``) and each replica -- is a
:class:`SimProcess`. Its storage clients and its platform refuse work once it
is dead, as ``kill -9`` would: nothing the dead process still had in flight
reaches the disk afterwards. A crash point that fires *inside* one of its
storage calls raises :class:`ProcessKilled` there, so the call stops
half-way (a blob written but never committed, say) and the process dies.
"""

from __future__ import annotations

import hashlib

__all__ = ["ProcessKilled", "SimProcess"]


class ProcessKilled(BaseException):
    """The simulated process died (here, or earlier) and can do nothing more.

    A ``BaseException``, like ``KeyboardInterrupt``: the product's ``except
    Exception`` handlers must not swallow a death.
    """

    def __init__(self, process: str, where: str = "") -> None:
        super().__init__(f"process {process} was killed" + (f" during {where}" if where else ""))
        self.process = process
        self.where = where


class SimProcess:
    """One simulated process (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.incarnation = 0
        self.alive = False
        self._ids = 0
        self._id_prefix = ""

    def start(self) -> None:
        """A new incarnation begins (fresh identifiers; the old one's state is gone)."""
        self.incarnation += 1
        self.alive = True
        self._ids = 0
        digest = hashlib.blake2b(f"{self.name}/{self.incarnation}".encode(), digest_size=8)
        self._id_prefix = digest.hexdigest()

    def die(self) -> None:
        self.alive = False

    def check(self, where: str = "") -> None:
        """Raise :class:`ProcessKilled` unless the process is alive."""
        if not self.alive:
            raise ProcessKilled(self.name, where)

    def new_id(self) -> str:
        """A fresh 32-hex-digit identifier, the same sequence for the same name and incarnation."""
        self._ids += 1
        return f"{self._id_prefix}{self._ids:016x}"

    def __repr__(self) -> str:
        state = "alive" if self.alive else "dead"
        return f"SimProcess({self.name!r}, incarnation={self.incarnation}, {state})"
