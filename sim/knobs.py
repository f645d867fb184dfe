"""The production knobs a run varies by its seed, so campaigns cover each setting.

FoundationDB's simulator randomises its servers' tunables per run: a path that only
one setting takes (here, maintenance merging small batches into blobs rather than
keeping them inline) still meets faults. Each knob is drawn from a stream of its
own, so adding one leaves every other draw of a seed as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.spec.shard import CompactionPolicy

from .choices import ChoiceSource, pick

__all__ = ["FRAME_SIZES", "SHARD_POLICIES", "Knobs", "draw_knobs"]

SHARD_POLICIES: tuple[tuple[str, CompactionPolicy], ...] = (
    ("inline_merges", CompactionPolicy()),
    (
        "blob_merges",
        CompactionPolicy(max_batches=8, inline_merge_max_bytes=0, inline_held_max_bytes=0),
    ),
)
"""The stores' maintenance: the default (small inline batches merge inline, committed by
the appends), or every merge into a blob, due at half the default's batches (a blob write,
and its faults, every few appends)."""


FRAME_SIZES: tuple[tuple[str, int | None], ...] = (
    ("default", None),
    ("frames_1k", 1024),
    ("frames_128", 128),
)
"""The largest slice of a message in one frame on the simulated wire: the product's default
(1 MiB: only a huge answer is fragmented), or small enough that plans, peek answers and
subscribe batches travel as fragments (``MessageCodec.frames``' ``max_frame_bytes``)."""


@dataclass(frozen=True)
class Knobs:
    """One run's settings of the knobs (see the module docstring), by name."""

    shard_policy_name: str = "inline_merges"
    frame_size_name: str = "default"

    def __post_init__(self) -> None:
        if self.shard_policy_name not in dict(SHARD_POLICIES):
            known = ", ".join(name for name, _ in SHARD_POLICIES)
            raise ValueError(f"unknown shard policy {self.shard_policy_name!r}; known: {known}")
        if self.frame_size_name not in dict(FRAME_SIZES):
            known = ", ".join(name for name, _ in FRAME_SIZES)
            raise ValueError(f"unknown frame size {self.frame_size_name!r}; known: {known}")

    @property
    def max_frame_bytes(self) -> int | None:
        """The simulated network's frame size (``None``: the product's default)."""
        return dict(FRAME_SIZES)[self.frame_size_name]

    @property
    def shard_policy(self) -> CompactionPolicy:
        """The maintenance policy of every shard store of the run."""
        return dict(SHARD_POLICIES)[self.shard_policy_name]

    def to_json(self) -> dict[str, str]:
        return {"shard_policy": self.shard_policy_name, "frame_size": self.frame_size_name}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> Knobs:
        return cls(data.get("shard_policy", "inline_merges"), data.get("frame_size", "default"))


def draw_knobs(source: ChoiceSource | None) -> Knobs:
    """The knobs drawn from ``source`` (``None``: the defaults), in a fixed order: a knob
    added later is drawn after the others, which keep their draws."""
    if source is None:
        return Knobs()
    policy = pick(source, [name for name, _ in SHARD_POLICIES])
    return Knobs(policy, pick(source, [name for name, _ in FRAME_SIZES]))
