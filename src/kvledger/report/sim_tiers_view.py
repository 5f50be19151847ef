"""Terminal view of ``kvledger simulate`` with a host KV tier: the tiers (capacity, break-even), then per tier the
prefix hits, loads, load bandwidth and host occupancy, and TTFT with and without the tier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.analyses.serving.sim_tier_report import HbmTierRow, HostTierRow, StorageTierRow, TierRow
from kvledger.report.kv_tiers_view import render_kv_tiers
from kvledger.report.tables import table
from kvledger.report.tier_verdict import tier_verdict_line

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_tier_report import SimTierReport

__all__ = ["render_sim_tiers", "session_shape_line", "resume_line"]


def session_shape_line(w: dict) -> str:
    """The stated distributions a synthetic session workload was drawn from (``SessionShape``), in one line."""
    h = w["shape"]
    return (f"[bold]sessions[/]: {w['num_sessions']:,} {w['kind']} sessions drawn from stated distributions (not "
            f"fits; {w['source']}): turns 1 + Geometric, mean {h['mean_turns']:g} (≤ {h['max_turns']:,}); lognormal "
            f"lengths, σ {h['length_sigma']:g}, medians: first input {h['first_input_median_tokens']:,}, later inputs "
            f"{h['input_median_tokens']:,}, outputs {h['output_median_tokens']:,} tokens; think time Exponential, mean "
            f"{h['think_mean_s']:g} s; shared system prompt {h['system_tokens']:,} tokens; a session stops before "
            f"{h['max_context_tokens']:,} tokens; starts Poisson at {w['session_rate_per_s']:g}/s; prefix segments "
            f"of {w['segment_tokens']} tokens")


BW = "load bandwidth (host: bytes loaded ÷ run time; disk, remote: read rate)"


def _rows(r: TierRow) -> list[tuple[str, str]]:
    """(figure, cell) of one tier; HBM loads nothing, so its load figures read "—"."""
    out = [("hit rate (share of prompt tokens)", f"{r.hit_rate:.3f}"), ("tokens hit", f"{r.hit_tokens:,}")]
    if isinstance(r, HbmTierRow):
        return out + [(name, "—") for name in ("tokens loaded (served + unserved)", "bytes loaded (served + unserved)",
                                               "load time (Σ, served + unserved)", BW,
                                               "occupancy (peak / capacity)", "stored / evicted")]
    if isinstance(r, StorageTierRow):  # the level's read bandwidth (a setting), its capacity; no occupancy record
        bw = f"reads at {r.read_bytes_per_s / 1e9:,.2f} GB/s"
        held = f"— / {r.capacity_units:,} {r.unit_name}s × {r.unit_tokens:,} tokens"
    else:
        assert isinstance(r, HostTierRow)
        bw = f"{r.load_bandwidth_bytes_per_s / 1e9:,.2f} GB/s"
        held = f"{r.peak_units:,} / {r.capacity_units:,} {r.unit_name}s × {r.unit_tokens:,} tokens"
    unserved = r.unserved_tokens or 0  # loads evicted before admission and recomputed (load_hold.py)
    resumed = r.loaded_tokens - r.hit_tokens - unserved  # resumes' reloads (resume_stats.py)
    parts = f"{r.hit_tokens:,} + {unserved:,}" + (f" + {resumed:,} on resume" if resumed else "")
    return out + [("tokens loaded (served + unserved)", f"{r.loaded_tokens:,}"
                   + (f" ({parts})" if unserved or resumed else "")),
                  ("bytes loaded (served + unserved)", f"{r.loaded_bytes / 2**30:,.2f} GiB"),
                  ("load time (Σ, served + unserved)", f"{r.load_s:.3f} s"),
                  (BW, bw),
                  ("occupancy (peak / capacity)", held),
                  ("stored / evicted", f"{r.stored_units:,} / {r.evicted_units:,} {r.unit_name}s")]


def render_sim_tiers(rep: SimTierReport, console, sessions: bool = True, workload: str = "") -> None:
    """The tier plan, the per-tier table and the TTFT comparison; every figure with its unit and source
    (``sessions``: a session workload, for the verdict's hint; ``workload``: its preset)."""
    console.print(f"[bold]Host KV tier[/] — {rep.engine} {rep.engine_version} rules: {rep.rule}")
    render_kv_tiers(rep.plan, console)
    t = table(f"Prefix hits and loads per tier ({rep.prompt_tokens:,} prompt tokens at first admission; "
              "kvledger.dynamics.offload_sim)", "figure", *(r.tier for r in rep.per_tier))
    cols = [_rows(r) for r in rep.per_tier]
    for i, (name, _) in enumerate(cols[0]):
        t.add_row(name, *(c[i][1] for c in cols))
    console.print(t)
    if rep.resume is not None:
        console.print(resume_line(rep.resume, rep.engine))
    a, b = rep.ttft_s_with_tier, rep.ttft_s_without_tier
    t = table("TTFT with and without the host tier (the same run simulated twice)", "figure", "with the tier",
              "without")
    t.add_row("prefix hit rate, HBM", f"{rep.per_tier[0].hit_rate:.3f}", f"{rep.hbm_hit_rate_without_tier:.3f}")
    for q, x, y in (("mean", a.mean, b.mean), ("p50", a.p50, b.p50), ("p90", a.p90, b.p90), ("p99", a.p99, b.p99)):
        t.add_row(f"TTFT {q}", *("—" if v is None else f"{v * 1e3:,.1f} ms" for v in (x, y)))  # None: none served
    console.print(t)
    if rep.rules:
        console.print("Host-tier rules: " + "; ".join(f"{k} {v.get('value', '')} ({v['source']})".replace("  ", " ")
                                                      for k, v in rep.rules.items()))
    console.print(tier_verdict_line(rep.judgment, sessions, workload).replace(" (simulated below)", ""))


def resume_line(r, engine: str = "vllm") -> str:
    """Where the KV of preempted requests came from when they resumed (``ResumeStats``), tokens, per tier; the
    engine's rule (``engine``: "vllm" or "sglang") in words."""
    lost = f" ({r.host_unserved_tokens:,} of them loaded, then evicted before use)" if r.host_unserved_tokens else ""
    lower = "" if r.lower_reloaded_tokens is None else \
        f", {r.lower_reloaded_tokens:,} from the tiers below it (disk, remote)"
    rule = ("SGLang matches a retracted request again in its radix tree, which kept what its prefill computed, and "
            "the host tier" if engine == "sglang" else "vLLM looks a resumed request up again in HBM and the KV "
            "connector")
    return (f"on resume after preemption ({r.resumes:,} resumes, {r.resume_tokens:,} tokens of prompt + generated "
            f"KV): {r.hbm_hit_tokens:,} found in HBM's prefix cache, {r.host_reloaded_tokens:,} reloaded from the "
            f"host tier{lower}, {r.recomputed_tokens:,} recomputed{lost} ({rule}; not in the hit rates above, which "
            "count first arrivals)")
