"""How ``kvledger search`` prints its result for a decision: the winner and its launch command first, the API bill, the
cost frontier, an 80-column table, rejections grouped by reason (``--verbose``: each), then the details."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.search.load import has_load, volume_given
from kvledger.analyses.search.reasons import NO_INSTANCE, NO_INSTANCE_DP, NO_PRICE_ROW
from kvledger.ledgers.volume_rate import given_clause
from kvledger.report.probe_cells import target_words
from kvledger.report.run_warnings import is_warning
from kvledger.report.search_answer import api_line, api_verdict, engine_words, no_winner_line, tie_line, winner_line

__all__ = ["print_search", "print_launch"]


def _f(x: Any, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _settings(e: dict[str, Any], varied: set[str]) -> str:
    p, parts = e["plan"], []
    if "max_num_seqs" in varied:
        parts.append(f"seqs {p['max_num_seqs']}")
    if "max_num_batched_tokens" in varied:
        parts.append(f"mnbt {p['max_num_batched_tokens']}")
    if "enable_prefix_caching" in varied:
        parts.append("pc on" if e["enable_prefix_caching"] else "pc off")
    return " ".join(parts)


def _candidate(e: dict[str, Any], varied: set[str]) -> str:
    from kvledger.analyses.search.naming import short_name

    tier = f"+ {e['offload']['label']}" if e.get("offload") else ""  # a tier variant (analyses/search/tier_entries)
    return " ".join(filter(None, (short_name(e["gpu_id"], e["layout"], e["kv_cache_dtype"]), _settings(e, varied),
                                  tier)))


def _top_table(result: Any, top: int) -> Any:
    from rich import box

    from kvledger.report.tables import LedgerTable as Table

    sized = has_load(result.spec)
    feasible = [result.entry(cid) for cid in result.ranking]
    varied = {k for k in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching")
              if len({e[k] for e in result.entries}) > 1}
    t = Table(title=f"Top {min(top, len(feasible))} of {len(feasible)} feasible "
                    f"candidate{'' if len(feasible) == 1 else 's'} "
                    f"(ranked by {'monthly bill' if sized else 'USD per 1k good requests'})", title_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False)
    cols = ["#", "candidate", "req/s", "tok/s/user", "$/Mtok out"] + (["GPUs", "$/month"] if sized else ["$/1k req"])
    for c in cols:
        t.add_column(c, justify="left" if c == "candidate" else "right")
    from kvledger.analyses.search.frontier import capacity_caveats

    front = {p["id"] for p in result.cost_frontier}
    for n, e in enumerate(feasible[:top], start=1):
        cap, cost, s = e["capacity"], e["cost"], e.get("sizing") or {}
        soft = "~" if capacity_caveats(e) else ""  # not steady, or an unrepresentative sample (its notes say which)
        row = [f"{n}{'*' if e['id'] in front else ''}", _candidate(e, varied),
               "≥" * bool(cap.get("sessions_limit")) + _f(cap["slo_capacity_req_per_s"], ",.4g") + soft,
               _f(cap["tok_per_s_per_user"], ",.1f"), _f(cost["usd_per_mtok_output"], ".3f")]
        idle = f" +{s['idle_gpus']} idle" if s.get("idle_gpus") else ""  # whole instances: search.instance_bill
        row += [f"{s['num_gpus']} ({s['replicas']}×){idle}", _f(s["rental_usd_per_month"], ",.0f")] if sized else \
            [_f(cost["usd_per_1k_requests"], ".4f")]
        t.add_row(*row)
    return t


def _per_probe(sp: Any) -> str:
    if hasattr(sp.synthetic, "prepare_setup"):  # sessions (analyses/serving/session_spec.py)
        w = sp.synthetic
        return (f"≥ {w.num_sessions:,} {w.workload} sessions per probe, more where a probe's rate needs them to reach "
                f"a steady state (kvledger.analyses.serving.session_ramp){w.cap_words}; ≥ before a capacity: a lower "
                "bound, the probes above it met the SLO but their sessions never carried their rate (raise --sessions; "
                "sessions_limit in --json)")
    return f"{sp.num_requests:,} requests per probe"


def _good_at(sp: Any) -> str:
    """Whose share within the SLO counts the good tokens at the utilization priced: with a load to size for (no
    --utilization), a run at the load each replica carries, as cost --simulate prices (``evaluate.volume_load``)."""
    if sp.utilization is None and has_load(sp):
        return ("those of a run of the same workload and seed at the load each replica carries (the load ÷ replicas), "
                "as cost --simulate prices the same deployment at the same load; a disaggregated unit's or a session "
                "workload's: offered × the boundary run's attainment")
    return "offered × the boundary run's attainment, the share of its requests within the SLO"


def _legend(result: Any) -> str:
    sp = result.spec
    util = (f"{sp.utilization:.0%} utilization" if sp.utilization is not None
            else "the utilization the sizing realizes (offered load ÷ SLO capacity of the replicas rented)")
    return (f"req/s: SLO capacity per replica, the highest simulated offered rate with ≥ {sp.target:.0%} of requests "
            f"within {sp.slo} (as goodput --target prints; the good req/s there, offered × attainment, is "
            "goodput_req_per_s in --json, what the cost is priced at, as cost --simulate's; its "
            "goodput_at_boundary_req_per_s counts the probe from first arrival to last finish, the drain included, "
            "so it can be lower; "
            f"{_per_probe(sp)}, "
            f"seed {sp.seed}; ~: a capacity whose boundary probe was not steady or whose probes replay a sample unlike "
            "the trace, its notes in --json and --verbose); "
            "tok/s/user: 1 ÷ median TPOT there; $/Mtok at " + util +
            " (kvledger.ledgers.cost; the good tokens at that load: " + _good_at(sp) + "), GPU time split between "
            "input and output by the boundary run's steps, each "
            "priced by its step-cost model's terms (kvledger.accounting.step_split; prefill_share in --json); "
            "GPUs (replicas×): ⌈offered load ÷ (SLO capacity × "
            f"{sp.max_utilization:.0%})⌉ replicas × GPUs each, +N idle: the GPUs of part-filled instances "
            "(kvledger.ledgers.instances); $/month: the whole instances' GPUs × $/GPU-h × 730 h, on the cheapest "
            "packing of the price rows; the price rows are in --json/--csv")


def _frontier(con: Any, result: Any, verbose: bool) -> None:
    from rich.markup import escape

    front = result.cost_frontier
    sized = front and front[0]["rental_usd_per_month"] is not None
    money = (lambda p: f"${p['rental_usd_per_month']:,.0f}/month") if sized else \
        (lambda p: f"${p['usd_per_1k_requests']:.4f}/1k req")
    pts = [f"{p['id']} {money(p)}, {p['tok_per_s_per_user']:,.1f} tok/s/user" for p in front[:5]]
    more = f" (+{len(front) - 5} more in --json)" if len(front) > 5 else ""
    con.print(escape("cost frontier (cheapest first, equal bills by USD per 1M good tokens, by SLO capacity where "
                     "those differ within sampling error; each faster per user than every cheaper one): "
                     + "; ".join(pts) + more))
    if verbose and result.cost_dominated:
        con.print("dominated on cost and tok/s/user: " + escape("; ".join(f"{d['id']} by {d['dominated_by']}"
                                                                        for d in result.cost_dominated)))


def _api(con: Any, result: Any) -> None:
    from rich.markup import escape

    a = result.api
    if a is None:
        return
    line = api_line(a)
    if a.get("usd_per_month") is not None:
        w = (result.winner or {}).get("sizing")
        if w and "people" in a:  # rental alone, then with cost's default people line (search/api_side.with_people)
            line += api_verdict(a, w)
    con.print(escape(line))
    for n in a["notes"]:
        con.print(escape(f"  note: {n}"))


def _alternatives(rej: list[dict[str, Any]]) -> str:
    """The priced GPU of the same vendor to search instead of each GPU rejected for want of a price row."""
    from kvledger.catalog.priced_alternative import priced_alternative_words
    from kvledger.catalog.prices import gpu_prices

    gpus = dict.fromkeys(e["gpu_id"] for e in rej if e.get("reason") == NO_PRICE_ROW and e.get("gpu_id"))
    return "".join(f"; for {g}, {words.removeprefix('; ')}" for g in gpus
                   if (words := priced_alternative_words(g, gpu_prices())))


def _rejections(con: Any, result: Any, verbose: bool) -> None:
    from rich.markup import escape

    from kvledger.analyses.search.frontier import rejections_by_reason
    from kvledger.report.tables import LedgerTable as Table

    _screening(con, result, verbose)
    rej = [e for e in result.entries if e["status"] not in ("feasible", "bounded")]
    if not rej:
        return
    groups = rejections_by_reason(rej)
    hint = ("; a GPU without a price row: --gpu-usd-per-hour GPU=PRICE gives it your price (the other GPUs keep the "
            "table's; one PRICE alone prices every searched GPU)" + _alternatives(rej)
            if any(g["reason"] == NO_PRICE_ROW for g in groups) else "")
    hint += _no_instance_hint(rej)
    con.print(escape(f"rejected: {len(rej)} of {len(result.entries)} — " + "; ".join(
        f"{g['reason']}: {g['count']} (e.g. {g['ids'][0]})" for g in groups) + hint)
              + ("" if verbose else " (--verbose lists each)"))
    if not verbose:
        return
    t = Table(title=f"Rejected candidates ({len(rej)} of {len(result.entries)})", title_justify="left")
    for c in ("candidate", "reason", "numbers"):
        t.add_column(c, overflow="fold")
    for e in rej:
        t.add_row(escape(e["id"]), escape(e["reason"] or e["status"]), escape(e.get("detail") or ""))
    con.print(t)


def _no_instance_hint(rej: list[dict[str, Any]]) -> str:
    """What prices the candidates no instance holds: a group past one node (more than ``POD_MAX_GPUS``, TP 16 on 8-GPU
    boards) sits on no row's instance at any provider, so only --gpu-usd-per-hour prices it; a narrower one, another
    provider's multi-GPU instances too."""
    from kvledger.ledgers.instances import POD_MAX_GPUS

    widths = [max(e.get("tp") or 0, e.get("decode_tp") or 0, 0 if e.get("prefill_replicas") else
                  e.get("num_gpus_per_unit") or 0) for e in rej if e.get("reason") in (NO_INSTANCE, NO_INSTANCE_DP)]
    if not widths:
        return ""
    wide = sum(w > POD_MAX_GPUS for w in widths)
    out = ("; a TP group (or DP × TP ranks) wider than every instance of the rows priced: another --gpu-provider "
           "with multi-GPU instances, or --gpu-usd-per-hour" if wide < len(widths) else "")
    if wide:
        out += (f"; {wide} past one node (over {POD_MAX_GPUS} GPUs, e.g. TP 16 on 8-GPU boards): no provider's row "
                "sells a multi-node cluster, so only --gpu-usd-per-hour (your cluster's price per GPU-hour) prices "
                "them")
    return out


