"""Lets the SQL tests import their shared generators (importlib import mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
