"""The answer lines of ``kvledger search``'s view (``search_view``): the winner with its bill and what it rests on, the
tie that put it before a runner-up of the same cost, why nothing won, the API against the winner, and the lines that
name a candidate that could not be evaluated."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.search.reasons import ENGINE_REFUSES

__all__ = ["engine_words", "winner_line", "capacity_words", "tie_line", "no_winner_line", "api_line", "api_verdict",
           "failure_line", "failures_line"]


def winner_line(result: Any) -> str:
    from kvledger.analyses.search.frontier import capacity_caveats, caveats
    from kvledger.analyses.search.rank import BILL_COVERS

    w = result.winner
    s, cap = w.get("sizing") or {}, w["capacity"]
    if s:
        gpus = f"{s['num_gpus']} GPU{'' if s['num_gpus'] == 1 else 's'}"
        reps = f"{s['replicas']:,} replica{'' if s['replicas'] == 1 else 's'}"
        dp = f"DP {w['data_parallel_size']} × " if w.get("data_parallel_size") else ""  # vLLM's DP ranks
        bill = f"${s['rental_usd_per_month']:,.0f}/month, {BILL_COVERS}, for {gpus} ({reps} × {dp}TP {w['tp']})"
        if "at_band_low" in s:
            bill += " (capacity band: " + ", ".join(
                f"{x['replicas']:,} replica{'' if x['replicas'] == 1 else 's'} ${x['rental_usd_per_month']:,.0f} at "
                f"×{x['capacity_multiplier']:.2f}" for x in (s["at_band_low"], s["at_band_high"]))
            where = (w.get("capacity_band") or {}).get("elsewhere")  # runs on other GPUs only: Band.on_gpu
            bill += f"; {where})" if where else ")"
    else:
        bill = f"${w['cost']['usd_per_1k_requests']:.4f} per 1k good requests, {BILL_COVERS}"
    flags = caveats(w) + _basis(result)
    m = result.margin()
    if m is not None and m.could_flip:
        own = capacity_caveats(result.entry(m.runner_up) or {})  # an unsteady runner-up's capacity is softer still
        flags.append(f"runner-up {m.runner_up} " + ("at the same cost" if m.gap == 0 else f"only {m.gap:.0%} dearer")
                     + f", inside {_bands_words(m)}"
                     + (f" (its own {'; '.join(c.split(' (')[0] for c in own)})" if own else ""))
    return f"winner: {w['id']} — {bill}, {capacity_words(cap)}" + (f" [rests on: {'; '.join(flags)}]" if flags else "")


def _basis(result: Any) -> list[str]:
    """The winner's price flip where its price row is low-confidence, and its matmul pricing where it differs from its
    rival's (``winner_basis``)."""
    from kvledger.analyses.search.price_flip import price_flip
    from kvledger.analyses.search.winner_basis import basis_flags

    ranked = [result.entry(c) for c in result.ranking]
    flip = price_flip(ranked)
    rival = result.entry(flip.against) if flip is not None else (ranked[1] if len(ranked) > 1 else None)
    return basis_flags(result.spec, result.winner, flip, rival)


def _bands_words(m: Any) -> str:
    """The capacity bands the flip was judged on (``frontier.ranking_margin``: the winner's at its low end against the
    runner-up's at its high end): ``their capacity bands, the winner's ×0.82–×1.12 (−18%/+12%) and the runner-up's
    ×0.72–×1.12 (−28%/+12%)``; one clause where the two are the same, or the runner-up has none of its own (read
    against the winner's); ``the ±30% capacity band`` where no band of the winner's stands (an assumption)."""
    from kvledger.ledgers.decision_notes import band_sides_text

    def one(lo: float, hi: float) -> str:
        return f"×{lo:.2f}–×{hi:.2f} ({band_sides_text(lo, hi)})"

    if m.band_low is None:
        return f"the ±{m.band:.0%} capacity band"
    if m.runner_band_low is None:
        return (f"the winner's capacity band {one(m.band_low, m.band_high)}, the runner-up read against it (none of "
                "its own)")
    if (round(m.runner_band_low, 2), round(m.runner_band_high, 2)) == (round(m.band_low, 2), round(m.band_high, 2)):
        return f"their capacity bands, {one(m.band_low, m.band_high)} each"
    return (f"their capacity bands, the winner's {one(m.band_low, m.band_high)} and the runner-up's "
            f"{one(m.runner_band_low, m.runner_band_high)}")


