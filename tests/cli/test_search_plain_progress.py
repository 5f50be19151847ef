"""``search``'s progress where stderr is not a terminal: plain lines, at most one per interval, said on stderr."""

from __future__ import annotations

from kvledger.cli.search_status import PlainProgress


def test_plain_progress_says_a_line_only_when_due(capsys):
    p = PlainProgress(enabled=True, every_s=30.0)
    ticks = iter([10.0, 35.0, 50.0, 70.0])  # seconds after the start at 0: due at 35 (≥ 30) and 70 (35 + 35 ≥ 30)
    p._start = p._last = 0.0
    p._clock = lambda: next(ticks)
    for done in (1, 2, 3, 4):
        p.update(done, 4, f"{done} feasible; best x")
    err = capsys.readouterr().err.splitlines()
    assert err == ["search: 2/4 candidates evaluated, 2 feasible; best x (35 s)",
                   "search: 4/4 candidates evaluated, 4 feasible; best x (70 s)"]


def test_plain_progress_off_on_a_terminal(capsys):
    p = PlainProgress(enabled=False, every_s=0.0)
    p.update(1, 1, "1 feasible; best x")
    assert capsys.readouterr().err == ""


class _Seen(Exception):
    """Raised by the stand-in progress: the search stops where its progress is made."""


def test_progress_lines_under_json_go_to_stderr(monkeypatch):
    # a DP grid under --json ran for over half an hour with no output (a fresh-user trial): the plain lines are on
    # under --json too, on stderr (the bar does not draw there), as without it where stderr is not a terminal (as
    # under CliRunner); the document on stdout is untouched (tests/cli/test_search_unit_cap_cli.py)
    from typer.testing import CliRunner

    import kvledger.cli.search_run as search_run
    from kvledger.cli.main import app

    seen = []

    def stand_in(enabled: bool, every_s: float = 30.0):
        seen.append(enabled)
        raise _Seen

    monkeypatch.setattr(search_run, "PlainProgress", stand_in)
    argv = ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1",
            "--rate", "30"]
    for extra in (["--json"], []):
        res = CliRunner().invoke(app, [*argv, *extra])
        assert isinstance(res.exception, _Seen), res.output
    assert seen == [True, True]