def _screening(con: Any, result: Any, verbose: bool) -> None:
    """How many candidates were simulated and how many decided by bound, with the smallest margins."""
    from rich.markup import escape

    from kvledger.analyses.search.prune import screening

    s = screening(result.entries)
    if not s.planned:
        return
    m = s.smallest_margin
    line = (f"simulated: {s.simulated} of {s.planned} planned; decided by bound: {s.decided_by_bound} "
            f"(cannot win, be the runner-up or reach a frontier), {s.slo_rejected_by_bound} rejected by their "
            f"TTFT/TPOT bounds, {s.lighter_loads_decided_by_bound} lighter operating points off the frontier by bound")
    if s.decided_by_bound:
        line += (f"; smallest margins: cost {m.rank:.1%} above the runner-up, {m.cost_frontier:.1%} inside the "
                 f"cost frontier, {m.frontier:.1%} inside the frontier")
    con.print(escape(line + ("" if verbose or not s.decided_by_bound else " (--verbose lists each)")))
    if verbose:
        for e in result.entries:
            if e["status"] == "bounded":
                con.print(escape(f"  decided by bound: {e['id']}: {e['detail']}"))


def print_launch(con: Any, cid: str, cmd: dict[str, str], title: str) -> None:
    """Candidate ``cid``'s launch commands ``cmd`` (``launch.launch_for``) and its ``kvledger plan`` (its KV pool)."""
    from rich.markup import escape

    con.print(escape(f"{title}: {cid}"))
    for label, key in [t for t in (("vLLM:  ", "vllm"), ("SGLang:", "sglang"), ("check: ", "check")) if t[1] in cmd]:
        con.print(escape(f"  {label} {cmd[key]}"), soft_wrap=True)  # one line each (no vLLM's: --engine sglang)
    if cmd.get("max_model_len_note"):  # lowered from the model's default (analyses/search/launch_len)
        con.print(escape(f"  ({cmd['max_model_len_note']})"))
    con.print(escape(f"  ({cmd['note']})"))


