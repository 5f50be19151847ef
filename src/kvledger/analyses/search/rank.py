"""Ranking, Pareto frontier and the search's result object, from the ledger entries (plain dicts) of every candidate.

Rank (``order.ranked``): feasible candidates by the monthly bill for the load when one is given, else by USD per
1,000 good requests at the utilization; ties (the same bill) by USD per million good tokens unless it differs by no
more than the probe's sampling error (``tie_noise``), then by SLO capacity, USD per million good tokens, tokens/s per
user and candidate order; the winner's ``tie_break`` says which decided and why the earlier figure did not.
Frontier: good output tokens/s per GPU against tokens/s per user (1 ÷ median TPOT) over every candidate's
operating points — its SLO capacity and lighter loads (``capacity.LOAD_FRACTIONS``) — as the
load falls each user gets faster tokens and each GPU serves fewer. A point is dominated when
another is at least as good on both and better on one; a candidate with no point on the
frontier is listed with the candidate that dominates its point at capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.analyses.search.frontier import RankingMargin, ranking_margin
from kvledger.analyses.search.order import TieBreak, first_cost, rank_key, rank_keys, ranked, tie_break
from kvledger.analyses.search.price_flip import flip_notes
from kvledger.analyses.search.prune import Screening, screening
from kvledger.analyses.search.spec import SearchSpec
from kvledger.analyses.serving.reasoning_note import search_reasoning_note
from kvledger.jsonable import to_jsonable

__all__ = ["BILL_COVERS", "rank_key", "pareto", "SearchResult", "build_result"]


def _dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
    x, y = "tok_per_s_per_user", "output_tok_per_s_per_gpu"
    return a[x] >= b[x] and a[y] >= b[y] and (a[x] > b[x] or a[y] > b[y])


def pareto(feasible: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(frontier, dominated) over every feasible candidate's operating points (its loads up to the SLO capacity).

    frontier: the points no other point dominates, by rising tokens/s per user, each with its candidate ``id`` and
    load. dominated: [{id, dominated_by}] for each candidate with no point on the frontier, naming the candidate of the
    first frontier point that dominates its point at the SLO capacity.
    """
    pts = [{"id": e["id"], **p} for e in feasible for p in (e["capacity"].get("operating_points") or [])]
    front = [p for p in pts if not any(_dominates(q, p) for q in pts)]
    front.sort(key=lambda p: (p["tok_per_s_per_user"], p["output_tok_per_s_per_gpu"], p["id"]))
    on = {p["id"] for p in front}
    dominated = []
    for e in feasible:
        mine = [p for p in pts if p["id"] == e["id"]]
        if e["id"] in on or not mine:
            continue
        top = max(mine, key=lambda p: p["rate_req_per_s"])
        by = next((p["id"] for p in front if _dominates(p, top)), front[0]["id"] if front else None)
        dominated.append({"id": e["id"], "dominated_by": by})
    return front, dominated


