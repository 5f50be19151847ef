"""``kvledger search --show-command``: the launch commands of one candidate, named by its id or its short name in the
table (planned, not simulated), or by its rank number in the table (after the search has run)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from kvledger.analyses.search.launch import CandidateCommands

__all__ = ["rank_of", "show_command_of", "show_ranked"]


def rank_of(text: str | None) -> int | None:
    """``--show-command 3`` (or ``3*``, as a frontier row is marked): the rank number in the table; None for a name."""
    word = (text or "").strip().rstrip("*")
    return int(word) if word.isdigit() else None


def show_command_of(spec: Any, axes: Any, text: str, as_json: bool) -> None:
    """The launch commands of the candidate ``text`` names: an id as given, else a name of one of the axes' candidates
    (the error lists the valid choices)."""
    from kvledger.analyses.search.launch import candidate_commands
    from kvledger.analyses.search.naming import parse_candidate_id, resolve_candidate
    from kvledger.analyses.search.runner import plan_candidates
    from kvledger.errors import InputError

    try:
        cid = parse_candidate_id(text).id
    except InputError:
        cid = resolve_candidate(text, plan_candidates(spec, axes)).id
    _print_launch(candidate_commands(spec, cid), as_json)


def show_ranked(result: Any, rank: int, as_json: bool) -> None:
    """The launch commands of the candidate ranked ``rank`` (1 = the winner) by the search just run."""
    from kvledger.analyses.search.launch import CandidateCommands
    from kvledger.errors import InputError

    if not 1 <= rank <= len(result.ranking):
        raise InputError(f"--show-command {rank}: the search ranked {len(result.ranking)} feasible candidate(s); give "
                         f"a rank from 1 to {len(result.ranking)}, a candidate id or its name in the table"
                         if result.ranking else f"--show-command {rank}: no candidate is feasible, so none is ranked")
    e = result.entry(result.ranking[rank - 1])
    _print_launch(CandidateCommands.of_entry(e, e["launch"], rank), as_json)


def _print_launch(c: CandidateCommands, as_json: bool) -> None:
    from rich.console import Console

    from kvledger.jsonable import to_jsonable
    from kvledger.report.search_view import print_launch

    if as_json:
        typer.echo(json.dumps(to_jsonable(c), allow_nan=False))
    else:
        print_launch(Console(highlight=False, emoji=False), c.id, c.launch, "launch commands")
