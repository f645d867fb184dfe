"""Lets the replica tests import their helper module ``replica_harness`` (importlib import mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
