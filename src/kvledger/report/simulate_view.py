"""Terminal rendering of a simulation summary (rich tables), units and sources on every figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from kvledger.analyses.serving.prediction_bands import PredictionBand
from kvledger.analyses.serving.sim_document import (
    SimDocument,
    load_text,
    rejected_said,
    rejected_warning,
    rejection_rule,
    shared_prefix_text,
)
from kvledger.ledgers.burst_read import BurstRead
from kvledger.ledgers.error_band import scope_words
from kvledger.report.band_words import band_source_lines
from kvledger.report.plan_summary import limit_names
from kvledger.report.preemption_view import preemption_lines
from kvledger.report.seed_spread_view import mean_range_ms, spread_line, spread_note_line
from kvledger.report.step_cost_view import priced_by, step_cost_lines, step_cost_source_line, step_cost_warnings

#: the last two: step_cost_view.py's
__all__ = ["render_summary", "render_bands", "rejected_warning", "overload_headline", "priced_by", "step_cost_lines"]

_BAND_LABELS = {"ttft_mean": ("TTFT mean", 1e3, "ms"), "tpot_mean": ("TPOT mean", 1e3, "ms"),
                "throughput": ("throughput at saturation", 1.0, "req/s")}


def _sig(x: float) -> str:
    """Three significant figures, without exponents: 7,890; 33.2; 0.125."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def render_bands(bands: dict[str, PredictionBand], console, kept_up: bool = False, closed: str = "",
                 at_knee: bool = False, burst: BurstRead | None = None) -> None:
    """One line per banded figure: ``TTFT mean 182 ms (80% band 150–260 ms, uncalibrated roofline; 24 measured
    values)``, then where the bands come from. ``kept_up``: an open-loop run that kept up with its arrivals, whose
    throughput is the offered load, not the saturation throughput the band is for (its band is left out). ``closed``:
    a closed-loop run's mode (its users or sessions send the next request after the last one, so its throughput is
    what they sent — the band holds where the engine was saturated). ``burst``: a run whose every request arrived at
    once, read at its running batch's peak (its throughput one batch's drain, or the engine's drain capacity)."""
    if kept_up:
        bands = {k: v for k, v in bands.items() if k != "throughput"}
    if not bands:
        return
    parts, labels = [], {}
    for metric, b in bands.items():
        label, k, unit = _BAND_LABELS[metric]
        if metric == "throughput" and closed:
            label = "throughput of the " + ("sessions' closed loops" if closed.startswith("sessions") else
                                            "closed loop")
        labels[metric] = label
        scope = scope_words(b.regime)
        parts.append(f"{label} {_sig(b.predicted * k)} {unit} (80% band {_sig(b.low * k)}–{_sig(b.high * k)} "
                     f"{unit}, {scope})")
    console.print("[bold]error bands[/]: " + "; ".join(parts))
    # a band that excludes its point: q10 and q90 of the errors share a sign, so the simulator erred the same way on at
    # least about 90% of this regime's measured points; say so above the fine print (fresh-user trial)
    biased = [f"{labels[m]} {'under' if b.low > b.predicted else 'over'}-predicted"
              for m, b in bands.items() if not b.low <= b.predicted <= b.high]
    if biased:
        console.print(f"[bold]read the band, not the point[/]: {', '.join(biased)} (the 80% band lies wholly on one "
                      "side: the simulator erred that way on this regime's measured points)")
    first = next(iter(bands.values()))
    console.print(f"[dim]bands: each is where a real engine's figure fell, given this prediction, on 80% of the "
                  f"measured points behind it (kvledger.ledgers.error_band; regime {first.regime}); the percentages "
                  "are errors, predicted ÷ measured − 1, so the measured figure lies in the range the band shows; a "
                  "biased regime's band need not contain the prediction[/]")
    lines = band_source_lines({labels[m]: b.source for m, b in bands.items()})
    from kvledger.report.band_tails import band_tails

    tails = band_tails(bands, kept_up, closed, at_knee, burst)
    for i, line in enumerate(lines + tails):
        console.print(("  from: " if i == 0 else "  ") + escape(line), style="dim", highlight=False)
    names = ", ".join(_BAND_LABELS[m][0].removesuffix(" at saturation") for m in bands)
    console.print(f"[dim]banded: {names} only; the percentiles (p50/p90/p99), "
                  "ITL and E2E have no validated band: the leave-one-deployment-out validation measured the errors "
                  "of means and saturation throughput only (--json: band_coverage)[/]")


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1e3:,.1f}"


