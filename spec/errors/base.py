"""The root of tidegate's error hierarchy."""

from __future__ import annotations

__all__ = ["InvalidId", "TidegateError", "UnhandledEffect"]


class TidegateError(Exception):
    """Base class of every error tidegate raises on purpose."""


class InvalidId(TidegateError, ValueError):
    """A malformed identifier (GlobalId text, replica or instance name)."""


class UnhandledEffect(TidegateError, TypeError):
    """A driver was handed an effect it has no handler for: a new effect type missed a driver.

    Every driver raises this rather than dropping the effect, so an effect
    added to the model cannot silently go nowhere.
    """

    def __init__(self, driver: str, effect: object) -> None:
        super().__init__(f"{driver} has no handler for effect {type(effect).__name__}: {effect!r}")
        self.effect = effect
