"""Label matchers (`=`, `!=`, `=~`, `!~`) with Alertmanager's semantics.

Regexes are RE2 (linear time, no catastrophic backtracking), fully anchored as
`^(?:pattern)$` like Alertmanager's, and compiled once per matcher. Python's `re` never
runs a user-supplied pattern. RE2 itself loads with the first matcher (a notifier tick
without silences or receiver matchers never needs it).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

MAX_NAME_LENGTH = 128
MAX_VALUE_LENGTH = 1024
# Label names as Alertmanager's classic parser (and amtool 0.25) accepts them.
_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
# `name op value` as amtool and Alertmanager's `filter` parameter write it; the value is
# either a double-quoted string with escapes or the bare rest of the text.
_MATCHER_TEXT = r'(?s)\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(".*"|[^"]*?)\s*'

# Labels every alert carries with a non-empty value (design.md §3.4); other labels may be absent,
# which a matcher sees as the empty value.
ALWAYS_PRESENT_LABELS = frozenset({"alertname", "repo", "branch", "priority", "team"})
# Values of many shapes: a regex matching every one of them is taken to match any value.
_PROBE_VALUES = (
    "a",
    "Z",
    "0",
    " ",
    "-",
    "/",
    "_",
    ".",
    "~",
    "é",
    "日本",
    "TrunkJobFailing",
    "pytorch/pytorch",
    "P1",
    "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
)


class SilenceError(ValueError):
    """A silence or matcher the API refuses; the message says what is wrong."""


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise SilenceError(f"{what} must be a string")
    if len(value) > limit:
        raise SilenceError(f"{what} is longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SilenceError(f"{what} is not valid UTF-8") from None
    return value


@functools.cache
def _re2() -> tuple[Any, Any]:
    """The re2 module and the options every pattern is compiled with."""
    import re2

    options = re2.Options()
    options.log_errors = False
    return re2, options


@functools.cache
def _own(pattern: str) -> Any:
    """One of this module's own patterns, compiled once."""
    re2, options = _re2()
    return re2.compile(pattern, options=options)


def compile_regex(pattern: str, what: str = "regex") -> Any:
    """The RE2 program for `pattern` anchored at both ends, or a SilenceError."""
    _text(pattern, what, MAX_VALUE_LENGTH)
    re2, options = _re2()
    try:
        # Alone first: `a)|(b` is invalid, yet valid once wrapped in `^(?:...)$`.
        re2.compile(pattern, options=options)
        return re2.compile(f"^(?:{pattern})$", options=options)
    except re2.error as err:
        reason = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else err
        raise SilenceError(f"invalid regular expression {pattern!r}: {reason}") from None


@dataclass(frozen=True)
class Matcher:
    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True
    _regex: Any = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        _text(self.name, "matcher name", MAX_NAME_LENGTH)
        if not _own(_LABEL_NAME).fullmatch(self.name):
            raise SilenceError(f"invalid label name {self.name!r} (use letters, digits and _)")
        _text(self.value, f"value of matcher {self.name!r}", MAX_VALUE_LENGTH)
        if self.is_regex:
            object.__setattr__(self, "_regex", compile_regex(self.value, f"regex of matcher {self.name!r}"))

    def matches_value(self, value: str) -> bool:
        hit = self._regex.search(value) is not None if self.is_regex else value == self.value
        return hit == self.is_equal

    def matches(self, labels: dict[str, str]) -> bool:
        """A missing label has the empty value, as in Alertmanager."""
        return self.matches_value(labels.get(self.name, ""))

    def matches_empty(self) -> bool:
        return self.matches_value("")

    def matches_any_value(self) -> bool:
        """True when no label value, present or absent, can escape this matcher."""
        if self.name not in ALWAYS_PRESENT_LABELS and not self.matches_empty():
            return False
        if self.is_equal:
            if not self.is_regex:
                return False
            return all(self.matches_value(probe) for probe in _PROBE_VALUES)
        # A negative matcher lets every value through only when its pattern can match
        # nothing but the empty string (`!=""`, `!~""`); RE2 bounds what a pattern can match.
        if not self.is_regex:
            return self.value == ""
        bounds = self._regex.possiblematchrange(8)
        return bool(bounds) and bounds[1] == b""

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "isRegex": self.is_regex, "isEqual": self.is_equal}


def parse_matcher(text: str) -> Matcher:
    """`job=~"pull / .*"`, `alertname=TrunkBroken`, `team!="x"` (amtool's filter syntax)."""
    _text(text, "filter", MAX_NAME_LENGTH + MAX_VALUE_LENGTH + 8)
    found = _own(_MATCHER_TEXT).fullmatch(text)
    if not found:
        raise SilenceError(f"invalid matcher {text!r}: expected name, one of = != =~ !~, and a value")
    name, operator, raw = found.groups()
    value = raw
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            raise SilenceError(f"invalid matcher {text!r}: bad quoted value") from None
    return Matcher(name=name, value=value, is_regex="~" in operator, is_equal=operator[0] == "=")


def parse_matchers(texts: list[str]) -> list[Matcher]:
    return [parse_matcher(text) for text in texts]
