"""Where things are, whichever folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/: its data folders (scenarios, fixtures...)
ROOT = TESTS.parent  # the checkout