@dataclass
class SearchResult:
    """Everything ``kvledger search`` prints: the ledger (one entry per candidate, in candidate order), the ranking of
    the
    feasible ones, the frontier, the API comparison and notes. ``to_dict`` is the ``--json`` document."""

    spec: SearchSpec
    entries: list[dict[str, Any]]
    ranking: list[str]
    frontier: list[dict[str, Any]]
    dominated: list[dict[str, str]]
    api: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    cost_frontier: list[dict[str, Any]] = field(default_factory=list)
    cost_dominated: list[dict[str, str]] = field(default_factory=list)
    client_latency: Any = None  # serving.client_latency.ClientLatency added to every TTFT and E2E (None: none given)
    seed_check: Any = None  # search --seeds N: seed_check.SeedCheck, the winner and runner-up per seed (None: one)

    @property
    def winner(self) -> dict[str, Any] | None:
        return self.entry(self.ranking[0]) if self.ranking else None

    def entry(self, cid: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["id"] == cid), None)

    def margin(self) -> RankingMargin | None:
        """The runner-up's cost gap to the winner and whether it lies inside the capacity band (the winner's: the band
        of the regime that priced it, ``search.bands.search_band``)."""
        from kvledger.analyses.search.bands import search_band

        return ranking_margin([self.entry(c) for c in self.ranking[:2]], self.spec.step_cost,
                              band_of=lambda w: search_band(self.spec, w))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries:
            key = e["status"] if e["status"] == "feasible" else (e.get("reason") or e["status"])
            out[key] = out.get(key, 0) + 1
        return out

    def summary(self) -> Winner | None:
        """The winner's id, launch commands, caveats and margin over the runner-up (None when nothing is feasible)."""
        from kvledger.analyses.search.frontier import caveats

        w = self.winner
        if w is None:
            return None
        order = {e["id"]: n for n, e in enumerate(self.entries)}  # entries are in candidate order
        runner = self.entry(self.ranking[1]) if len(self.ranking) > 1 else None
        from kvledger.analyses.search.price_flip import price_flip

        keys = rank_keys([self.entry(c) for c in self.ranking], order)
        return Winner(w["id"], w["launch"], caveats(w), self.margin(), tie_break(w, runner, order, keys),
                      price_flip=price_flip([self.entry(c) for c in self.ranking]))

    def rejections(self) -> list[dict[str, Any]]:
        """[{reason, count, ids}] of the candidates not feasible (``frontier.rejections_by_reason``)."""
        from kvledger.analyses.search.frontier import rejections_by_reason

        return rejections_by_reason(self.entries)

    def screening(self) -> Screening:
        """How the search spent its simulations."""
        return screening(self.entries)

    #: the ``--json`` document
    __json__ = ("spec", "counts", "ranking", ("winner", "summary"), "cost_frontier", "cost_dominated", "rejections",
                "screening", "frontier", "dominated", "api", "client_latency", "seed_check", "notes",
                ("candidates", "entries"))
    __json_optional__ = ("client_latency", "seed_check")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


BILL_COVERS = "GPU rental only (the people line is in cost)"
"""What a search's bills and USD per token count: the GPUs rented, not the people line ``cost`` adds."""


@dataclass(frozen=True)
class Winner:
    """The ranking's first candidate as ``--json`` names it: id, launch commands, what its figures rest on that is
    not validated, the runner-up's cost gap (``SearchResult.margin``) and, when the two cost the same, the figure
    that put it first (``order.tie_break``; None otherwise)."""

    id: str
    launch: Any
    caveats: list[str]
    margin: RankingMargin | None
    tie_break: TieBreak | None = None
    bill_covers: str = BILL_COVERS  # what the winner's monthly bill and $/Mtok price: GPU rental only
    price_flip: Any = None  # price_flip.PriceFlip: the GPU prices at which the winner and its rival tie (None: none)


