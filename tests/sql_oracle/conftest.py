"""Lets the SQL oracle's tests import their helper modules (importlib import mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