def print_search(result: Any, top: int = 10, verbose: bool = False) -> None:
    """For a decision: the winner (with what its ranking rests on), its launch command, the API bill for the same
    traffic and the top of the cost frontier first; then the table, rejections grouped by reason, notes, details."""
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False, emoji=False)
    sp = result.spec
    feas = len(result.ranking)
    quant = f" (vLLM --quantization {q})" if (q := getattr(sp, "quantization", None)) else engine_words(sp)
    con.print(escape(f"kvledger search: {sp.model}{quant}, SLO {sp.slo} for {target_words(sp.target)}; "
                     f"{len(result.entries)} candidate{'' if len(result.entries) == 1 else 's'}, {feas} feasible"
                     + given_clause(volume_given(sp))))  # a volume typed per day or hour
    for n in result.notes:  # the GPU profile's warnings first (poor fit, not recommended), as simulate prints them
        if is_warning(n):
            con.print(escape(n))
    w = result.winner
    if w is None:
        con.print(escape(no_winner_line(result)))
    else:
        con.print(f"[bold]{escape(winner_line(result))}[/]")
        if (tie := tie_line(result)) is not None:
            con.print(escape(tie))
        con.print(escape(f"  {w['launch'].get('vllm') or w['launch']['sglang']}"), soft_wrap=True)
        if w["launch"].get("max_model_len_note"):  # lowered where the default may not start (search/launch_len)
            p = w["plan"]
            what = (f"--max-model-len {p['launch_max_model_len']:,}, lowered from the model's default "
                    f"{p['max_model_len']:,}" if "launch_max_model_len" in p else "--max-model-len lowered")
            con.print(escape(f"  ({what}: the default may not start at the memory range's low end; the winner's "
                             "launch note below says why and that the simulation is the same run)"))
    _api(con, result)
    if result.ranking:
        _frontier(con, result, verbose)
        con.print(_top_table(result, top))
        con.print(escape("(* on the cost frontier) " + _legend(result)))
        if verbose:  # what each ~ in the table rests on
            from kvledger.analyses.serving.notes import CAPACITY_WARNINGS

            for cid in result.ranking[:top]:
                for n in (result.entry(cid)["capacity"].get("notes") or []):
                    if n.startswith(CAPACITY_WARNINGS):
                        con.print(escape(f"  ~ {cid}: {n}"))
    _rejections(con, result, verbose)
    for n in result.notes:
        if not is_warning(n):  # printed under the header
            con.print(escape(f"note: {n}"))
    if w is not None:
        pr = w["price"]
        row = (f"{pr['provider']} {pr['instance_type']} ({pr['pricing_model']}, as of {pr['as_of']}, "
               f"{pr['confidence']} confidence; {pr['source']})" if pr["as_of"] else pr["source"])
        mix = ("" if not pr.get("rows") else " billed, a mix: " + " + ".join(
            f"{r['instances']} × {r['key']} at ${r['usd_per_gpu_hour']:g}/GPU-h" for r in pr["rows"]))
        usd = f"{pr['usd_per_gpu_hour']:.4g}" if mix else f"{pr['usd_per_gpu_hour']:g}"
        con.print(escape(f"winner's price: ${usd} per GPU-hour{mix}, {row}"))  # given: no date
        if (w.get("sizing") or {}).get("instances_how"):
            how, usd = w["sizing"]["instances_how"], w["sizing"]["rental_usd_per_month"]
            con.print(escape(f"winner's bill: {how} (USD per month: ${usd:,.2f})"))
        print_launch(con, w["id"], w["launch"], "winner")
        for n in w["capacity"]["notes"][1:]:
            con.print(escape(f"  capacity note: {n}"))
