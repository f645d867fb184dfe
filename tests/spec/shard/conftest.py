"""Lets the shard tests import their helper module ``shard_pure_model`` (importlib import mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
