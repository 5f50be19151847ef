"""The self-contained HTML decision report: the answer first, then build-or-buy, what the engine saves, the KV
bottleneck and latency against load, each figure as inline SVG beside its table and sources.

One file, no scripts, no fonts or styles fetched from anywhere: it opens offline and can be mailed.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from html import escape
from types import SimpleNamespace
from typing import Any

from kvledger.analyses.serving.report_data import ReportData
from kvledger.analyses.serving.sim_document import shared_prefix_text
from kvledger.catalog.prices import api_prices
from kvledger.ledgers.amounts import unit_noun, units_text
from kvledger.ledgers.api_cost import mix_words
from kvledger.ledgers.decision_notes import band_end_text, effective_cost_line
from kvledger.ledgers.factor_rows import peak_cap_text
from kvledger.ledgers.items import dated
from kvledger.report.decision_view import capacity_band_clause, not_steady_lines, sized_capacity, sized_run_figures
from kvledger.report.dp_layout import dp_layout_text, per_rank_words
from kvledger.report.figure import Figure, fmt, svg_of
from kvledger.units import fmt_plain

__all__ = ["report_figures", "drawn_figures", "render_html", "SECTIONS", "TIER_SECTION", "api_pricing_words",
           "rests_on_text", "break_even_text"]

SECTIONS = (
    ("build-or-buy", "Build or buy", ("cost_by_utilization", "cost_by_volume")),
    ("engine-savings", "What the engine saves, compared with what", ("engine_savings",)),
    ("kv-bottleneck", "The KV bottleneck: capacity and bandwidth", ("memory_waterfall", "concurrency_by_context",
                                                                    "decode_roofline")),
    ("latency", "Latency and goodput against load", ("latency_by_rate", "goodput_by_rate")),
)
TIER_SECTION = ("kv-tiers", "KV tiers and prefix reuse at the capacity", ("kv_tier_hits",))
"""Drawn after ``SECTIONS`` with KV tier flags or a document pool only (``ReportData.kv_tiers``)."""

_CSS = (
    "\n"
    "body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;"
    "color:#222;padding:0 1em}\n"
    "h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}"
    "h3{font-size:1.05em;margin:.2em 0}\n"
    "table{border-collapse:collapse;font-size:.8em;margin:.4em 0}"
    "td,th{border:1px solid #ddd;padding:2px 6px;text-align:right;vertical-align:top}\n"
    "td:first-child,th:first-child,td.t{text-align:left}th{background:#f4f4f4}\n"
    ".fig{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:1em;align-items:start;margin:1.2em 0;"
    "border-top:1px dashed #e4e4e4;padding-top:.6em}\n"
    ".plot svg{width:100%;height:auto}.tbl{overflow-x:auto}"
    ".sources{font-size:.75em;color:#555;margin:.3em 0 0 1em;padding:0}\n"
    ".answer{background:#f6f9fc;border-left:4px solid #4c72b0;padding:.6em 1em}.note{font-size:.85em;color:#555}\n"
    "code{font-size:.85em;word-break:break-all}\n"
)


def _fraction_words(plan: dict) -> str:
    """``, mem_fraction_static 0.5 (given)`` for the engine line under SGLang (the plan's fraction, given or SGLang's
    default for the release and GPU); empty under vLLM, whose line has never carried its fraction."""
    m = plan["memory"]
    if m.get("engine") != "sglang":
        return ""
    how = "given" if plan["settings"].get("mem_fraction_static") is not None else "SGLang's default"
    return f", {m['fraction_name']} {m['fraction']:g} ({how})"


def _step_cost_words(sc: dict) -> str:
    """The step cost as the header names it: with the GPU profile that priced the roofline, when one did
    (``priced_by``, set by ``analyses/serving/step_cost_choice.make_step_cost``), and the weights' --quantization."""
    words = f"{sc['name']}, priced by {sc['priced_by']}" if sc.get("priced_by") else str(sc["name"])
    return words + (f"; {sc['weights']}" if sc.get("weights") else "")  # --quantization fp8 (online_quant.py)


def report_figures(data: ReportData, keys: Collection[str] | None = None) -> list[Figure]:
    """Every figure of the report, from the data of ``build_report_data`` (only those named in ``keys`` when given)."""
    from kvledger.report.figures_kv import kv_figures
    from kvledger.report.figures_serving import serving_figures

    return kv_figures(data.plan, keys) + serving_figures(data, keys)


def drawn_figures(data: ReportData, keys: Collection[str] | None = None) -> list[Figure]:
    """``report_figures`` drawn to SVG (``Figure.drawn``): what a second process returns."""
    return [f.drawn() for f in report_figures(data, keys)]


