"""Where a restarted ingestion resumes: the seed's trait "used to calculate safe resumption frontiers for a source".

An ingestion writes its remap collection first and then its data
collection(s) (one data shard per output; the primary collection today,
subsources later). When it restarts, everything every output has made
durable must not be written again, and nothing some output lacks may be
skipped: so it resumes from the **meet** of its outputs' uppers -- the
earliest of them. The remap collection is not an output for this purpose:
it runs ahead of the data (a binding is durable before the data it
assigns), and resuming from it would skip the data of its last bindings.

From that time ``R`` the ingestion reads its bindings as of ``R - 1`` and
restarts upstream at ``binding(R - 1)`` (:mod:`.reclock`); an output whose
upper is beyond ``R`` has some of the re-derived data already and takes
only what it lacks (compare-and-append at its own upper).

>>> resumption_frontier([Antichain([7]), Antichain([5])])
Antichain([5])
>>> resumption_frontier([Antichain(), Antichain([5])]), resumption_frontier([])
(Antichain([5]), Antichain([0]))
"""

from __future__ import annotations

from collections.abc import Iterable

from ..frontier import Antichain

__all__ = ["resumption_frontier"]


def resumption_frontier(output_uppers: Iterable[Antichain]) -> Antichain:
    """The frontier an ingestion resumes from: the meet of its data outputs' uppers.

    Never beyond what every output has made durable, never beyond a time some
    output lacks, and monotone in each upper. With no outputs an ingestion has
    written nothing: it resumes from the beginning, ``[0]``. A closed output
    (``[]``) does not hold the others back; if all are closed, so is the result.
    """
    uppers = list(output_uppers)
    if not uppers:
        return Antichain.bottom(0)
    return Antichain.meet_all(uppers)
