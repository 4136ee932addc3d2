"""`python -m benchmarks`'s options that choose a red trunk: what goes together and what not."""

from pathlib import Path

import pytest

from benchmarks.__main__ import main


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["chaos", "--seed", "101"], "--seed are for redtrunk only"),
        (["redtrunk", "--replay", "r.jsonl.gz"], "--replay and --truth go together"),
        (["redtrunk", "--truth", "r.truth.json.gz"], "--replay and --truth go together"),
        (
            ["redtrunk", "--seed", "1", "--replay", "r.jsonl.gz", "--truth", "r.truth.json.gz"],
            "give one of them",
        ),
        (["redtrunk", "--replay", "nowhere.jsonl.gz", "--truth", "nowhere.truth.json.gz"], "no file at"),
    ],
)
def test_redtrunk_options_that_do_not_go_together_are_refused(
    argv: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert error in capsys.readouterr().err
    assert not (tmp_path / "summary.json").exists()
