"""``kvledger disagg``: prefill/decode disaggregation against a colocated deployment of the same GPU count — latencies,
goodput per GPU under an SLO, KV-transfer time, and which pool each latency follows."""

from __future__ import annotations

import math

import typer

from kvledger import strict_json
from kvledger.cli.analysis_opts import (
    EAGER_OPT,
    GEMM_OPT,
    GPU_OPT,
    GPU_PROFILE_OPT,
    JSON_OPT,
    MAX_LEN_OPT,
    MODEL_ARG,
    UTIL_OPT,
    VERSION_OPT,
    WDDM_OPT,
)
from kvledger.cli.flag_groups import GroupUse, WorkloadFlags, with_groups
from kvledger.report.disagg_view import render_disagg as _render

__all__ = ["register"]


def _split(num_gpus: int | None, p: int | None, d: int | None, ptp: int, dtp: int) -> tuple[int, list | None]:
    """(GPU count, the one split asked for or None for all splits)."""
    from kvledger.errors import InputError

    if (p is None) != (d is None):
        raise InputError("give both --prefill-gpus and --decode-gpus, or neither (then every split is compared)")
    if p is None:
        return (4 if num_gpus is None else num_gpus), None
    if p < 1 or d < 1 or p % ptp or d % dtp:
        raise InputError(f"--prefill-gpus {p} / --decode-gpus {d} must be ≥ 1 and multiples of their TP ({ptp}, {dtp})")
    if num_gpus is not None and num_gpus != p + d:
        raise InputError(f"--prefill-gpus {p} + --decode-gpus {d} = {p + d}, not --num-gpus {num_gpus}")
    return p + d, [(p // ptp, d // dtp)]


#: disagg replays a trace (or its first N requests) at its own or a given rate; no synthetic workload, no closed loop.
WORKLOAD = GroupUse(WorkloadFlags, only=("trace", "rate", "num_requests", "seed"),
                    defaults={"trace": "azure-conv", "seed": 0},
                    help={"trace": "azure-conv, azure-code, mooncake, arxiv, or a CSV/JSONL path.",
                          "rate": "Mean arrival rate, req/s (gaps rescaled, burstiness kept); default: the trace's "
                                  "own.",
                          "num_requests": "Replay only the first N requests.",
                          "seed": "Seed for Poisson arrivals of a lengths-only trace."})


@with_groups(workload=WORKLOAD)
def disagg(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    workload: WorkloadFlags = WorkloadFlags(),
    num_gpus: int | None = typer.Option(None, "--num-gpus", help="GPUs shared by every deployment (default 4, or P + "
                                                                 "D)."),
    prefill_gpus: int | None = typer.Option(None, "--prefill-gpus", help="Compare only this split: GPUs in the prefill "
                                                                         "pool."),
    decode_gpus: int | None = typer.Option(None, "--decode-gpus", help="Compare only this split: GPUs in the decode "
                                                                       "pool."),
    link: str = typer.Option("nvlink", "--link", help="nvlink or pcie (catalog, halved for one direction), or a "
                                                      "per-GPU one-way bandwidth: 50GB/s, 400Gbps."),
    transfer_latency: str = typer.Option("1ms", "--transfer-latency", help="Fixed time added to every KV transfer "
                                                                           "(assumed 1 ms)."),
    slo: str | None = typer.Option(None, "--slo", help="Per-request SLO, e.g. ttft=200ms,tpot=50ms (the default, "
                                                       "DistServe blog Fig. 1)."),
    attainment: float = typer.Option(0.9, "--attainment", help="Attainment target for --search-max-rate, fraction."),
    first_token: str = typer.Option("prefill", "--first-token", help="prefill (DistServe: the prefill pool returns it) "
                                                                     "or decode (vLLM's proxy: the decode pool streams "
                                                                     "every token)."),
    tp: int = typer.Option(1, "--tp", help="TP of a colocated replica."),
    prefill_tp: int | None = typer.Option(None, "--prefill-tp", help="TP of a prefill replica (default --tp)."),
    decode_tp: int | None = typer.Option(None, "--decode-tp", help="TP of a decode replica (default --tp)."),
    max_num_batched_tokens: int | None = typer.Option(None, "--max-num-batched-tokens", help="Colocated token budget "
        "per step."),
    max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="Colocated max_num_seqs."),
    prefill_mnbt: int | None = typer.Option(None, "--prefill-max-num-batched-tokens", help="Prefill pool's token "
        "budget per step."),
    decode_mns: int | None = typer.Option(None, "--decode-max-num-seqs", help="Decode pool's max_num_seqs."),
    router: str = typer.Option("round_robin", "--router", help="Router in every pool: round_robin, least_loaded, "
                                                               "prefix_aware."),
    tune: bool = typer.Option(True, "--tune/--no-tune", help="Also turn one knob per pool on the best split (and the "
                                                             "budget colocated)."),
    tune_prefill_mnbt: int | None = typer.Option(None, "--tune-prefill-max-num-batched-tokens", help="Prefill budget "
        "in the tuning run (default ¼)."),
    tune_decode_mns: int | None = typer.Option(None, "--tune-decode-max-num-seqs", help="Decode max_num_seqs in the "
        "tuning run (default 128)."),
    step_cost: str | None = typer.Option(None, "--step-cost", help="A calibration profile (PROFILE.json from kvledger "
                                                                   "calibrate) pricing every pool's steps; default: "
                                                                   "each pool's roofline."),
    search_max_rate: bool = typer.Option(False, "--search-max-rate", help="Also find each deployment's highest rate "
                                                                          "meeting the attainment target (slow: ~10 "
                                                                          "runs each)."),
    max_model_len: str | None = MAX_LEN_OPT, gpu_memory_utilization: float | None = UTIL_OPT,
    engine_version: str | None = VERSION_OPT, gpu_profile: str | None = GPU_PROFILE_OPT,
    gemm_efficiency: str | None = GEMM_OPT, enforce_eager: bool | None = EAGER_OPT, wddm: bool | None = WDDM_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Colocated vs prefill/decode-disaggregated serving on the same GPUs: TTFT, ITL, TPOT, goodput per GPU, KV
    transfer."""
    trace, rate, num_requests, seed = workload.trace, workload.rate, workload.num_requests, workload.seed
    from rich.console import Console

    from kvledger.analyses.judgments.pd_disagg import DEFAULT_SLO, DisaggStudy
    from kvledger.analyses.judgments.pd_disagg_summary import analyse_disagg
    from kvledger.cli.analysis_opts import load_target, pricing_flags
    from kvledger.dynamics.engine.kv_transfer import link_from_gpu
    from kvledger.dynamics.workload.traces import load_trace
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo
    from kvledger.units import parse_duration_s

    ptp = tp if prefill_tp is None else prefill_tp
    dtp = tp if decode_tp is None else decode_tp
    n, splits = _split(num_gpus, prefill_gpus, decode_gpus, ptp, dtp)
    spec, g, settings = load_target(model, gpu, tp=tp, max_model_len=max_model_len,
                                    gpu_memory_utilization=gpu_memory_utilization, engine_version=engine_version,
                                    enforce_eager=bool(enforce_eager), wddm=bool(wddm))
    kv_link = link_from_gpu(g, link, parse_duration_s(transfer_latency, what="--transfer-latency"))
    cost = info = None
    if step_cost is not None:
        from kvledger.accounting.calibration_profile import profile_step_cost

        cost, info = profile_step_cost(step_cost, spec.name, g.name, tp)
    study = DisaggStudy(spec, g, settings, kv_link, parse_slo(DEFAULT_SLO if slo is None else slo), target=attainment,
                        first_token=first_token, router=router, step_cost=cost, step_cost_info=info,
                        pricing=pricing_flags(gpu_profile, gemm_efficiency))

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
                       load=load if search_max_rate else None, rate_per_s=offered if search_max_rate else None,
                           workload=wl)
    if as_json:
        typer.echo(strict_json.dumps(r.to_dict(), indent=2))
    else:
        _render(r, Console(emoji=False))


def register(app: typer.Typer) -> None:
    """Add ``disagg`` to the app."""
    app.command("disagg")(disagg)