def capacity_words(cap: dict[str, Any]) -> str:
    """``SLO capacity 18 req/s per replica (17.46 good req/s there)``: the capacity found and the good req/s sustained
    at it; where the capacity bound caps it, then ``, sized on 17.08 req/s, the capacity bound`` (cost's words,
    ``work_bounds.bound_clause``): what the replicas and the bill are sized on; then the band of the capacity sized on
    (``_band_words``)."""
    from kvledger.analyses.serving.work_bounds import bound_clause

    sized = cap.get("sized_on_req_per_s")
    # a ledger written before the key existed (resumed) has none: its good req/s at the bound instead
    good = cap.get("sustained_good_req_per_s_at_boundary") if sized is not None else None
    good = good if good is not None else cap.get("sustained_good_req_per_s", cap["goodput_req_per_s"])  # older name
    return (f"SLO capacity {_at_least(cap)}{cap['slo_capacity_req_per_s']:,.4g} req/s per replica ({good:,.2f} "
            f"good req/s there){_limit_words(cap.get('sessions_limit'))}"
            + (f", {bound_clause(sized)}" if sized is not None else "") + _band_words(cap.get("error_band")))


def _at_least(cap: dict[str, Any]) -> str:
    return "at least " if cap.get("sessions_limit") else ""


def _limit_words(limit: dict[str, Any] | None) -> str:
    """``, limited by --sessions 60 (199 carry 9.75 req/s, the lowest rate they did not)``: a session search whose
    probes above the capacity were not carried by their sessions (``session_ramp.sessions_limit``); "" else."""
    if not limit:
        return ""
    given = "the sessions per probe" if limit["sessions"] is None else f"--sessions {limit['sessions']:,}"
    r = limit["not_carried_req_per_s"][0]
    return (f", limited by {given}, not the engine ({limit['sessions_needed']:,} sessions carry {r:.4g} req/s, the "
            "lowest rate that met the SLO without being carried)")


def _band_words(b: dict[str, Any] | None) -> str:
    """``, 80% band 9.977–14.93 req/s``: the capacity's band, its ends as ``goodput --simulate
    --target`` and ``cost --simulate`` print them (``capacity_bands.capacity_band``: the same band; a KV tier's
    variant's, ``tier_band``'s; a disaggregated unit's, ``disagg_band``); "" without one (a regime without
    a band, a ledger written before the key)."""
    if not b:
        return ""
    from kvledger.units import fmt_plain

    return f", 80% band {fmt_plain(b['low'])}–{fmt_plain(b['high'])} req/s"  # the regime: the pricing note's


_TIE_FIGURES = {"USD per Mtok of good tokens": ("$", ".4f", " (input and output; the lower first)"),
                "SLO capacity": ("", ",.4g", " (the more headroom first)"),
                "tokens/s per user": ("", ",.1f", " (the faster first)"), "candidate order": ("#", ".0f", "")}


def tie_line(result: Any) -> str | None:
    """What put the winner before a runner-up of the same cost (``order.tie_break``), and why the figures before it
    did not; None without a tie."""
    t = result.summary().tie_break
    if t is None:
        return None
    unit, fmt, how = _TIE_FIGURES[t.by]
    tied = f"${t.tied_value:,.2f}/month" if t.tied_on == "monthly bill" else f"${t.tied_value:.4f} per 1k good requests"
    values = f"{unit}{t.winner_value:{fmt}} against {unit}{t.runner_up_value:{fmt}}"
    if t.by == "SLO capacity":
        values = (f"{values} req/s" + (f" for the {t.load_req_per_s:,.4g} req/s load (replicas × the req/s each is "
                                       "sized on)" if t.load_req_per_s is not None else " per GPU"))
    return (f"tie: the winner and the runner-up {t.runner_up} have the same {t.tied_on} ({tied}){_price_words(t)}; "
            f"broken by {t.by}{how}: {values}")


def _price_words(t: Any) -> str:
    """Why USD per Mtok of good tokens did not decide, where it was not the figure that did: the same, or a
    difference within the probe's sampling error (``tie_noise``)."""
    if t.by == "USD per Mtok of good tokens" and t.price_within_noise is None:
        return ""
    n = t.price_within_noise
    if n is None:
        return " and the same USD per Mtok of good tokens"
    from kvledger.analyses.search.tie_noise import Z_TIED

    counts = " against ".join(f"{g:,}/{r:,}" for g, r in zip(n.good, n.requests))
    return (f" and USD per Mtok of good tokens within sampling error (requests within the SLO at the load, {counts}: "
            f"{n.difference:.2%} apart, within {Z_TIED:g} binomial standard errors, {n.limit:.2%})")


