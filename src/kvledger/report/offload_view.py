"""Terminal view of ``kvledger offload``: the tier plan, then the sessions simulated with and without the host tier."""

from __future__ import annotations

from kvledger.report.kv_tiers_view import render_kv_tiers
from kvledger.report.tables import table

__all__ = ["render_offload"]


def render_offload(rep, console) -> None:
    w, s = rep.workload, rep.stats
    console.print(f"[bold]Host KV tier: {rep.model} on {rep.gpu}[/] — {rep.engine}")
    render_kv_tiers(rep.tiers, console)
    console.print(f"Sessions: {w['num_sessions']:,} {w['kind']} sessions ({w['num_turns']:,} turns), "
                  f"{w['session_rate_per_s']:g} starts/s, seed {w['seed']} (distributions: sessions.py)")
    t = table("Simulated (all replicas)", "figure", "with the host tier", "without")
    t.add_row("prefix hit rate, HBM", f"{s.hbm_hit_rate:.3f}", f"{rep.hbm_hit_rate_without:.3f}")
    t.add_row("prefix hit rate, host", f"{s.host_hit_rate:.3f}", "—")
    t.add_row("tokens loaded from host", f"{s.host_hit_tokens:,}", "—")
    t.add_row("load time (Σ), load bandwidth", f"{s.host_load_s:.3f} s, {s.load_bandwidth_bytes_per_s / 1e9:.2f} GB/s",
              "—")
    t.add_row("host units held (peak / capacity)", f"{s.peak_host_units:,} / {s.host_capacity_units:,}", "—")
    a, b = rep.ttft_s_with, rep.ttft_s_without
    for q in ("mean", "p50", "p90", "p99"):
        t.add_row(f"TTFT {q}", f"{a[q] * 1e3:,.1f} ms", f"{b[q] * 1e3:,.1f} ms")
    console.print(t)
