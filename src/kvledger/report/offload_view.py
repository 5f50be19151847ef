"""Terminal view of ``kvledger offload``: the tier plan, then the sessions simulated with and without the host tier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.report.kv_tiers_view import render_kv_tiers
from kvledger.report.sim_tiers_view import resume_line
from kvledger.report.step_cost_view import step_cost_lines, step_cost_source_line
from kvledger.report.tables import table
from kvledger.report.tier_verdict import tier_verdict_line

if TYPE_CHECKING:
    from kvledger.analyses.judgments.offload import OffloadReport

__all__ = ["render_offload", "tier_verdict_line", "replicas_label"]


def model_default_line(d: dict, gpu: str, engine: str) -> str:
    """The plan's default max_model_len (the model's context) against the session cap the run took instead."""
    head = (f"the plan's default max_model_len is the model's {d['max_model_len_tokens']:,} tokens (what `kvledger "
            f"plan` and {engine} take without --max-model-len)")
    if d["verdict"] == "fits":
        return f"{head}; it starts on the {gpu} too: {d['message'].split('; only ')[0]}"  # no fixes listed here
    return f"{head}; it would not start on the {gpu}: {d['message']}"


def render_offload(rep: OffloadReport, console) -> None:
    w, s = rep.workload, rep.stats
    console.print(tier_verdict_line(rep.judgment, workload=rep.workload["kind"]))
    rules = rep.engine_version if rep.engine_version.endswith(" rules") else f"{rep.engine_version} rules"
    console.print(f"[bold]Host KV tier: {rep.model} on {rep.gpu}[/] — {rep.engine} {rules}")  # SGLang's says rules
    for line in step_cost_lines(rep.step_cost) if rep.step_cost else ():  # as simulate prints its step cost
        console.print(line)
    render_kv_tiers(rep.tiers, console)
    console.print(f"Sessions: {w['num_sessions']:,} {w['kind']} sessions ({w['num_turns']:,} turns), "
                  f"{w['session_rate_per_s']:g} starts/s, seed {w['seed']} (distributions: sessions.py); context cap "
                  f"{w['context_cap_tokens']:,} tokens ({w['context_cap_source']})")
    if w.get("model_default"):  # kvledger's session cap was used: what the plan's default length would do
        console.print(f"  {model_default_line(w['model_default'], rep.gpu, rep.engine)}")
    if w.get("left_out_note"):  # the draw's sessions that had no turn to send (analyses.serving.session_notes)
        console.print(f"  {w['left_out_note']}")
    g = rep.more_gpus
    one = replicas_label(1, rep.gpus_per_replica)
    cols = ("figure", f"{one} + host tier", one) + ((f"{_more_label(g)}, no tier",) if g else ())
    t = table("Simulated sessions", *cols)

    def row(name, a, b, c=""):
        t.add_row(name, a, b, *((c,) if g else ()))

    row("prefix hit rate, HBM", f"{s.hbm_hit_rate:.3f}", f"{rep.hbm_hit_rate_without:.3f}",
        f"{g['hbm_hit_rate']:.3f}" if g else "")
    row("prefix hit rate, host", f"{s.host_hit_rate:.3f}", "—", "—")
    row("tokens served from host", f"{s.host_hit_tokens:,}", "—", "—")
    if s.host_unserved_tokens:  # loaded, then evicted before admission and recomputed (load_hold.py)
        row("tokens loaded from host, unserved", f"{s.host_unserved_tokens:,}", "—", "—")
    row("load time (Σ, served + unserved), load bandwidth (all tiers' bytes ÷ run)",
        f"{s.host_load_s:.3f} s, {s.load_bandwidth_bytes_per_s / 1e9:.3g} GB/s" if s.host_load_s else "no loads",
        "—", "—")
    name, per = rep.unit
    planned = rep.tiers.tier("host_dram")  # SGLang's plan counts pages, its simulated tier the workload's segments
    same = planned is None or (planned.unit_name, planned.unit_tokens) == (name, per)
    table_says = "as the tier table's units column" if same else \
        f"the tier table counts {planned.unit_name}s of {planned.unit_tokens:,}: compare the tokens"
    row(f"host tier {name}s held (peak / capacity; {name}s of {per:,} tokens, {table_says})",
        f"{s.peak_host_units:,} / {s.host_capacity_units:,} ({s.host_capacity_units * per:,} tokens)", "—", "—")
    _rule_rows(s, row, f"{name}s")
    a, b = rep.ttft_s_with, rep.ttft_s_without
    for q in ("mean", "p50", "p90", "p99"):
        row(f"TTFT {q}", f"{a[q] * 1e3:,.1f} ms", f"{b[q] * 1e3:,.1f} ms",
            f"{g['ttft_s'][q] * 1e3:,.1f} ms" if g else "")
    console.print(t)
    for line in ([resume_line(s.resume, rep.engine)] if s.resume is not None else []) + _rules_line(rep.rules):
        console.print(line)
    if rep.overload:
        console.print(f"[bold red]{rep.overload['note']}[/]")
    if rep.cost:
        console.print(_cost_line(rep.cost, one, g))
    if rep.step_cost:  # the step cost named above the tables: how it prices a step
        console.print(step_cost_source_line(rep.step_cost))


def _rules_line(rules: dict) -> list[str]:
    """The host-tier rules the run turned on, in one line (none: [])."""
    return ["Host-tier rules: " + "; ".join(f"{k} {v.get('value', '')} ({v['source']})".replace("  ", " ")
                                            for k, v in rules.items())] if rules else []


def _cost_line(c: dict, one: str, g: dict | None) -> str:
    """The cost per hour of the replica with its host memory, and of the larger deployment without the tier."""
    line = (f"Cost per hour ({c['source']}): {one} ${c['gpu_usd_per_hour']:,.2f} + host memory "
            f"{c['host_memory_gib']:,.0f} GiB ${c['host_memory_usd_per_hour']:,.2f} = "
            f"${c['with_tier_usd_per_hour']:,.2f}")
    if "more_gpus_usd_per_hour" in c:
        line += f"; {_more_label(g)} without the tier ${c['more_gpus_usd_per_hour']:,.2f}"
    return line


def replicas_label(num_replicas: int, gpus_per_replica: int) -> str:
    """"1 replica (2 GPUs)", "2 replicas (4 GPUs)", "1 replica (1 GPU)": replicas with all their GPUs."""
    gpus = num_replicas * gpus_per_replica
    return (f"{num_replicas} replica{'s' if num_replicas != 1 else ''} "
            f"({gpus} GPU{'s' if gpus != 1 else ''})")


def _more_label(g: dict) -> str:
    """The label of ``more_gpus``' replicas (older reports without ``num_replicas`` counted replicas as num_gpus)."""
    n = g.get("num_replicas", g["num_gpus"])
    return replicas_label(n, g.get("gpus_per_replica", g["num_gpus"] // n))


def _rule_rows(s, row, units: str) -> None:
    """Rows for the opt-in rules that ran: vLLM's store gate, HiCache write_back, the disk tier (``units``: what the
    host and disk tiers count, plural)."""
    if s.stores_skipped is not None:
        row("stores skipped (store_threshold)", f"{s.stores_skipped:,} blocks", "—", "—")
    if s.write_back_s is not None:
        row("write-back on eviction (on steps)", f"{s.write_back_tokens:,} tokens, {s.write_back_s:.3f} s", "—", "—")
    for name, d in (("disk", s.disk), ("remote", s.remote)):
        if d is None:
            continue
        row(f"prefix hit rate, {name}", f"{d.hit_rate:.3f}", "—", "—")
        row(f"tokens served from {name} (GiB read, served + unserved)",
            f"{d.hit_tokens:,} ({d.loaded_bytes / 2**30:,.2f} GiB)", "—", "—")
        if d.unserved_tokens:
            row(f"tokens loaded from {name}, unserved", f"{d.unserved_tokens:,}", "—", "—")
        row(f"{name} load time (Σ, served + unserved, on TTFT)",
            f"{d.load_s:.3f} s at {d.read_bytes_per_s / 1e9:g} GB/s", "—", "—")
        row(f"{name} {units} stored / evicted / capacity (as the host tier's)", f"{d.stored_units:,} / "
            f"{d.evicted_units:,} / {d.capacity_units:,}", "—", "—")
