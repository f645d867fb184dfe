"""The root of tidegate's error hierarchy."""

from __future__ import annotations

__all__ = ["InvalidId", "InvalidText", "TidegateError", "UnhandledEffect"]


class TidegateError(Exception):
    """Base class of every error tidegate raises on purpose."""


class InvalidId(TidegateError, ValueError):
    """A malformed identifier (GlobalId text, replica or instance name)."""


class InvalidText(TidegateError, ValueError):
    """Text that is not a sequence of Unicode scalar values (it holds a UTF-16 surrogate).

    No UTF-8 encoder accepts such text, so it can be neither stored nor sent:
    every boundary where text enters refuses it, changing nothing (see
    :mod:`tidegate.spec.text`). PostgreSQL's SQLSTATE for it is 22021.
    """

    sqlstate = "22021"


class UnhandledEffect(TidegateError, TypeError):
    """A driver was handed an effect it has no handler for: a new effect type missed a driver.

    Every driver raises this rather than dropping the effect, so an effect
    added to the model cannot silently go nowhere.
    """

    def __init__(self, driver: str, effect: object) -> None:
        super().__init__(f"{driver} has no handler for effect {type(effect).__name__}: {effect!r}")
        self.effect = effect
