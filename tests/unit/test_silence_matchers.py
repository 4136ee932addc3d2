"""Label matchers: Alertmanager's four operators, RE2 anchoring, and amtool's filter syntax."""

from __future__ import annotations

import pytest

from trunkwatch.silences import Matcher, SilenceError, parse_matcher
from trunkwatch.silences.matchers import MAX_VALUE_LENGTH

JOB = {
    "alertname": "TrunkJobFailing",
    "job": "pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)",
}


@pytest.mark.parametrize(
    ("matcher", "expected"),
    [
        (Matcher("alertname", "TrunkJobFailing"), True),
        (Matcher("alertname", "TrunkBroken"), False),
        (Matcher("alertname", "TrunkBroken", is_equal=False), True),
        (Matcher("alertname", "TrunkJobFailing", is_equal=False), False),
        (Matcher("job", "pull / .*", is_regex=True), True),
        (Matcher("job", "trunk / .*", is_regex=True), False),
        (Matcher("job", "trunk / .*", is_regex=True, is_equal=False), True),
        (Matcher("job", "pull / .*", is_regex=True, is_equal=False), False),
    ],
)
def test_operators(matcher: Matcher, expected: bool) -> None:
    assert matcher.matches(JOB) is expected


def test_regex_is_anchored_at_both_ends() -> None:
    assert not Matcher("job", "pull", is_regex=True).matches(JOB)
    assert not Matcher("job", "linux.2xlarge\\)", is_regex=True).matches(JOB)
    assert Matcher("job", ".*linux.2xlarge\\)", is_regex=True).matches(JOB)


def test_unbalanced_pattern_cannot_escape_the_anchors() -> None:
    # Wrapped as ^(?:a)|(b)$ it would compile and match far more than intended.
    with pytest.raises(SilenceError, match="invalid regular expression"):
        Matcher("job", "a)|(b", is_regex=True)


def test_end_anchor_does_not_accept_a_trailing_newline() -> None:
    assert not Matcher("job", "x", is_regex=True).matches({"job": "x\n"})


def test_missing_label_is_the_empty_value() -> None:
    assert Matcher("team", "").matches(JOB)
    assert Matcher("team", ".*", is_regex=True).matches(JOB)
    assert not Matcher("team", "ci-oncall").matches(JOB)
    assert Matcher("team", "ci-oncall", is_equal=False).matches(JOB)


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    # Exponential for a backtracking engine on this input; RE2 answers at once.
    matcher = Matcher("job", "(a+)+$", is_regex=True)
    assert not matcher.matches({"job": "a" * 100_000 + "!"})
    assert matcher.matches({"job": "a" * 100_000})


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a)\\1", "invalid escape"),
        ("(?=a)", "invalid perl operator"),
        ("[", "missing ]"),
        ("a{1001}", "invalid repetition size"),
    ],
)
def test_patterns_re2_refuses(pattern: str, reason: str) -> None:
    with pytest.raises(SilenceError, match=f"invalid regular expression.*{reason}"):
        Matcher("job", pattern, is_regex=True)


def test_overlong_regex_is_refused() -> None:
    with pytest.raises(SilenceError, match="longer than"):
        Matcher("job", "a" * (MAX_VALUE_LENGTH + 1), is_regex=True)


@pytest.mark.parametrize("name", ["", "1job", "job-name", "jöb", "a b"])
def test_invalid_label_names(name: str) -> None:
    with pytest.raises(SilenceError, match="label name"):
        Matcher(name, "x")


def test_value_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(SilenceError, match="not valid UTF-8"):
        Matcher("job", "\ud800")


@pytest.mark.parametrize(
    ("matcher", "universal"),
    [
        (Matcher("alertname", ".+", is_regex=True), True),
        (Matcher("alertname", ".*", is_regex=True), True),
        (Matcher("alertname", "", is_equal=False), True),
        (Matcher("alertname", "", is_regex=True, is_equal=False), True),
        (Matcher("alertname", "Trunk.*", is_regex=True), False),
        (Matcher("alertname", "TrunkBroken", is_equal=False), False),
        (Matcher("alertname", "TrunkBroken", is_regex=True, is_equal=False), False),
        # `job` is absent on trunk-level alerts, so `.+` leaves those out.
        (Matcher("job", ".+", is_regex=True), False),
        (Matcher("job", ".*", is_regex=True), True),
        (Matcher("job", "", is_equal=False), False),
        # An equality always leaves some value out.
        (Matcher("nosuch", ""), False),
        (Matcher("nosuch", ".*", is_regex=True), True),
    ],
)
def test_matches_any_value(matcher: Matcher, universal: bool) -> None:
    assert matcher.matches_any_value() is universal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('job=~"pull / .*"', Matcher("job", "pull / .*", is_regex=True)),
        ("alertname=TrunkBroken", Matcher("alertname", "TrunkBroken")),
        ('team!="ci-oncall"', Matcher("team", "ci-oncall", is_equal=False)),
        ('job!~"trunk.*"', Matcher("job", "trunk.*", is_regex=True, is_equal=False)),
        ('  repo = "pytorch/pytorch" ', Matcher("repo", "pytorch/pytorch")),
        ('job="say \\"hi\\""', Matcher("job", 'say "hi"')),
        ('job=""', Matcher("job", "")),
    ],
)
def test_parse_matcher(text: str, expected: Matcher) -> None:
    assert parse_matcher(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("TrunkBroken", "expected name, one of"),
        ('job=~"[" ', "invalid regular expression"),
        ('job="unterminated', "expected name"),
        ('job="a" "b"', "bad quoted value"),
    ],
)
def test_parse_matcher_errors(text: str, message: str) -> None:
    with pytest.raises(SilenceError, match=message):
        parse_matcher(text)
