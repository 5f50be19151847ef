"""The serving and cost figures of the report: cost against utilization and monthly volume, latency percentiles and
goodput against request rate, and what the engine saves.

Each takes the ``ReportData`` of ``kvledger.analyses.serving.decision_data.build_report_data``; measured
benchmark runs, when given, are drawn on the same axes as the simulation.
"""

from __future__ import annotations

from collections.abc import Collection

from kvledger.analyses.serving.report_data import ReportData
from kvledger.analyses.serving.sim_capacity import stopped_share_text
from kvledger.ledgers.amounts import pct_text, unit_noun, units_text
from kvledger.report.decision_view import capacity_band_clause, not_steady_lines, sized_capacity
from kvledger.report.figure import Figure, fmt, new_axes

__all__ = ["cost_by_utilization", "cost_by_volume", "latency_by_rate", "goodput_by_rate", "engine_savings",
           "serving_figures"]

_COST_SRC = "kvledger.ledgers.breakeven (the numbers of cost --json: break_even_utilization, break_even_volume)"


def cost_by_utilization(data: ReportData) -> Figure:
    c, cost = data.curves["utilization"], data.cost
    pts = c["points"]
    fig, ax = new_axes(height=3.2)
    u = [100 * p["utilization"] for p in pts]
    ax.plot(u, [p["self_host_usd_per_1k_requests"] for p in pts], marker="o", label="self-hosted")
    ax.plot(u, [p["api_usd_per_1k_requests"] for p in pts], label=f"API ({cost['inputs']['api_price']})")
    ax.set_yscale("log")
    if c["break_even_utilization"] is not None:
        ax.axvline(100 * c["break_even_utilization"], color="grey", ls=":")
        ax.annotate(f"break-even {100 * c['break_even_utilization']:.1f}%", (100 * c["break_even_utilization"],
                                                                             ax.get_ylim()[1]),
                    fontsize=7, xytext=(4, -12), textcoords="offset points")
    here, e = c.get("volume_point"), (cost.get("break_even_volume") or {}).get("engine_replicas_per_unit", 1)
    if here is not None and here["replicas"] > 1:  # the curve is one unit's: the volume's own bill is its point
        ax.plot([100 * here["utilization"]], [here["self_host_usd_per_1k_requests"]], marker="*", ms=10, ls="",
                color="#55a868",
                label=f"this volume: {units_text(here['replicas'], e)} at {pct_text(here['utilization'], 0)}")
    else:
        ax.axvline(100 * c["chosen_utilization"], color="#55a868", ls="--", lw=1, label="your utilization")
    bu = cost["break_even_utilization"]
    if (bu.get("peak_to_mean") or 1) > 1:  # replicas sized for the peak: none runs above max ÷ peak on the mean
        ax.axvline(100 * bu["mean_utilization_cap"], color="#c44e52", ls="-.", lw=1,
                   label=f"highest mean at --peak-to-mean {bu['peak_to_mean']:g}")
    ax.set_xlabel("utilization, offered load as % of the SLO capacity")
    ax.set_ylabel("USD per 1,000 requests")
    ax.legend(fontsize=7)
    rows = [[fmt(100 * p["utilization"]), fmt(p["self_host_usd_per_1k_requests"], 4),
             fmt(p["api_usd_per_1k_requests"], 4)] for p in pts]
    led, n = c.get("ledger_break_even_utilization"), c.get("ledger_break_even_replicas", 1)
    if led is not None and n > 1:  # the ledger's break-even shares the people line over the volume's replicas
        more_be = (f" The break-even marked is where this one-{unit_noun(e)} curve meets the API's; the volume's "
                   f"{units_text(n, e)}, sharing one people line, break even at {pct_text(led)} (cost's "
                   "break_even_utilization).")
    else:
        more_be = ""
    more = more_be + ("" if not (here and here["replicas"] > 1) else f" This volume runs "
            f"{units_text(here['replicas'], e)} at {pct_text(here['utilization'])}: its whole bill comes to "
            f"${here['self_host_usd_per_1k_requests']:.4f} per 1,000 requests (the star; the "
            f"curve is one {unit_noun(e)}'s, whose people line no other {unit_noun(e)} shares).")
    return Figure("cost_by_utilization", "Build or buy: cost against utilization",
                  f"Self-hosted cost per request of one {unit_noun(e)} (its rental and the people) falls as "
                  "1/utilization; the API's is flat. Below the break-even utilization the API is cheaper." + more, fig,
                  ["utilization, %", "self-hosted USD / 1k requests", "API USD / 1k requests"],
                  rows, [c["formula"], _COST_SRC,
                         cost["inputs"]["gpu_price_source"] if "gpu_price_source" in cost["inputs"] else ""])