def _pool(eng: dict) -> str:
    """The KV pool in the engine's own terms: vLLM's blocks; SGLang's token slots (pages) of which the first is the
    padded slot its memory pool keeps for the dummy writes of padded tokens (mem_cache/memory_pool.py)."""
    n, size = eng["num_gpu_blocks"], eng["block_size"]
    tokens = f"{size:,} token{'s' if size != 1 else ''}"
    if eng["batching"] != "sglang":
        return f"{n:,} KV blocks × {tokens}"
    if size == 1:
        return f"{n:,} KV token slots (slot 0 reserved: SGLang's padded slot)"
    return f"{n:,} KV pages of {tokens} (page 0 reserved: SGLang's padded slot)"


def _batch_line(b: dict) -> str:
    """Requests held at once, time-weighted over the run (sim_batch.batch_occupancy)."""
    run, wait = b["running"], b["waiting"]
    who = "one replica's" if b["replicas"] > 1 else "the engine's"
    eng = f"; {who} largest running batch {b['engine_running_max']:,} (prefills included)" if b.get(
        "engine_running_max") else ""
    every = ", all replicas" if b["replicas"] > 1 else ""
    return (f"batch (requests at once, time-weighted over {b['span_s']:,.1f} s{every}): running (first token out, "
            f"not finished) mean {run['mean']:,.1f}, max {run['max']:,}; waiting (no first token yet: queued or "
            f"prefilling) mean {wait['mean']:,.1f}, max {wait['max']:,}{eng}")


def _prefix_caching(eng: dict) -> str:
    """The policy; "off"; or on at launch (the pool paged for it) with its reuse not simulated (see the notes)."""
    if eng["enable_prefix_caching"]:
        return eng["prefix_caching_policy"]
    return "on at launch (the pool paged as vLLM pages it), its reuse not simulated" if eng.get(
        "prefix_caching_at_launch") else "off"


