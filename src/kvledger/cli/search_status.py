"""How ``kvledger search`` ends after its output: the status its answer has (a failed candidate, every candidate an
invalid setting, none that can start) and what it says on stderr for it."""

from __future__ import annotations

from typing import Any

import typer

from kvledger.analyses.search.search_run import answer_status  # the status itself: the run path's

__all__ = ["PlainProgress", "answer_status", "exit_with", "no_plot", "say_failure", "say_status", "say_start"]


def say_start(spec: Any, planned: int, to_simulate: int) -> None:
    """Say on stderr, before the simulations, how many candidates will be simulated and what each one costs: a
    capacity search of one simulation per probed rate, then the operating points (``analyses.search.capacity``), so a
    search of minutes is not silent until its first candidate ends. Counts and sizes only, never a time: the line is
    the same on every machine. Nothing when nothing is left to simulate."""
    if to_simulate <= 0:
        return
    from kvledger.analyses.search.capacity import LOAD_FRACTIONS
    from kvledger.analyses.serving.session_spec import SessionSpec

    s = spec.synthetic
    each = (f"≥ {s.num_sessions:,} {s.workload} sessions" if isinstance(s, SessionSpec) else
            f"{spec.num_requests:,} requests")
    rest = planned - to_simulate
    typer.echo(f"search: {to_simulate:,} of {planned:,} candidate{'' if planned == 1 else 's'} to simulate"
               + (f" (the other {rest:,} settled by their plan or bounds)" if rest else "")
               + f"; each a capacity search: one simulation of {each} per probed rate (doubling to a bracket, then "
               f"bisecting to 1 %), then {len(LOAD_FRACTIONS)} operating points at "
               f"{'/'.join(f'{f:.0%}'.rstrip('%') for f in LOAD_FRACTIONS)} % of the capacity found", err=True)


def say_status(result: Any, status: int, as_json: bool = False) -> None:
    """Name on stderr the failed candidates (``status`` 1, with the remedy), the invalid setting (2) or, under --json,
    why no candidate meets the SLO (1 without a failed one; the text's headline says it on stdout). Said before the
    output is written: a reader that stops reading (``| head -1``) ends the process at the first write it refuses, and
    the line said after it was lost (a fresh-user trial); the status itself is kept (``broken_pipe.will_end_with``)."""
    failed = [e for e in result.entries if e["status"] == "error"]
    if status == 1 and not failed:
        if as_json:
            from kvledger.report.search_answer import no_winner_line

            typer.echo(f"error: {no_winner_line(result, 'the JSON output')}", err=True)
    elif status == 1:
        from kvledger.report.search_answer import failures_line

        typer.echo(failures_line(failed), err=True)
    elif status == 2:
        first = result.entries[0]
        typer.echo(f"error: every candidate was refused as an invalid setting (e.g. {first['id']}: "
                   f"{first.get('detail', '')}); change the flags that every candidate shares.", err=True)


def say_failure(entry: dict[str, Any], console: Any) -> None:
    """Say on stderr (``console``, the progress bar's) the candidate ``entry`` that just failed, with why, in one line
    (``report.search_answer.failure_line``): said when it is known, so a run that a dying Ray node ends before its
    output still names it."""
    if entry["status"] == "error":
        from kvledger.report.search_answer import failure_line

        console.print(failure_line(entry), markup=False, highlight=False, soft_wrap=True, emoji=False)


class PlainProgress:
    """Progress as plain lines on stderr where the bar cannot draw (stderr not a terminal: a CI log, ``nohup``,
    ``2> file``): one line when a candidate completes at least ``every_s`` seconds after the last line, so a search of
    many minutes is not silent until its answer, and a short one says nothing. Wall-clock time decides only when a
    line is said, never what the search computes."""

    def __init__(self, enabled: bool, every_s: float = 30.0) -> None:
        import time

        self._enabled, self._every_s, self._clock = enabled, every_s, time.monotonic
        self._start = self._last = self._clock()

    def update(self, done: int, total: int, status: str) -> None:
        """Say ``done``/``total`` candidates and ``status`` when due."""
        now = self._clock()
        if self._enabled and now - self._last >= self._every_s:
            self._last = now
            typer.echo(f"search: {done:,}/{total:,} candidates evaluated, {status} ({now - self._start:.0f} s)",
                       err=True)


def no_plot(path: Any, status: int) -> None:
    """Say on stderr that --plot ``path`` was not written, and why: the figure draws the ranking, and there is none
    (a fresh-user trial got exit 0 and no file, without a word)."""
    why = {1: "no candidate meets the SLO or could be evaluated",
           2: "every candidate was refused as an invalid setting",
           3: "no candidate can start (every one rejected for memory)"}.get(status, "no candidate meets the SLO")
    typer.echo(f"note: --plot {path} not written: {why}, so there is no ranking or frontier to draw.", err=True)


def exit_with(status: int) -> None:
    """End with ``status`` (``answer_status``) after the output (its line said before it, ``say_status``)."""
    if status:
        raise typer.Exit(status)