def cost_by_volume(data: ReportData) -> Figure:
    c, cost = data.curves["volume"], data.cost
    pts, unit = c["points"], unit_noun((cost.get("break_even_volume") or {}).get("engine_replicas_per_unit", 1))
    fig, ax = new_axes(height=3.2)
    v = [p["requests_per_month"] for p in pts]
    ax.step(v, [p["self_host_usd_per_month"] for p in pts], where="post", label=f"self-hosted (whole {unit}s)")
    ax.plot(v, [p["api_usd_per_month"] for p in pts], label=f"API ({cost['inputs']['api_price']})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if c["break_even_requests_per_month"]:
        ax.axvline(c["break_even_requests_per_month"], color="grey", ls=":")
        be = c["break_even_requests_per_month"]  # the x axis's unit in the label: a bare "/month" read as tokens
        ax.annotate(f"break-even {be:,.0f} requests/month", (be, ax.get_ylim()[1]),
                    fontsize=7, xytext=(4, -12), textcoords="offset points")
    mine = c.get("volume_requests_per_month")  # the volume priced: its line, and its row in the table (marked)
    if mine:
        ax.axvline(mine, color="#55a868", ls="--", lw=1, label=f"your volume, {mine:,.0f} requests/month")
    ax.set_xlabel("requests per month (offered)")
    ax.set_ylabel("USD per month")
    ax.legend(fontsize=7)
    rows = [[f"{p['requests_per_month']:,.0f}" + (" (your volume)" if p["requests_per_month"] == mine else ""),
             f"{p['replicas']}", f"{p['self_host_usd_per_month']:,.0f}", f"{p['api_usd_per_month']:,.0f}"]
            for i, p in enumerate(pts) if i % max(1, len(pts) // 12) == 0 or p["requests_per_month"] == mine]
    return Figure("cost_by_volume", "Build or buy: monthly bill against volume",
                  f"{unit.capitalize()}s come whole, each run at most at {100 * c['max_utilization']:.0f}% of its SLO "
                  f"capacity ({c['capacity_requests_per_month_per_unit']:,.0f} requests per month each)."
                  + (f" Your volume, {mine:,.0f} requests a month, is the row marked." if mine else ""), fig,
                  ["requests / month", f"{unit}s", "self-hosted USD / month", "API USD / month"], rows,
                      [c["formula"], _COST_SRC])


def _slo_ms(data: ReportData, key: str) -> float | None:
    v = data.cost["slo"].get(key)
    return None if v is None else v * 1e3


def latency_by_rate(data: ReportData) -> Figure:
    cs = data.cost["simulation"]["capacity_search"]
    sweep, cap = data.rate_sweep, sized_capacity(cs)
    fig, (ax, bx) = new_axes(2, width=7.2, height=3.2)
    rates = [r["rate_req_per_s"] for r in sweep]
    rows = []
    for axis, metric, slo_key, name in ((ax, "ttft_s", "ttft_s", "TTFT"), (bx, "tpot_s", "tpot_s", "TPOT")):
        for q, ls in (("p50", "-"), ("p90", "--"), ("p99", ":")):
            axis.plot(rates, [r["summary"][metric][q] * 1e3 for r in sweep], marker="o", ls=ls, label=f"{name} {q} "
                f"(simulated)")
        for m in data.measured:
            if m.get(metric) and m["rate_req_per_s"]:
                axis.scatter([m["rate_req_per_s"]], [m[metric]["p90"] * 1e3], marker="x", color="black", zorder=3)
            span = (m.get(f"{metric[:-2]}_derived_s") or {}).get("p90") or [None, None]
            if None not in span and m["rate_req_per_s"]:  # a derived TPOT's p90: its bounds (report_measured)
                axis.vlines([m["rate_req_per_s"]], span[0] * 1e3, span[1] * 1e3, color="black", lw=2, zorder=3)
        s = _slo_ms(data, slo_key)
        if s is not None:
            axis.axhline(s, color="#c44e52", lw=1, label=f"SLO {s:g} ms")
        axis.axvline(cap, color="grey", ls=":", label=f"capacity {cap:g} req/s")
        _shade_band(axis, cs)
        axis.set_yscale("log")
        axis.set_xlabel("request rate, req/s")
        axis.set_ylabel(f"{name}, ms")
        axis.legend(fontsize=6)
    for r in sweep:
        s = r["summary"]
        rows.append([f"{r['rate_req_per_s']:.4g}", _load_share(r["rate_req_per_s"], cs),
                     *(f"{s['ttft_s'][q] * 1e3:,.1f}" for q in ("p50", "p90", "p99")),
                     *(f"{s['tpot_s'][q] * 1e3:,.1f}" for q in ("p50", "p90", "p99")), f"{100 * r['attainment']:.1f}"])
    return Figure("latency_by_rate", "Latency percentiles against request rate",
                  "TTFT and TPOT percentiles over the requests of each simulated rate (× marks: measured p90 of the "
                  "benchmark files given; a bar: the bounds on a file's p90 TPOT derived as (E2E − TTFT)/(output − 1) "
                  "where its own TPOT field is not to be trusted, see the notes); the SLO lines and the capacity found "
                  "are "
                  "drawn. Load: the rate as a share of the capacity "
                  "found and, in brackets, of a real engine's capacity anywhere in its 80% band (a real engine "
                  "reaches these latencies at that load, not at the rate). The percentiles themselves carry no "
                  f"validated band (the validation measured errors of means only). {_band_caption(cs)}", fig,
                  ["rate, req/s", "load, % of capacity (80% band)", "TTFT p50, ms", "TTFT p90, ms", "TTFT p99, ms",
                   "TPOT p50, ms", "TPOT p90, ms", "TPOT p99, ms", "within SLO, %"],
                  rows, [data.commands["sweep_point"], "TPOT excludes the first token (vLLM calculate_metrics)"])


def goodput_by_rate(data: ReportData) -> Figure:
    cs = data.cost["simulation"]["capacity_search"]
    probes = sorted(cs["probes"], key=lambda p: p["value"])
    fig, ax = new_axes(height=3.2)
    tw = ax.twinx()
    x = [p["value"] for p in probes]
    ax.plot(x, [p["goodput_req_per_s"] for p in probes], marker="o", label="goodput (simulated)")
    ax.plot(x, [p["throughput_req_per_s"] for p in probes], ls="--", label="throughput (simulated)")
    tw.plot(x, [100 * p["attainment"] for p in probes], color="#c44e52", marker=".", lw=1, label="within SLO, %")
    tw.axhline(100 * cs["target"], color="#c44e52", ls=":", lw=1)
    for m in data.measured:
        if m["rate_req_per_s"] and m["goodput_req_per_s"] is not None:
            ax.scatter([m["rate_req_per_s"]], [m["goodput_req_per_s"]], marker="x", color="black", zorder=3)
    cap = sized_capacity(cs)
    ax.axvline(cap, color="grey", ls=":")
    _shade_band(ax, cs)
    ax.annotate(f"capacity {cap:g} req/s{capacity_band_clause(cs, caveat=False)}", (cap, 0), fontsize=7, xytext=(4, 8),
                textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("offered request rate, req/s")
    ax.set_ylabel("req/s")
    tw.set_ylabel("requests within SLO, %")
    tw.set_ylim(0, 105)
    ax.legend(fontsize=7, loc="upper left")
    tw.legend(fontsize=7, loc="center left")
    rows = [[f"{p['value']:g}", _probe_share(p), _priced_good(p), fmt(p["goodput_req_per_s"]),
             fmt(p["throughput_req_per_s"]), p["phase"]] for p in probes]  # the rate as search prints it (:g)
    rows += [[f"{m['file']} (measured)", f"{m['attainment']:.1%}",
              fmt(m["rate_req_per_s"] * m["attainment"]) if m["rate_req_per_s"] else "—", fmt(m["goodput_req_per_s"]),
              fmt(m["throughput_req_per_s"]), "—"]
             for m in data.measured]
    stopped = any(p.get("stopped_early") for p in probes)
    return Figure("goodput_by_rate", "Goodput against request rate, and the capacity found",
                  f"Every probe of the SLO-capacity search ({cs['num_requests_per_probe']:,} requests each): the "
                  f"capacity is the "
                  f"highest rate with ≥ {100 * cs['target']:.0f}% of requests within the SLO and no queue counted "
                  f"as growing; the cost ledger is priced at the rate there × its share within the SLO (the good "
                  f"req/s a replica fed that rate sustains: the priced column, the headline's good req/s at the "
                  f"capacity); the goodput column is the probe's good requests over first arrival → last finish, "
                  f"whose drain tail reads as lost time. "
                  f"{_band_caption(cs)}"
                  + (" (queue grew): the probe's queue still grew at its last arrival past what the trace's own "
                     "bursts explain, a load the engine did not sustain, so it counts as a miss whatever its share "
                     "(kvledger.analyses.serving.queue_growth.probe_queue_grew)."
                     if any(p.get("queue_grew") for p in probes) else "")
                  + (" (too short): more than half the probe's requests were still in the system at its last arrival, "
                     "too short to show the load, so it counts as a miss whatever its share "
                     "(kvledger.analyses.serving.probe_length.probe_too_short)."
                     if any(p.get("too_short") for p in probes) else "")
                  + (" lo–hi*: a probe stopped early once it could no longer reach the target (its share lies between "
                     "the two; kvledger.dynamics.early_stop)." if stopped else "")
                  + "".join(f" Warning: {w.removeprefix('warning: ')}" for w in not_steady_lines(cs)),
                  fig, ["rate, req/s", "within SLO", "good req/s priced (rate × within SLO)",
                        "goodput, req/s (first arrival → last finish)", "throughput, req/s", "probe"], rows,
                  [data.commands["capacity"], "DistServe's goodput (Zhong et al., OSDI 2024 §2)"])


def _load_share(rate: float, cs: dict) -> str:
    """ "50% (47–86%)": a rate as a share of the capacity found and of the capacity band's high and low ends."""
    cap, b = sized_capacity(cs), cs.get("error_band")
    point = f"{100 * rate / cap:.0f}%" if cap else "—"
    return f"{point} ({100 * rate / b['high']:.0f}–{100 * rate / b['low']:.0f}%)" if b and cap else point


def _priced_good(p: dict) -> str:
    """A probe's rate × its share within the SLO, the good req/s the ledger prices at the capacity (``lo–hi*`` when
    it stopped early, its share a range)."""
    st = p.get("stopped_early")
    if st:
        return f"{fmt(p['value'] * p['attainment'])}–{fmt(p['value'] * st['attainment_upper'])}*"
    return fmt(p["value"] * p["attainment"])


def _probe_share(p: dict) -> str:
    """A probe's share within the SLO as ``goodput`` prints it: ``91.3%``, ``80.5%–89.7%*`` when it stopped early,
    ``97.8% (queue grew)`` when its queue kept growing (a miss whatever its share)."""
    st = p.get("stopped_early")
    if st:
        return stopped_share_text(p["attainment"], st["attainment_upper"])
    return f"{p['attainment']:.1%}" + (" (queue grew)" if p.get("queue_grew") else
                                       " (too short)" if p.get("too_short") else "")


def _shade_band(ax, cs: dict) -> None:
    """The capacity's 80% band as a grey span on a request-rate axis (nothing when the search has none)."""
    b = cs.get("error_band")
    if b:
        ax.axvspan(b["low"], b["high"], color="grey", alpha=0.12, lw=0, label="capacity, 80% band")


def _band_caption(cs: dict) -> str:
    """The capacity's band in a sentence for a caption, or a sentence saying there is none."""
    b = cs.get("error_band")
    if not b:
        return "The capacity has no error band: no measured run stands for this regime."
    where = f" The band was {b['elsewhere']}." if b.get("elsewhere") else ""  # Band.on_gpu's clause
    return (f"Shaded: the capacity's 80% band, {b['low']:.4g}–{b['high']:.4g} req/s ({b['regime']}): where a real "
            "engine's capacity fell around such a prediction (leave-one-deployment-out saturation-throughput errors, "
            f"kvledger/ledgers/data/error_bands.json).{where}")


def engine_savings(data: ReportData) -> Figure:
    s = data.engine_savings
    names = {"engine": "continuous + paged", "static": "static batching", "contiguous": "contiguous KV"}
    colors = {"engine": "#55a868", "static": "#c44e52", "contiguous": "#8172b2"}
    keys = [k for k in names if "skipped" not in s[k]]  # a baseline that admits no request was not run
    fig, (ax, bx) = new_axes(2, width=7.2, height=3.0)
    bars = ax.bar([names[k] for k in keys], [s[k]["summary"]["throughput_output_tok_per_s"] for k in keys],
                  color=[colors[k] for k in keys])
    ax.bar_label(bars, fmt="{:,.0f}", fontsize=7)
    ax.set_ylabel("output tokens/s")
    bars = bx.bar([names[k] for k in keys], [s[k]["goodput_req_per_s"] or 0.0 for k in keys],
                  color=[colors[k] for k in keys])
    bx.bar_label(bars, fmt="{:,.2f}", fontsize=7)
    bx.set_ylabel("goodput, good req/s")
    for a in (ax, bx):
        a.tick_params(axis="x", labelsize=7)
    rows = [[s[k]["label"], fmt(s[k]["summary"]["throughput_output_tok_per_s"]), fmt(s[k]["goodput_req_per_s"]),
             f"{s[k]['summary']['ttft_s']['p90']:,.3f}", f"{s[k]['summary']['num_preemptions']:,}"] for k in keys]
    rows += [[f"ratio {r['comparison']} (baseline: {r['baseline']})", fmt(r["throughput_ratio"]),
              fmt(r["goodput_ratio"]),
              fmt(r["ttft_p90_ratio"]), ""] for r in s["ratios"]]
    skipped = [k for k in names if k not in keys]
    rows += [[f"{s[k]['label']}: not run", "", "", "", ""] for k in skipped]
    return Figure("engine_savings", "What the engine saves, compared with what",
                  f"The same requests at the capacity rate ({s['rate_req_per_s']:g} req/s) under "
                  f"{('three engines', 'two engines', 'one engine')[len(skipped)]}"
                  + ("; each ratio names its baseline." if s["ratios"] else ".")
                  + "".join(_skipped_sentence(s[k]) for k in skipped),
                  fig, ["engine", "output tok/s", "goodput, req/s", "TTFT p90, s", "preemptions"], rows,
                  [data.commands["engine_savings"]])


def _skipped_sentence(row: dict) -> str:
    """Why a baseline was not run (its settings admit no request), and the max_model_len that would let it run."""
    fit = row.get("fit_max_model_len")
    then = f"; with --max-model-len {fit} or less it would run" if fit else ""
    return f" Not run, {row['label']}: {row['skipped']}{then}."


def serving_figures(data: ReportData, keys: Collection[str] | None = None) -> list[Figure]:
    """The serving and cost figures present in ``data`` (the sweep and the engine comparison are optional; only those
    named in ``keys`` when given)."""
    from kvledger.report.figures_tiers import kv_tier_hits

    makers = [cost_by_utilization, cost_by_volume, *([latency_by_rate] if data.rate_sweep else []),
              goodput_by_rate, *([engine_savings] if data.engine_savings else []),
              *([kv_tier_hits] if data.kv_tiers else [])]
    return [m(data) for m in makers if keys is None or m.__name__ in keys]