def build_result(spec: SearchSpec, entries: list[dict[str, Any]]) -> SearchResult:
    """Rank the feasible entries, find the frontier and price the API side; ``entries`` in candidate order."""
    order = {e["id"]: n for n, e in enumerate(entries)}
    feasible = [e for e in entries if e["status"] == "feasible"]
    ranking = [e["id"] for e in ranked(feasible, order)]
    from kvledger.analyses.search.frontier import cost_frontier

    frontier, dominated = pareto(feasible)
    from kvledger.analyses.search.given_price import price_notes

    notes = price_notes(spec, entries)  # the price given, per GPU, or the table's rule
    if spec.wddm:
        notes.append("--wddm: every candidate planned as `kvledger plan --wddm` plans it (the whole board as the "
                     "device total, the display driver's hold in use); each vLLM plan's start-up check is in its "
                     "plan.startup (--json); server-module GPUs are rejected as invalid settings")
    from kvledger.analyses.search.bands import band_notes
    from kvledger.analyses.search.latency import search_latency

    client = search_latency(spec)
    notes += [client.note()] if client is not None else []  # simulate's line: what was added to TTFT/E2E, and whence

    by_id = {e["id"]: e for e in feasible}
    notes += band_notes(spec, [by_id[i] for i in ranking], first_cost) + flip_notes([by_id[i] for i in ranking])
    if any(e["status"] == "error" for e in entries):
        notes.append("some candidates failed (status error): run again with --resume LEDGER to redo only those")
    cfront, cdom = cost_frontier(feasible, order)
    if spec.step_cost == "roofline" and spec.gpu_profile not in (None, "auto", "none"):
        from kvledger.accounting.gpu_profile import load_gpu_profile

        prof = load_gpu_profile(spec.gpu_profile)
        from kvledger.analyses.serving.profile_scope import poor_profile_warning

        said: dict[str, Any] = {}
        poor_profile_warning(prof, said)  # a poor or not-recommended profile: simulate's and cost's warnings
        notes += [f"warning: {w}" for w in said.get("warnings", [])]
        flops = (f"{prof.flops_fraction:.0%} of its measured matmul efficiency" if prof.gemm_efficiency == "measured"
                 else f"{prof.flops_fraction:.0%} of peak FLOP/s")
        notes.append(f"priced by: gpu: {prof.label} for the candidates on {prof.gpu} (roofline at {flops}, "
                     f"{prof.bandwidth_fraction:.0%} of peak bandwidth); any other GPU by its bundled profile, if any, "
                     "else uncalibrated")
    elif spec.step_cost == "roofline":
        notes.append(_default_pricing_note(spec, entries))
    from kvledger.analyses.search.gemm_note import gemm_note, link_note, quantization_note
    notes += [n for n in (quantization_note(spec), gemm_note(spec, entries), link_note(spec, entries),
                          search_reasoning_note(spec, entries)) if n is not None]  # simulate's and cost's note
    from kvledger.analyses.search.api_side import api_side

    api = api_side(spec, feasible)
    if api is None:  # said, in the text and the JSON's notes, rather than a bare null
        notes.append(f"no API comparison: no catalog API row serves {spec.model}; name one with --api PROVIDER:MODEL "
                     "(kvledger prices --kind api lists them)")
    if api is not None and ranking:
        from kvledger.analyses.search.bands import api_bounds, api_within_band

        api["within_band"] = api_within_band(by_id[ranking[0]], api.get("usd_per_month"), bounds=api_bounds(api))
        from kvledger.analyses.search.api_side import with_people

        with_people(api, by_id[ranking[0]])
    return SearchResult(spec, entries, ranking, frontier, dominated, api, notes, cfront, cdom, client)


def _default_pricing_note(spec: Any, entries: list[dict[str, Any]]) -> str:
    """What priced the candidates without a ``--gpu-profile``: each GPU's bundled profile where it has one (the RTX
    PRO 6000 Server Edition's, fitted on its own runs), the uncalibrated roofline elsewhere."""
    from kvledger.analyses.search.bands import search_profile
    from kvledger.catalog.gpu_file import resolve_gpu

    ids = sorted({e["gpu_id"] for e in entries if e.get("status") not in ("rejected", "error") and "gpu_id" in e})
    profiled: dict[str, list[str]] = {}
    for gid in ids:
        if (p := search_profile(spec, gid)) is not None:
            profiled.setdefault(p.label, []).append(resolve_gpu(gid).name)
    if not profiled:
        return "step cost uncalibrated (roofline): every capacity is a model estimate, not a measurement"
    return ("priced by: " + "; ".join(f"gpu: {label} for the candidates on {', '.join(gpus)}"
                                      for label, gpus in profiled.items())
            + " (each GPU's bundled GPU profile); any other GPU uncalibrated (roofline): every capacity is a model "
            "estimate, not a measurement")
