"""Terminal view of ``kvledger spec-decode``: rows over batch, the flip concurrency by context, the simulator sweep and
the verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.report.step_cost_view import step_cost_lines, step_cost_source_line
from kvledger.report.tables import print_verdict, table

if TYPE_CHECKING:
    from kvledger.analyses.judgments.spec_decode_summary import SpecReport

__all__ = ['render_spec_decode']


def _print_header(r: SpecReport, console) -> None:
    """The title line, the default drafter's caveat and the warnings (the node rule, a draft no smaller than the
    target), before any table."""
    sm = r.summary
    console.print(f"[bold]Speculative decoding: {r.model} on {r.gpu}[/] — TP {r.settings['tp']}, k = "
                  f"{sm.draft_tokens}, "
                  f"α = {sm.acceptance:g}, draft: {sm.draft.name}")
    if sm.draft.kind == "free":  # the default drafter: said at once, since it is the most optimistic case
        console.print(f"draft: {sm.draft.name}: drafting costs no GPU work, the most optimistic case; --draft-model "
                      "or --draft-cost-fraction prices a real drafter")
    for note in (n for n in r.notes if n.startswith("warning:")):  # said first, and again among the notes
        console.print(note)


def render_spec_decode(r: SpecReport, console) -> None:
    from kvledger.analyses.judgments.spec_sim import sweep_sentence
    from kvledger.units import fmt_bytes, fmt_duration, fmt_ratio

    sm = r.summary
    _print_header(r, console)
    for line in step_cost_lines(r.step_cost) if r.step_cost else ():  # as simulate prints its step cost
        console.print(line)
    t = table(f"One round per sequence vs plain decode at {r.context_tokens:,} tokens of context (per GPU, the step "
              "cost above)",
              "batch", "plain step", "verify k+1", "draft k", "round", "tokens/round", "speed-up", "tok/s plain → spec",
              "GEMMs plain/verify", "fits")
    for x in r.rows:
        t.add_row(f"{x.batch:,}", fmt_duration(x.base_step_s), fmt_duration(x.verify_step_s), fmt_duration(x.draft_s),
                  fmt_duration(x.round_s), f"{x.tokens_per_round:.2f}", fmt_ratio(x.speedup),
                  f"{x.base_tok_per_s:,.0f} → {x.spec_tok_per_s:,.0f}", f"{x.base_bound}/{x.verify_bound}",
                      "yes" if x.fits else "no")
    console.print(t)
    t = table("Where the gain turns into a loss", "context", "flip batch (speed-up < 1)", "spec-decode pool holds",
              "flip within the pool")
    for f in r.flips:
        t.add_row(f"{f['context_tokens']:,}",
                  "none up to max_num_seqs" if f["flip_batch"] is None else f"{f['flip_batch']:,}"
                  + ("" if f.get("gain_again_batch") is None else f" (a gain again from {f['gain_again_batch']:,}"
                     + ("" if f.get("loss_again_batch") is None else f", a loss from {f['loss_again_batch']:,}")
                     + ")"),
                  f"{f['spec_pool_max_batch']:,} requests",
                  "— (no flip)" if f["flip_batch"] is None else "yes" if f["within_pool"] else "no: beyond the pool")
    console.print(t)
    if sm.draft.kind == "model":
        console.print(f"draft memory: {fmt_bytes(sm.draft_weight_bytes_per_gpu)} weights + "
                      f"{sm.draft_kv_bytes_per_token_per_gpu:,.0f} B/token KV "
                      f"per GPU; pool {sm.pool_blocks_without_draft:,} → {sm.pool_blocks_with_draft:,} blocks")
    if r.simulation:
        sim = r.simulation
        t = table(f"Simulator sweep ({sim.num_requests} requests, {sim.prompt_tokens:,} + "
                  f"{sim.output_tokens:,} tokens, "
                  f"{sim.arrivals}, seed {sim.seed})", "req/s", "TPOT p50 plain → spec", "× TPOT", "ITL p50 "
                      "plain → spec",
                  "TTFT p50 plain → spec", "output tok/s plain → spec", "preemptions plain/spec")
        for x in sim.rates:
            b, s = x["base"], x["spec"]
            ratio = "—" if x["tpot_p50_ratio"] is None else f"{x['tpot_p50_ratio']:.2f}"
            t.add_row(f"{x['rate_per_s']:g}", f"{fmt_duration(b['tpot_s']['p50'] or float('nan'))} → "
                                              f"{fmt_duration(s['tpot_s']['p50'] or float('nan'))}",
                      ratio, f"{fmt_duration(b['itl_s']['p50'] or float('nan'))} → "
                             f"{fmt_duration(s['itl_s']['p50'] or float('nan'))}",
                      f"{fmt_duration(b['ttft_s']['p50'] or float('nan'))} → "
                      f"{fmt_duration(s['ttft_s']['p50'] or float('nan'))}",
                      f"{b['throughput_output_tok_per_s']:,.0f} → {s['throughput_output_tok_per_s']:,.0f}",
                          f"{b['num_preemptions']}/{s['num_preemptions']}")
        console.print(t)
        console.print(sweep_sentence(sim))
    if r.step_cost:  # the step cost named above the tables: how it prices a step
        console.print(step_cost_source_line(r.step_cost))
    print_verdict(console, r.verdict, r.notes)
