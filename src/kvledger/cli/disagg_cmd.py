"""``kvledger disagg``: prefill/decode disaggregation against a colocated deployment of the same GPU count — latencies, goodput per GPU under an SLO, KV-transfer time, and which pool each latency follows."""

from __future__ import annotations

import json
import math
from typing import Optional

import typer

from kvledger.cli.analysis_opts import GPU_OPT, JSON_OPT, MAX_LEN_OPT, MODEL_ARG, UTIL_OPT, VERSION_OPT, table

__all__ = ["register"]


def _split(num_gpus: int | None, p: int | None, d: int | None, ptp: int, dtp: int) -> tuple[int, list | None]:
    """(GPU count, the one split asked for or None for all splits)."""
    from kvledger.errors import InputError

    if (p is None) != (d is None):
        raise InputError("give both --prefill-gpus and --decode-gpus, or neither (then every split is compared)")
    if p is None:
        return num_gpus or 4, None
    if p < 1 or d < 1 or p % ptp or d % dtp:
        raise InputError(f"--prefill-gpus {p} / --decode-gpus {d} must be ≥ 1 and multiples of their TP ({ptp}, {dtp})")
    if num_gpus is not None and num_gpus != p + d:
        raise InputError(f"--prefill-gpus {p} + --decode-gpus {d} = {p + d}, not --num-gpus {num_gpus}")
    return p + d, [(p // ptp, d // dtp)]


def _row(x) -> list[str]:
    from kvledger.units import fmt_duration as f

    def q(d, k):
        return "—" if d[k] is None else f(d[k])

    t = x.transfer
    xfer = "—" if not t or not t["num_transfers"] else f"{f(t['transfer_s']['mean'])} / {f(t['transfer_s']['p99'])}"
    mr = "" if x.max_rate_search is None else ("—" if x.max_rate_per_gpu is None else f"{x.max_rate_per_gpu:,.2f}")
    cells = [x.label, f"{x.num_gpus}", f"{q(x.ttft_s, 'p50')} / {q(x.ttft_s, 'p90')} / {q(x.ttft_s, 'p99')}",
             f"{q(x.itl_s, 'p50')} / {q(x.itl_s, 'p90')} / {q(x.itl_s, 'p99')}",
             f"{q(x.tpot_s, 'p50')} / {q(x.tpot_s, 'p90')} / {q(x.tpot_s, 'p99')}",
             f"{x.throughput_req_per_s:,.2f}", f"{x.attainment:.1%}", f"{x.goodput_req_per_s_per_gpu:,.2f}", xfer,
             f"{x.num_preemptions:,}"]
    return cells + ([mr] if x.max_rate_search is not None else [])


def _render(r, console) -> None:
    w = r.workload
    console.print(f"[bold]Prefill/decode disaggregation: {r.model} on {r.num_gpus} × {r.gpu}[/] — trace {w.get('trace')}, "
                  f"{w.get('num_requests'):,} requests at {w.get('offered_rate_req_per_s', float('nan')):,.2f} req/s offered; "
                  f"SLO {r.slo['text']}")
    console.print(f"KV link: {r.link['source']}; transfer = {r.transfer_model}")
    searched = any(x.max_rate_search is not None for x in r.deployments)
    cols = ["deployment", "GPUs", "TTFT p50/p90/p99", "ITL p50/p90/p99", "TPOT p50/p90/p99", "req/s", "good",
            "goodput req/s/GPU", "KV transfer mean/p99", "preemptions"] + (["max rate/GPU"] if searched else [])
    t = table("Same GPUs, same requests: colocated vs each prefill:decode split", *cols)
    for x in r.deployments:
        t.add_row(*_row(x))
    console.print(t)
    if r.tuning:
        from kvledger.units import fmt_duration as f

        t = table("One knob, one pool: what moves", "deployment", "pool changed", "knob", "TTFT p50", "TTFT p90",
                  "ITL p50", "ITL p99", "TPOT p90", "goodput req/s/GPU")
        for x in r.tuning:
            t.add_row(x["deployment"], x["pool_changed"], x["knob"], *(("—" if x[k] is None else f(x[k])) for k in
                      ("ttft_p50_s", "ttft_p90_s", "itl_p50_s", "itl_p99_s", "tpot_p90_s")),
                      f"{x['goodput_req_per_s_per_gpu']:,.2f}")
        console.print(t)
    console.print("[bold]Verdict[/]")
    for v in r.verdict:
        console.print(f"• {v}")
    for n in r.notes:
        console.print(f"· {n}", style="dim")


def disagg(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    trace: str = typer.Option("azure-conv", "--trace", help="azure-conv, azure-code, mooncake, arxiv, or a CSV/JSONL path."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Mean arrival rate, req/s (gaps rescaled, burstiness kept); default: the trace's own."),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", help="Replay only the first N requests."),
    seed: int = typer.Option(0, "--seed", help="Seed for Poisson arrivals of a lengths-only trace."),
    num_gpus: Optional[int] = typer.Option(None, "--num-gpus", help="GPUs shared by every deployment (default 4, or P + D)."),
    prefill_gpus: Optional[int] = typer.Option(None, "--prefill-gpus", help="Compare only this split: GPUs in the prefill pool."),
    decode_gpus: Optional[int] = typer.Option(None, "--decode-gpus", help="Compare only this split: GPUs in the decode pool."),
    link: str = typer.Option("nvlink", "--link", help="nvlink or pcie (catalog, halved for one direction), or a per-GPU one-way bandwidth: 50GB/s, 400Gbps."),
    transfer_latency: str = typer.Option("1ms", "--transfer-latency", help="Fixed time added to every KV transfer (assumed 1 ms)."),
    slo: Optional[str] = typer.Option(None, "--slo", help="Per-request SLO, e.g. ttft=200ms,tpot=50ms (the default, DistServe blog Fig. 1)."),
    attainment: float = typer.Option(0.9, "--attainment", help="Attainment target for --search-max-rate, fraction."),
    first_token: str = typer.Option("prefill", "--first-token", help="prefill (DistServe: the prefill pool returns it) or decode (vLLM's proxy: the decode pool streams every token)."),
    tp: int = typer.Option(1, "--tp", help="TP of a colocated replica."),
    prefill_tp: Optional[int] = typer.Option(None, "--prefill-tp", help="TP of a prefill replica (default --tp)."),
    decode_tp: Optional[int] = typer.Option(None, "--decode-tp", help="TP of a decode replica (default --tp)."),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens", help="Colocated token budget per step."),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="Colocated max_num_seqs."),
    prefill_mnbt: Optional[int] = typer.Option(None, "--prefill-max-num-batched-tokens", help="Prefill pool's token budget per step."),
    decode_mns: Optional[int] = typer.Option(None, "--decode-max-num-seqs", help="Decode pool's max_num_seqs."),
    router: str = typer.Option("round_robin", "--router", help="Router in every pool: round_robin, least_loaded, prefix_aware."),
    tune: bool = typer.Option(True, "--tune/--no-tune", help="Also turn one knob per pool on the best split (and the budget colocated)."),
    tune_prefill_mnbt: Optional[int] = typer.Option(None, "--tune-prefill-max-num-batched-tokens", help="Prefill budget in the tuning run (default ¼)."),
    tune_decode_mns: Optional[int] = typer.Option(None, "--tune-decode-max-num-seqs", help="Decode max_num_seqs in the tuning run (default 128)."),
    step_cost: Optional[str] = typer.Option(None, "--step-cost", help="A calibration profile (PROFILE.json from kvledger calibrate) pricing every pool's steps; default: each pool's roofline."),
    search_max_rate: bool = typer.Option(False, "--search-max-rate", help="Also find each deployment's highest rate meeting the attainment target (slow: ~10 runs each)."),
    max_model_len: Optional[str] = MAX_LEN_OPT, gpu_memory_utilization: Optional[float] = UTIL_OPT,
    engine_version: Optional[str] = VERSION_OPT, as_json: bool = JSON_OPT,
) -> None:
    """Colocated vs prefill/decode-disaggregated serving on the same GPUs: TTFT, ITL, TPOT, goodput per GPU, KV transfer."""
    from rich.console import Console

    from kvledger.analyses.pd_disagg import DEFAULT_SLO, DisaggStudy
    from kvledger.analyses.pd_disagg_report import analyse_disagg
    from kvledger.cli.analysis_opts import load_target
    from kvledger.dynamics.kv_transfer import link_from_gpu
    from kvledger.dynamics.traces import load_trace
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo
    from kvledger.units import parse_duration_s

    ptp, dtp = prefill_tp or tp, decode_tp or tp
    n, splits = _split(num_gpus, prefill_gpus, decode_gpus, ptp, dtp)
    spec, g, settings = load_target(model, gpu, tp=tp, max_model_len=max_model_len,
                                    gpu_memory_utilization=gpu_memory_utilization, engine_version=engine_version)
    kv_link = link_from_gpu(g, link, parse_duration_s(transfer_latency, what="--transfer-latency"))
    cost = None
    if step_cost is not None:
        from kvledger.accounting.calibration_profile import profile_step_cost

        cost, _ = profile_step_cost(step_cost, spec.name, g.name, tp)
    study = DisaggStudy(spec, g, settings, kv_link, parse_slo(slo or DEFAULT_SLO), target=attainment,
                        first_token=first_token, router=router, step_cost=cost)

    def load(r: float | None):
        return load_trace(trace, num_requests=num_requests, rate=r, seed=seed)

    specs = load(rate)
    if not specs:
        raise InputError(f"--trace {trace}: no requests to serve")
    span = specs[-1].arrival_s - specs[0].arrival_s if len(specs) > 1 else 0.0
    offered = (len(specs) - 1) / span if span > 0 else float("inf")
    if search_max_rate and not math.isfinite(offered):
        raise InputError("--search-max-rate needs a finite offered rate (the requests all arrive at once; give --rate)")
    wl = {"trace": trace, "num_requests": len(specs), "offered_rate_req_per_s": offered, "seed": seed,
          "prompt_tokens_mean": sum(s.num_prompt_tokens for s in specs) / len(specs),
          "output_tokens_mean": sum(s.num_output_tokens for s in specs) / len(specs)}
    r = analyse_disagg(study, specs, num_gpus=n, tp=tp, prefill_tp=ptp, decode_tp=dtp, splits=splits,
                       colocated={"max_num_batched_tokens": max_num_batched_tokens, "max_num_seqs": max_num_seqs},
                       prefill={"max_num_batched_tokens": prefill_mnbt}, decode={"max_num_seqs": decode_mns}, tune=tune,
                       tune_prefill_max_num_batched_tokens=tune_prefill_mnbt, tune_decode_max_num_seqs=tune_decode_mns,
                       load=load if search_max_rate else None, rate_per_s=offered if search_max_rate else None, workload=wl)
    if as_json:
        typer.echo(json.dumps(r.to_dict(), indent=2, default=str))
    else:
        _render(r, Console())


def register(app: typer.Typer) -> None:
    """Add ``disagg`` to the app."""
    app.command("disagg")(disagg)