_MEMORY_FIXES = {"max_model_len": "lower --max-model-len (each rejection says how far), FP8 KV/weights or more TP",
                 ENGINE_REFUSES: "a GPU or engine release that starts this setting (each rejection names what the "
                                 "engine refuses there and why: a compute capability, a KV cache dtype, a release)"}


def no_winner_line(result: Any, reasons_at: str = "the reasons below") -> str:
    """Why nothing won, from the rejections: a search whose candidates were all refused by memory names that and its
    fix, not the SLO (fresh-user trial: max_model_len rejections were reported as an SLO miss); ``reasons_at``: where
    the reader finds each candidate's reason (the table's lines below it, or the JSON's keys)."""
    from kvledger.analyses.search.frontier import none_can_start, rejections_by_reason
    from kvledger.analyses.search.reasons import ITL_UNREACHABLE, NOISE_ADVICE, SLO_REASONS, SLO_WITHIN_NOISE
    from kvledger.analyses.search.refusals import refused_everywhere

    rej = [e for e in result.entries if e["status"] not in ("feasible", "bounded")]
    groups = rejections_by_reason(rej)
    if none_can_start(result.entries):
        from kvledger.report.search_multinode import multinode_words, no_fit_words

        fixes = {**_MEMORY_FIXES, "does not fit": no_fit_words(rej)}  # which term overflows, with the numbers
        return ("no candidate can start: " + "; ".join(f"{g['count']} rejected for {g['reason']}" for g in groups)
                + " (" + "; ".join(fixes[g["reason"]] for g in groups) + ")" + multinode_words(rej))
    if rej and not any(g["reason"] in SLO_REASONS for g in groups):  # none was even held to the SLO
        first = {g["reason"]: next(e for e in rej if (e.get("reason") or e["status"]) == g["reason"]) for g in groups}
        return ("no candidate was run against the SLO: " + "; ".join(
            f"{g['count']} rejected for {g['reason']} (e.g. {first[g['reason']]['id']}"
            + (f": {first[g['reason']]['detail']}" if first[g["reason"]].get("detail") else "") + ")" for g in groups))
    refused = refused_everywhere(rej, result.spec.target)
    if refused is not None:  # the same workload and max_model_len for every candidate: its fix, not the SLO's
        return "no candidate meets the SLO: " + refused
    if all(g["reason"] == SLO_WITHIN_NOISE for g in groups if g["reason"] in SLO_REASONS):
        return ("no candidate meets the SLO beyond the run's noise: even near idle the target is met only within "
                f"one standard error; see {reasons_at} ({NOISE_ADVICE})")
    noise = f"; for those met only within the run's noise, {NOISE_ADVICE}" if any(
        g["reason"] == SLO_WITHIN_NOISE for g in groups) else ""
    noise += ("; for those ITL unreachable, the smaller --max-num-batched-tokens each one's reason names" if any(
        g["reason"] == ITL_UNREACHABLE for g in groups) else "")
    return f"no candidate meets the SLO: see {reasons_at} (loosen the SLO, lower --target, add GPUs or TP{noise})"


def _band(wb: dict[str, Any] | None) -> str:
    """The capacity band's clause of an API comparison (``bands.api_within_band``), "" without a band."""
    if wb is None:
        return ""
    lo, hi = wb.get("winner_rental_usd_per_month_range") or wb["winner_self_host_usd_per_month_range"]
    bill = f"${lo:,.0f}–${hi:,.0f}/month" if round(lo) != round(hi) else f"${lo:,.0f}/month at both ends"
    ends = {wb["point"], wb["band_low"], wb["band_high"]}
    if ends == {"self-host", "conditional"}:  # an "at most" API bill: no end is the API's outright
        return f"; inside the capacity band it rests on the API's cached-input price (winner {bill})"
    if wb["flips_inside_band"]:
        return f"; this FLIPS inside the capacity band (winner {bill})"
    return f", {'conditionally ' if wb['point'] == 'conditional' else ''}across the whole capacity band (winner {bill})"


