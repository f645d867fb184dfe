"""Defaults the command line shares, in a module light enough to import at start-up."""

from __future__ import annotations

import os

__all__ = ["DATA_DIR_ENV", "DEFAULT_DATA_DIR", "default_data_dir"]

DATA_DIR_ENV = "TIDEGATE_DATA_DIR"
"""The environment variable naming the CLI's default data directory."""
DEFAULT_DATA_DIR = "./tidegate-data"
"""The CLI's data directory when neither ``--data-dir`` nor ``TIDEGATE_DATA_DIR`` names one."""


def default_data_dir() -> str:
    """``$TIDEGATE_DATA_DIR`` if set (and not empty), else ``./tidegate-data``: the default
    of every CLI command's ``--data-dir``."""
    return os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