_NUMERIC = re.compile(r"^[−+\-$]?[\d,.]+(e[+-]?\d+)?( ?%)?( \([\d,.]+–[\d,.]+\))?$")  # "3.44 (3.42–3.46)" too


def _cell(c: Any) -> str:
    text = str(c)
    cls = "" if _NUMERIC.match(text) or text == "—" else ' class="t"'
    return f"<td{cls}>{escape(text)}</td>"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    # engine flag names may break after "_"
    head = "".join(f"<th>{escape(h).replace('_', '_<wbr>')}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(f: Figure) -> str:
    src = "".join(f"<li>{escape(s)}</li>" for s in f.sources if s)
    svg = f.svg if f.svg is not None else svg_of(f.fig)
    return (f'<section class="fig" id="fig-{f.key}" data-figure="{f.key}"><div class="plot">{svg}</div>'
            f'<div class="tbl"><h3>{escape(f.title)}</h3><p '
            f'class="note">{escape(f.caption)}</p>{_table(f.headers, f.rows)}'
            f'<p class="note">Sources:</p><ul class="sources">{src}</ul></div></section>')


def _answer(data: ReportData) -> str:
    c, t, inp = data.cost, data.cost["totals"], data.inputs
    cs = c["simulation"]["capacity_search"]
    good, share, whose = sized_run_figures(cs)  # at the rate sized on: the run at the bound where that caps it
    mml = data.plan["memory"]["max_model_len"]
    conc = {r["context_tokens"]: (per_rank_words(data.plan, r["context_tokens"], f"{r['max_requests']:,}")
                                  if r["within_max_model_len"] else f"none (beyond max_model_len {mml:,})")
            for r in data.plan["concurrency"]}  # the plan's one pool; under DP the ranks' in all (dp_layout.py)
    lines = [h.strip() for h in c.get("headline") or [f"Verdict: {c['verdict']}."]]
    if c.get("decision") is not None:
        lines.append(rests_on_text(c["decision"]))
    lines += [
        f"SLO capacity of one deployment unit ({c['inputs']['num_gpus']}× GPU): {fmt_plain(sized_capacity(cs))} "
        f"req/s{capacity_band_clause(cs)} with "
        f"≥ {100 * cs['target']:.0f}% of requests within {inp['slo_text']}; sustained "
        f"there {good:,.2f} good req/s (the rate × its share within the SLO)"
        + (f", {share:.1%} of requests within the SLO{whose}." if whose else "."),
        *(w[0].upper() + w[1:] for w in not_steady_lines(cs)),
        c.get("secondary") or "",
        f"Self-hosted at goodput: ${t['self_host_usd_per_mtok_input']:,.4f} per 1M input and "
        f"${t['self_host_usd_per_mtok_output']:,.4f} per 1M output tokens; API {c['inputs']['api_price']}: "
        f"${t['api_usd_per_mtok_input']:,.4f} / ${t['api_usd_per_mtok_output']:,.4f} "
        f"{api_pricing_words(c['inputs'])}.",
        effective_cost_line(c["sticker"]) if "throughput_output_tok_per_s" in c["sticker"] else "",
        break_even_text(c),
        *([f"Error band: {c['error_band']['text']}."] if c.get("error_band") else []),
        _concurrency_line(conc, inp.get("workload_contexts")),
        _kv_range_line(data.plan["memory"]),
    ]
    lines = [x for x in lines if x]
    return '<div class="answer" id="answer">' + "".join(f"<p>{escape(x)}</p>" for x in lines) + "</div>"


def _concurrency_line(conc: dict[int, str], wl: dict[str, int] | None) -> str:
    """Requests the KV pool holds at once (the plan's rows): at the workload's mean and max prompt + output
    (``report_workload.workload_contexts``) where it has its own lengths, else at the fixed 8K and 128K levels."""
    if not wl:
        return (f"Concurrency: {conc.get(8192, '—')} requests at 8K tokens, {conc.get(131072, '—')} at 128K "
                "(KV capacity).")
    mean, top = wl["mean_tokens"], wl["max_tokens"]
    at = (f"{conc.get(mean, '—')} requests at its {mean:,} tokens (every request's)" if mean == top else
          f"{conc.get(mean, '—')} requests at its mean {mean:,} tokens, {conc.get(top, '—')} at its max {top:,}")
    return f"Concurrency at this workload's lengths (prompt + output per request): {at} (KV capacity)."


def _kv_range_line(m: dict[str, Any]) -> str:
    """Available KV and blocks per GPU with the plan's range, or "" when the plan has none (no fitted term)."""
    rng = m.get("ranges", {})
    a, b = rng.get("available_kv_bytes"), rng.get("num_gpu_blocks")
    if not a or f"{a[0] / 2**30:,.2f}" == f"{a[1] / 2**30:,.2f}":
        return ""
    return (f"Available KV {m['available_kv_bytes'] / 2**30:,.2f} GiB per GPU ({max(0.0, a[0]) / 2**30:,.2f}–"
            f"{a[1] / 2**30:,.2f}), {m['num_gpu_blocks']:,} blocks ({b[0]:,}–{b[1]:,}): the range from each fitted or "
            f"version-dependent term's low and high (plan --verbose names them).")


def rests_on_text(d: dict[str, Any]) -> str:
    """"Rests on: …; the verdict holds within ×0.82–×1.12 capacity (…)." from the cost JSON's ``decision``: what the
    answer rests on (price rows' confidence, rules not validated on this GPU, an uncalibrated step cost) and whether
    the verdict holds at both ends of the capacity band (the report's answer and the web app's)."""
    held = "holds" if d.get("holds_across_capacity", d["holds_within_band"]) else "flips"  # a cached-price condition
    ends = "; ".join(band_end_text(SimpleNamespace(**e)) for e in d.get("band_ends") or [])
    low, high = d.get("capacity_band_low", 1 - d["capacity_band"]), d.get("capacity_band_high", 1 + d["capacity_band"])
    band = f"×{low:.2f}–×{high:.2f}" if high is not None else f"×{low:.2f} or more"  # None: bounded below only
    return (f"Rests on: {'; '.join(d['rests_on']) or 'nothing flagged'}; the verdict {held} within {band} capacity"
            + (f" ({ends})" if ends else "") + ".")


def break_even_text(c: dict[str, Any]) -> str:
    """The break-even utilization and volume in one sentence, from the cost JSON (the report's answer and the web
    app's)."""
    bu, bv = c["break_even_utilization"], c["break_even_volume"]
    n, e = bu.get("replicas"), bv.get("engine_replicas_per_unit", 1)  # --replicas N: deployment units of N engines
    # one unit's, carrying the whole people line, or the volume's units, sharing it (as cost prints it)
    of = ("" if not n else f" (one {unit_noun(e)}, carrying the whole people line)" if n == 1 else
          f" (the {units_text(n, e)} this volume needs, sharing the people line)")
    u = (
        f"break-even utilization{of} {fmt(100 * bu['utilization'])}%{peak_cap_text(bu)}"
        if bu.get("utilization") is not None and bu["utilization"] <= 1.0  # out of the peak's reach: peak_cap_text
        else f"no utilization up to 100%{of} breaks even"
        + (f" (a larger volume, on more {unit_noun(e)}s, can: below)" if bv.get("requests_per_month") is not None
           else "")
    )
    v = (
        f"break-even volume {'at least ' if bv.get('api_is_upper_bound') else ''}{fmt(bv['requests_per_month'])} "
        f"requests per month{_on_units(bv.get('replicas_at_break_even'), n, e)}"
        if bv.get("requests_per_month") is not None
        else f"no break-even volume: {bv.get('reason', '')}"
    )
    first = bv.get("first_cheaper_requests_per_month")
    if first is not None and bv.get("requests_per_month") and first < bv["requests_per_month"] * (1 - 1e-9):
        v += (f" (self-hosting is first cheaper at {fmt(first)}, then on and off as {unit_noun(e)}s are added, and at "
              "every volume above it)")
    return f"{u[0].upper()}{u[1:]}; {v}."


def _on_units(at: int | None, n: int | None, e: int) -> str:
    """`` (on 1 replica)``: the break-even volume's own count, where it is not the utilization's (the volume's)."""
    return "" if at is None or at == (n or 1) else f" (on {units_text(at, e)})"


def api_pricing_words(inputs: dict[str, Any]) -> str:
    """How the API side was priced, from the cost payload's ``inputs`` (its ``api_mix`` and ``api_price`` row):
    ``ledgers.api_cost.mix_words`` — only the discounts the mix asked for, and a cache-write premium as one."""
    mix = inputs.get("api_mix") or {}
    row = next((p for p in api_prices() if p.key == inputs.get("api_price")), None)
    return mix_words(mix.get("batch_share", 0) > 0, mix.get("cache_hit_rate", 0) > 0,
                     mix.get("cache_write_rate", 0) > 0, row)


def _build_or_buy_tables(data: ReportData) -> str:
    c = data.cost
    t = c["totals"]
    rows = [["self-hosted, at goodput", fmt(t["self_host_usd_per_mtok_input"], 4),
             fmt(t["self_host_usd_per_mtok_output"], 4)],
            [f"API {c['inputs']['api_price']} ({api_pricing_words(c['inputs'])})", fmt(t["api_usd_per_mtok_input"], 4),
             fmt(t["api_usd_per_mtok_output"], 4)],
            ["self-hosted, sticker (all completed tokens)", fmt(c["sticker"]["usd_per_mtok_input"], 4),
             fmt(c["sticker"]["usd_per_mtok_output"], 4)]]
    f = [[x["factor"], x["value"].replace("_", " "), x["effect"]] for x in c["factors"]]  # not_required: in words
    items = [[led["name"], it["name"], f"{it['quantity']:.6g} {it['unit']}", f"{it['unit_price_usd']:.6g}",
              f"{it['amount_usd']:.6g}", dated(it["source"], it.get("as_of"))]
             for led in c["ledgers"].values() for it in led["items"]]  # each price's date, as the CLI prints it
    bills = _bills_table(c.get("decision"), c["break_even_volume"].get("engine_replicas_per_unit", 1))
    return (bills + "<h3>USD per 1M tokens</h3>" + _table(["side", "USD / 1M input", "USD / 1M output"], rows)
            + "<h3>The four deciding factors (stated inputs)</h3>" + _table(["factor", "value", "effect"], f)
            + "<h3>Line items</h3>" + _table(["ledger", "item", "quantity", "unit price, USD", "amount, USD", "source"],
                                             items)
            + f'<p class="note">GPU price: {escape(data.inputs["gpu_price_choice"])}. Capacity basis: '
              f'{escape(c["capacity_basis"]["text"])}</p>')


def _bills_table(d: dict[str, Any] | None, engines: int = 1) -> str:
    """The monthly bills for the volume: self-hosted (rented, bought when priced) and every API row, cheapest first;
    ``engines``: the engine replicas per sized unit (``--replicas N``: the units are deployment units)."""
    if d is None:
        return ""
    rows = [["self-hosted, rented GPUs", f"{d['self_host_rent']['total_usd']:,.2f}",
             units_text(d["replicas"], engines)]]
    if d.get("self_host_buy"):
        rows.append(["self-hosted, bought GPUs", f"{d['self_host_buy']['total_usd']:,.2f}",
                     "capex amortized + power + hosting"])
    rows += [[f"API {a['key']}", f"{a['usd_per_month']:,.2f}", ("same model" if a["same_model"] else "another model")
              + f", {a['confidence']} confidence"] for a in d["api_options"]]
    return "<h3>Monthly bills for the volume</h3>" + _table(["option", "USD per month", "note"], rows)


def render_html(data: ReportData, figures: list[Figure]) -> str:
    """The whole report as one HTML document (inline SVG figures, inline CSS, no scripts)."""
    by_key = {f.key: f for f in figures}
    inp, sim = data.inputs, data.cost["simulation"]
    title = f"kvledger report: {sim['model']} on {sim['num_gpus']}× {sim['gpu']}"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta "
             f"charset='utf-8'><title>{escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{escape(title)}</h1>",
             f"<p class='note'>Traffic: {escape(sim['workload']['trace'] + shared_prefix_text(sim['workload']))}, "
             f"{inp['num_requests']:,} requests per "
             f"simulation (seed {inp['seed']}); "
             f"SLO {escape(inp['slo_text'])}; engine {escape(sim['plan']['engine'])} "
             f"{escape(sim['plan']['engine_version'])}, "
             f"TP {sim['tp']}, max_model_len {sim['engine']['max_model_len']:,}, max_num_seqs "
             f"{sim['engine']['max_num_seqs']:,}{escape(_fraction_words(data.plan))}"
             f"{escape(dp_layout_text(data.plan, sim['model']))}; "
             f"step cost: {escape(_step_cost_words(sim['step_cost']))}.</p>",
             _answer(data)]
    for anchor, heading, keys in (*SECTIONS, TIER_SECTION):
        figs = [by_key[k] for k in keys if k in by_key]
        if not figs:
            continue
        parts.append(f"<h2 id='{anchor}'>{escape(heading)}</h2>")
        if anchor == "build-or-buy":
            parts.append(_build_or_buy_tables(data))
        parts.extend(_figure(f) for f in figs)
    notes = [*data.cost["notes"], *data.cost["capacity_basis"]["notes"], *sim["notes"],
             *(f"{m['file']}: {n}" for m in data.measured for n in m.get("notes", ()))]
    parts.append("<h2 id='sources'>Commands behind each section</h2><p class='note'>Each section's numbers equal the "
                 "--json of:</p>"
                 + _table(["section", "command"], [[k, v] for k, v in data.commands.items()]))
    if notes:
        parts.append("<h3>Notes</h3><ul class='sources'>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
