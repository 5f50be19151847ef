"""``kvledger search --show-command``: the launch commands of one candidate, named by its id or its short name in the
table (planned, not simulated), or by its rank number in the table (after the search has run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from kvledger import strict_json

if TYPE_CHECKING:
    from kvledger.analyses.search.launch import CandidateCommands

__all__ = ["rank_of", "show_command_of", "show_ranked"]


def rank_of(text: str | None) -> int | None:
    """``--show-command 3`` (or ``3*``, as a frontier row is marked): the rank number in the table; None for a name."""
    word = (text or "").strip().rstrip("*")
    return int(word) if word.isdigit() else None


def show_command_of(spec: Any, axes: Any, text: str, as_json: bool) -> None:
    """The launch commands of the candidate ``text`` names: an id as given, on one of the GPUs searched, else a name of
    one of the axes' candidates (the error lists the valid choices); a tier variant's id or name (``…:offload-cpu-
    256GiB``, ``… + cpu:256GiB``) is its base candidate's commands with the tier's flags.

    Raises:
        InputError: an id on a GPU the search does not cover (a fresh-user trial got the commands of an A100 from a
            search of L4 and H100), or a name of no candidate.
    """
    from kvledger.analyses.search.launch import candidate_commands
    from kvledger.analyses.search.naming import parse_candidate_id, resolve_candidate
    from kvledger.analyses.search.offload_axis import split_variant
    from kvledger.analyses.search.runner import plan_candidates
    from kvledger.catalog.given_prices import gpu_key
    from kvledger.errors import InputError

    base, tier = split_variant(text)  # a tier variant: its base candidate, the tier added to its commands
    try:
        cand = parse_candidate_id(base)
    except InputError:
        cand = resolve_candidate(base, plan_candidates(spec, axes))
    searched = _searched_gpus(spec, axes)
    gpu = gpu_key(cand.gpu_id)  # an id may name its GPU by any of its names (H100)
    if gpu not in searched:
        which = "the GPUs searched" if axes.gpus else "the GPUs searched, without --gpus every one with a rental row"
        raise InputError(f"--show-command {text}: its GPU, {gpu}, is not one this search covers ({which}: "
                         f"{', '.join(searched)}); give a candidate on one of them, or add {cand.gpu_id} to --gpus")
    c = candidate_commands(spec, cand.id)
    if tier is not None:
        from dataclasses import replace

        from kvledger.analyses.search.tier_entries import tier_launch, variant_id

        c = replace(c, id=variant_id(c.id, tier), launch=tier_launch(c.launch, tier, cand.tp))
    _print_launch(c, as_json)


def _searched_gpus(spec: Any, axes: Any) -> list[str]:
    """The GPUs the search covers, as its candidates key them (``spec.make_candidates``), in its order: --gpus, or
    every GPU with a rental row (of --gpu-provider)."""
    from kvledger.analyses.search.spec import default_gpus
    from kvledger.catalog.given_prices import gpu_key

    return list(dict.fromkeys(gpu_key(g) for g in axes.gpus)) if axes.gpus else default_gpus(spec.gpu_provider)


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
        typer.echo(strict_json.dumps(to_jsonable(c)))
    else:
        print_launch(Console(highlight=False, emoji=False), c.id, c.launch, "launch commands")
