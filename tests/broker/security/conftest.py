"""Puts this folder on sys.path (the suite runs with --import-mode=importlib), for security_helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
