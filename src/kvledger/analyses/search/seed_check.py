"""``search --seeds N``: the winner and the runner-up re-checked per seed.

A search ranks every candidate on one seeded draw (every probe the same requests). Re-running the whole search per
seed would multiply its cost by N; what the draw can change about the answer is whether the winner stays ahead of the
runner-up (``RankingMargin`` is their gap on the first seed). So the two are each evaluated again
(``evaluate.evaluate_candidate``: the same capacity search, cost and sizing, one ledger) with seeds
``--seed`` + 1 … + N − 1, only the seed changed, one after the other: 2 (N − 1) capacity searches. The rest of the
ranking stays the first seed's. Per seed: each one's SLO capacity, goodput, USD per 1M output tokens, the rank value
(``order.first_cost``: the monthly bill, or USD per 1,000 good requests), and whether the winner is still first (a
candidate with no capacity at a seed ranks last there). A workload that draws nothing from the seed (a trace at its own
arrival times) is not re-run: the first seed stands for every seed (``seed_spread.seed_used``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from kvledger.analyses.search.order import first_cost, ranked
from kvledger.analyses.serving.seed_spread import seed_range_text, seed_used, value_spread

__all__ = ["SeedCheck", "seed_check", "attach_seed_check"]

_FIGURES = ("goodput_req_per_s", "usd_per_mtok_output", "rank_value")


def _figures(e: dict[str, Any]) -> dict[str, Any]:
    """One candidate at one seed: its id, status and (feasible) capacity, goodput, $ per 1M output, rank value."""
    if e["status"] != "feasible":
        return {"id": e["id"], "status": e["status"], "slo_capacity_req_per_s": None, "goodput_req_per_s": None,
                "usd_per_mtok_output": None, "rank_value": None}
    return {"id": e["id"], "status": "feasible", "slo_capacity_req_per_s": e["capacity"]["slo_capacity_req_per_s"],
            "goodput_req_per_s": e["capacity"]["goodput_req_per_s"],
            "usd_per_mtok_output": e["cost"]["usd_per_mtok_output"], "rank_value": first_cost(e)}


def _first(entries: list[dict[str, Any]]) -> bool:
    """The winner ranks before the runner-up at this seed (an infeasible one ranks last)."""
    if len(entries) < 2 or entries[1]["status"] != "feasible":
        return entries[0]["status"] == "feasible" or len(entries) < 2
    if entries[0]["status"] != "feasible":
        return False
    a, b = entries[0], entries[1]
    if first_cost(a) != first_cost(b):
        return first_cost(a) < first_cost(b)
    return ranked([a, b], {a["id"]: 0, b["id"]: 1})[0] is a  # a tie: the ranking's next figures (their tie: the winner)


@dataclass(frozen=True)
class SeedCheck:
    """Per seed: the winner's and the runner-up's figures and whether the winner stays first (module doc); their
    min–max over the seeds; the note when the winner loses its place at a seed (None when it holds)."""

    seeds: list[int]
    per_seed: list[dict[str, Any]]
    winner: dict[str, dict[str, Any]]
    runner_up: dict[str, dict[str, Any]] | None
    holds: bool
    seed_free: bool
    note: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"seeds": self.seeds, "seed_free": self.seed_free, "winner_holds": self.holds, "winner": self.winner,
                "runner_up": self.runner_up, "per_seed": self.per_seed, "note": self.note}

    def text(self) -> str:
        """One line: the winner's and runner-up's range over the seeds and whether the winner held."""
        label = seed_range_text(self.seeds)
        if self.seed_free:
            return f"seed check over {label}: the same — the workload draws nothing from the seed"
        w = self.per_seed[0]["winner"]["id"]
        out = f"seed check over {label} (re-searched per seed): winner {w} " + _range(self.winner)
        if self.runner_up is not None:
            out += f"; runner-up {self.per_seed[0]['runner_up']['id']} " + _range(self.runner_up)
        return out + ("; the winner is first at every seed" if self.holds else f"; {self.note}")


def _range(m: dict[str, dict[str, Any]]) -> str:
    g, u = m["goodput_req_per_s"], m["usd_per_mtok_output"]
    if g["min"] is None:
        return "no SLO capacity at any seed"
    return f"{g['min']:,.2f}–{g['max']:,.2f} good req/s, ${u['min']:.3f}–${u['max']:.3f} per 1M output tokens"


def seed_check(spec: Any, ranked: list[dict[str, Any]], seeds: list[int]) -> SeedCheck | None:
    """The winner (``ranked[0]``) and the runner-up (``ranked[1]``, if any) re-evaluated per seed (module doc); None
    when nothing is feasible. ``ranked``: the feasible entries in rank order; ``seeds``: the first is ``spec.seed``."""
    from kvledger.analyses.search.evaluate import evaluate_candidate

    if not ranked:
        return None
    top = ranked[:2]
    probe = SimpleNamespace(concurrency=None, trace=spec.trace, rate=1.0)  # a rate probe draws as any rate's does
    drawn = seed_used(probe, spec.synthetic, hasattr(spec.synthetic, "prepare_setup"))
    rows = []
    for seed in seeds:
        got = top if seed == seeds[0] or not drawn else \
            [evaluate_candidate(replace(spec, seed=seed), e) for e in top]
        row = {"seed": seed, "winner": _figures(got[0]), "runner_up": _figures(got[1]) if len(got) > 1 else None,
               "winner_first": _first(got)}
        rows.append(row)
    spreads = {role: {k: value_spread([r[role][k] for r in rows]) for k in _FIGURES}
               for role in ("winner", "runner_up") if rows[0][role] is not None}
    lost = [r["seed"] for r in rows if not r["winner_first"]]
    note = None
    if lost:
        note = (f"the winner is NOT first at seed {', '.join(map(str, lost))} of {seed_range_text(seeds)}: the "
                f"runner-up {top[1]['id']} ranks before it there, so the choice between the two depends on the seeded "
                "draw of arrivals (and lengths); more requests per probe (--num-requests) narrow the draw")
    return SeedCheck(list(seeds), rows, spreads["winner"], spreads.get("runner_up"), not lost, not drawn, note)


def attach_seed_check(result: Any, seeds: int) -> None:
    """``search --seeds N`` (N > 1): ``result.seed_check`` (its JSON ``seed_check``) and its line in the notes."""
    from kvledger.analyses.serving.seed_spread import seed_list

    check = seed_check(result.spec, [result.entry(c) for c in result.ranking], seed_list(result.spec.seed, seeds))
    result.seed_check = check
    if check is not None:
        result.notes.append(check.text())
