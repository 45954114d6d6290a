"""Make tests/factory.py importable as `factory` from every test module."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