def _latency_table(s: dict, spread):
    """The latency table; with a seed spread, a ``seeds`` column: the mean's min–max over the seeds."""
    from kvledger.report.tables import LedgerTable as Table

    keys = (("ttft_s", "TTFT"), ("itl_s", "ITL (all gaps)"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
    # an overloaded run's minutes of queue read as seconds (922,207.6 ms is 922.208 s); a seed spread keeps ms
    secs = spread is None and max((s[k]["p99"] or 0.0) for k, _ in keys) >= SECONDS_FROM_S
    t = Table(title="latency (s)" if secs else "latency (ms)", show_edge=False)
    for c in ("metric", "mean", "p50", "p90", "p99", "n") + (("seeds",) if spread is not None else ()):
        t.add_column(c, justify="right" if c != "metric" else "left")
    cell = _s if secs else _ms
    for key, label in keys:
        d = s[key]
        t.add_row(label, cell(d["mean"]), cell(d["p50"]), cell(d["p90"]), cell(d["p99"]), f"{d['count']:,}",
                  *((mean_range_ms(spread, key),) if spread is not None else ()))
    return t


#: a latency table whose largest p99 reaches this many seconds is printed in seconds
SECONDS_FROM_S = 100.0


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:,.3f}"


def _requests_lines(console, s: dict, eng: dict, batch: dict | None = None) -> None:
    """The requests finished, rejected (with the rule) and preempted, the throughput of those finished, and the
    requests held at once (``batch``, when given)."""
    rule = (rejection_rule(eng) + " is rejected"
            + ("; a request whose prompt + output would pass it is served with its output capped at max_model_len − "
               "prompt" if eng.get("caps_output", True) and eng.get("batching") != "sglang" else ""))
    console.print(f"requests: {s['num_finished']:,} finished / {s['num_requests']:,} "
                  f"({s['num_rejected']:,} rejected, the rule: {rule}); "
                  f"preemptions (recompute): {s['num_preemptions']:,}")
    if s["num_finished"]:
        console.print(f"throughput: {s['throughput_req_per_s']:,.2f} req/s, "
                      f"{s['throughput_output_tok_per_s']:,.0f} output tok/s, "
                      f"{s['total_throughput_tok_per_s']:,.0f} total tok/s over {s['duration_s']:,.1f} s "
                      "(first arrival → last finish)")
    else:
        console.print("throughput: none (no request finished)")
    if batch is not None:
        console.print(_batch_line(batch))


def overload_headline(overload: dict[str, Any] | None) -> str | None:
    """One line, above the figures, for an overloaded run (the JSON of an ``analyses.serving.overloads`` record, by its
    ``kind``); its note, with the counts and the rule, is printed with the notes. None for a run that kept up."""
    o = overload or {}
    if o.get("kind") == "queue_growth":
        done = "reached a first token" if o.get("queue") == "waiting" else "finished"  # the queue the check read
        c = o.get("seq_cap")  # the batch sat at max_num_seqs with KV to spare (analyses.serving.seq_cap)
        reps = "" if not c or c["replicas"] == 1 else f" × {c['replicas']:,} replicas"
        cap = "" if not c else (f"; the running batch sat at max_num_seqs {c['max_num_seqs']:,}{reps} "
                                f"({c['running_mean']:,.1f} decoding on average, {c['running_max']:,} at most) with "
                                f"the KV cache at most {c['kv_usage_max']:.1%} used: raise --max-num-seqs")
        return (f"overloaded: between the median and the last arrival (t = {o['t_mid_s']:,.1f}–{o['t_last_s']:,.1f} "
                f"s) requests arrived at {o['arrived_per_s']:,.2f} req/s and {done} at {o['finished_per_s']:,.2f} "
                "req/s, so the queue grew after the median arrival: the TTFT and E2E below measure that queue, not the "
                f"engine{cap} (see the note below)")
    if o.get("kind") == "paced_behind":
        held = "the cap, not the engine, held the load" if o.get("cap_held") else "the engine held them back"
        return (f"the clients fell behind their rate: {o['sent_per_s']:,.2f} of {o['offered_per_s']:,.2f} req/s "
                f"sent, {o['num_users']:,} in flight at most; {held} (see the note below)")
    if o.get("kind") == "session_queue":
        return (f"overloaded: the turns spent {o['ttft_share']:.0%} of their time in the system waiting for a first "
                "token (see the note below)")
    return None


def render_summary(payload: SimDocument, console, out: Path | None = None) -> None:
    """Print the run's summary: workload, engine, latency table, throughput, KV usage, cache, preemptions; with
    ``--seeds``, each figure's min–max over the seeds."""
    s, eng, wl, cost = payload.summary, payload.engine, payload.workload, payload.step_cost
    for line in step_cost_warnings(cost):  # first of all: the step cost is used where its fit says nothing
        console.print(line)
    if rejected := rejected_said(payload):  # before the table it empties or thins
        console.print(f"[bold yellow]warning[/]: {rejected}")
    if said := overload_headline(payload.overload):  # before the latencies it invalidates; the whole note below
        console.print(f"[bold yellow]warning[/]: {said}")
    loop = load_text(wl) if str(wl.get("mode")).startswith("closed loop") else wl["mode"]  # its users, its pacing
    n = wl["num_requests"]
    console.print(f"[bold]workload[/]: {wl['trace']} — {n:,} request{'' if n == 1 else 's'}, {loop}; prompt mean "
                  f"{wl['prompt_tokens_mean']:,.0f}, output mean {wl['output_tokens_mean']:,.0f} tokens"
                  f"{shared_prefix_text(wl)}")
    if "sessions" in wl:
        from kvledger.report.sim_tiers_view import session_shape_line

        console.print(session_shape_line(wl["sessions"]))
    reps = payload.replicas
    each = f"{reps} replicas behind the {payload.router} router, each with " if reps > 1 else ""
    bt, ns = limit_names("sglang" if eng.get("batching") == "sglang" else "vllm")  # SGLang's own names under sglang
    console.print(f"[bold]engine[/]: {each}{_pool(eng)}, max_model_len "
                  f"{eng['max_model_len']:,}, {bt} {eng['max_num_batched_tokens']:,}, {ns} "
                  f"{eng['max_num_seqs']:,}; batching {eng['batching']}, KV {eng['kv_allocation']}, prefix caching "
                  f"{_prefix_caching(eng)}, scheduling {eng['scheduling_policy']}")
    for line in ([dp_line(payload.data_parallel)] if payload.data_parallel else []) + (
            [pp_line(payload.pipeline)] if payload.pipeline else []) + step_cost_lines(cost, False):
        console.print(line)
    spread = payload.seed_spread if payload.seed_spread is not None and not payload.seed_spread.seed_free else None
    console.print(_latency_table(s, spread))
    console.print("[dim]TTFT, TPOT (excluding the first token) and E2E: one value per request; ITL (all gaps): every "
                  "gap "
                  "between consecutive tokens of every request, pooled (n counts gaps). An SLO on ITL is per request: "
                  "itl_max (a request's largest gap), itl_mean or itl_p99 (of its own gaps).[/]")
    kv = s["kv_usage"]
    _requests_lines(console, s, eng, payload.batch)
    for line in preemption_lines(payload.preemptions):  # only a run that preempted: why, and what to change
        console.print(line, markup=False)
    console.print(f"KV usage (held blocks / usable): mean {kv['mean']:.1%}, max {kv['max']:.1%}; "
                  f"share of held KV holding token state {kv['token_state_share']:.1%}")
    none = (" — 0 by construction: the workload has no prefix ids (see the note)"
            if payload.workload.get("prefix_ids") is False and eng.get("enable_prefix_caching") else "")
    console.print(f"prefix cache: hit rate {s['prefix_cache_hit_rate']:.1%} ({s['prefix_cache_hit_tokens']:,} of "
                  f"{s['prefix_cache_query_tokens']:,} prompt tokens){none}")
    if spread is not None:
        console.print(spread_line(spread))
    mode = str(payload.workload.get("mode", ""))
    render_bands(payload.error_bands or {}, console, payload.kept_up,
                 mode if mode.startswith(("sessions", "closed loop")) else "", bool(payload.at_knee), payload.burst)
    console.print(step_cost_source_line(cost))
    said = None if payload.seed_spread is None else spread_note_line(payload.seed_spread)
    if said is not None:  # the draw moves a banded figure: said under the bands, not only in the notes
        console.print(said)
    for note in payload.notes:
        if (said is None or note not in said) and note != rejected:  # the rejections: the warning above
            console.print(f"[dim]note: {note}[/]")
    if out is not None:
        wrote = [n for n in ("records.parquet", "steps.parquet", "trace.json", "summary.json") if (out / n).exists()]
        console.print(f"wrote {', '.join(wrote)} to {out}")


def dp_line(dp: dict) -> str:
    """The data-parallel line: the DP ranks in lock-step, each rank's KV pool and in all, the requests routed to each
    rank and its KV usage (``sim_dp.dp_figures``)."""
    n, usage = dp["data_parallel_size"], ", ".join(f"{u:.1%}" for u in dp["kv_usage_mean_per_rank"])
    return (f"[bold]data parallel[/]: {n} DP ranks in lock-step on {dp['gpus']} GPUs ({dp['rule_source']}); KV pool "
            f"{dp['kv_tokens_per_rank']:,} tokens per rank, {n} × {dp['kv_tokens_per_rank']:,} = "
            f"{dp['kv_tokens_total']:,} in all (memory plan); "
            f"requests routed per rank {', '.join(f'{r:,}' for r in dp['requests_routed_per_rank'])}; KV usage mean "
            f"per rank {usage}; the latencies, throughput and KV usage below are all ranks' together (the batch "
            "line's replicas are the ranks)" + _saturation_words(dp))


def _saturation_words(dp: dict) -> str:
    """"; saturation judged per rank: …" where the run was an open loop (``dp_saturation.saturation_figures``)."""
    if "saturated_ranks" not in dp:
        return ""
    sat = dp["saturated_ranks"]
    said = (f"rank{'s' if len(sat) > 1 else ''} {', '.join(map(str, sat))} of {dp['data_parallel_size']} saturated "
            "(its own queue grew)" if sat else
            "too short to tell whether a rank's queue grew (the run's warm-up had not ended: the note below)"
            if dp.get("too_short_to_tell") else
            "no one rank's queue grew past its own burst allowance, but all ranks' requests together showed the queue "
            "growing (the warning above)" if dp.get("run_queue_grew") else "no rank's queue grew")
    return f"; saturation judged per rank, each rank's own requests (a rank's queue cannot move to another): {said}"


def pp_line(pp: dict) -> str:
    """The pipeline line: stages, their layers and GPUs, batches in flight and how busy the stages were
    (``sim_pp.pp_figures``)."""
    busy = pp.get("stage_busy_share")
    return (f"[bold]pipeline[/]: {pp['loop']}, {pp['pipeline_parallel_size']} stages of "
            f"{' + '.join(map(str, pp['layers_per_stage']))} layers on {pp['gpus']} GPUs ({pp['rule_source']}); up to "
            f"{pp['batches_in_flight_max']} batch{'es' if pp['batches_in_flight_max'] > 1 else ''} in flight"
            + (f"; stages busy {busy:.1%} of the engine's busy time (Σ stage compute ÷ stages × busy time)"
               if busy is not None else ""))
