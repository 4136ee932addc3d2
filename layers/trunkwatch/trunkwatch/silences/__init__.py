"""Silences: label matchers, the silence model and its rules (storage in `silences.store`)."""

from trunkwatch.silences.matchers import Matcher, SilenceError, parse_matcher
from trunkwatch.silences.model import Silence

__all__ = ["Matcher", "Silence", "SilenceError", "parse_matcher"]