def api_line(a: dict[str, Any]) -> str:
    """The API's sentence (``a``: ``api_side.api_side``): its per-Mtok prices after the mix to 4 significant figures
    and, for a monthly volume, the month in cents, as cost prints them ($0.0425 per Mtok in; $0.24 per month)."""
    from kvledger.ledgers.amounts import usd_text
    from kvledger.ledgers.decision_notes import tokens_text
    from kvledger.report.figure import fmt

    line = (f"API {a['key']} (list price as of {a['as_of']}): ${fmt(a['usd_per_mtok_input'], 4)} per Mtok in, "
            f"${fmt(a['usd_per_mtok_output'], 4)} per Mtok out after the mix (batch {a['mix']['batch_share']:.0%}, "
            f"cache hits {a['mix']['cache_hit_rate']:.0%})")
    if a.get("usd_per_month") is not None:
        line += (f"; the same traffic ({tokens_text(a['monthly_input_tokens'])} in + "
                 f"{tokens_text(a['monthly_output_tokens'])} out tokens per month) costs "
                 f"{'at most ' if a.get('usd_per_month_is_upper_bound') else ''}{usd_text(a['usd_per_month'])} "
                 "per month")  # as cost counts them: 1M, 250,000, 3.9B (ledgers.decision_notes.tokens_text)
        if a.get("usd_per_month_lower_bound") is not None:  # no cached-input price: cache reads at input price
            line += f" ({usd_text(a['usd_per_month_lower_bound'])} with cache reads free)"
    return line


def api_verdict(a: dict[str, Any], w: dict[str, Any]) -> str:
    """Which side is cheaper, the API (``a``: ``api_side.api_side`` with ``with_people``'s fields) or the winner
    (sizing ``w``): first as ``kvledger cost`` compares them by default (GPU rental plus its people line), then on GPU
    rental alone (power and hosting are in the rental price), each across the capacity band where there is one. The
    default comparison leads: a fresh-user trial read "the winner is cheaper" on rental alone first, where ``cost
    --simulate`` answers the API."""
    wb = a.get("within_band")
    p = a["people"]
    unless = a.get("unless_cached_input_usd_per_mtok_below") or {}
    full = ("the API is cheaper" if a["cheaper_with_people"] == "API" else
            "self-hosting is cheaper" + _unless(a["cheaper_with_people"], unless.get("with_people")))
    bill = f"the winner's ${w['rental_usd_per_month']:,.0f}/month"
    rental = (f"the API is cheaper than {bill}" if a["cheaper_gpu_rental_alone"] == "API" else
              f"{bill} is cheaper" + _unless(a["cheaper_gpu_rental_alone"], unless.get("gpu_rental_alone")))
    return (f" — as kvledger cost compares them by default, GPU rental plus its people line "
            f"(${p['usd_per_month']:,.0f}/month: {p['engineer_months_per_month']:g} engineer-months at "
            f"${p['engineer_usd_per_month']:,.0f}, its --team-capability {p['team_capability']}), self-hosting costs "
            f"${a['winner_self_host_usd_per_month']:,.0f}/month and {full}" + _band((wb or {}).get("with_people"))
            + f". On GPU rental alone (power and hosting included in the rental) {rental}" + _band(wb)
            + "; kvledger cost prices the whole bill")


def _unless(side: str, usd_per_mtok: float | None) -> str:
    """A self-host side against an "at most" API bill (no cached-input price listed): "" where it beats even the
    bill's lower end (cache reads free), else the cached-input price below which the API is cheaper
    (``bands.cheaper_side``'s "conditional")."""
    if side != "conditional" or usd_per_mtok is None:
        return "" if side != "conditional" else " unless the API's cached-input price is low"
    return f" unless the API's cached-input price (none listed) is below ${usd_per_mtok:,.4g}/Mtok"


def failure_line(entry: dict[str, Any]) -> str:
    """``error: ID could not be evaluated: NodeDiedError: …``, one line, said on stderr as the candidate fails (a Ray
    node dying mid-search could end the run with status 1 and no word: each failure is said when it is known)."""
    detail = " ".join(str(entry.get("detail") or entry.get("reason") or "no reason given").split())
    return f"error: {entry['id']} could not be evaluated ({entry.get('reason')}): {detail}"


def failures_line(failed: list[dict[str, Any]]) -> str:
    """The search's last word on its failed candidates (each said on its own line as it failed, ``failure_line``)."""
    return (f"error: {len(failed)} candidate(s) could not be evaluated (each said above as it failed: "
            f"{', '.join(e['id'] for e in failed)}). Run again with --resume LEDGER to redo only those.")


def engine_words(spec: Any) -> str:
    """The search header's words for ``search --engine sglang`` (empty for vLLM, the default)."""
    return " (SGLang: its memory plan, scheduler and launch lines)" if getattr(spec, "engine", None) == "sglang" else ""
