"""``kvledger disagg``: prefill/decode disaggregation against a colocated deployment of the same GPU count — latencies,
goodput per GPU under an SLO, KV-transfer time, and which pool each latency follows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import typer

from kvledger import strict_json
from kvledger.cli.analysis_opts import GPU_OPT, JSON_OPT, MODEL_ARG, TargetFlags, load_target, pricing_flags
from kvledger.cli.flag_groups import EngineFlags, GroupUse, WorkloadFlags, flag, flag_like, with_groups
from kvledger.report.disagg_view import render_disagg as _render
from kvledger.report.disagg_view import replay_line
from kvledger.report.progress import working

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


@dataclass(frozen=True, slots=True)
class DisaggFlags:
    """The GPUs, the splits, the link, the SLO and the pools' settings of ``disagg`` (one group: the command's own)."""

    num_gpus: int | None = flag("--num-gpus", help="GPUs shared by every deployment (default 4, or P + D).")
    prefill_gpus: int | None = flag("--prefill-gpus", help="Compare only this split: GPUs in the prefill pool.")
    decode_gpus: int | None = flag("--decode-gpus", help="Compare only this split: GPUs in the decode pool.")
    link: str = flag("--link", default="auto", help="auto (NVLink, else PCIe, where a prefill and a decode replica "
                     "fit one node; else the network, 50 GB/s per GPU assumed), nvlink or pcie (catalog, halved for "
                     "one direction), or a per-GPU one-way bandwidth: 50GB/s, 400Gbps.")
    transfer_latency: str = flag("--transfer-latency", default="1ms",
                                 help="Fixed time added to every KV transfer (assumed 1 ms).")
    slo: str | None = flag("--slo", help="Per-request SLO, e.g. ttft=200ms,tpot=50ms (the default, DistServe blog "
                                         "Fig. 1).")
    attainment: float = flag("--attainment", default=0.9, help="Attainment target for --search-max-rate, fraction.")
    first_token: str = flag("--first-token", default="prefill", help="prefill (DistServe: the prefill pool returns it) "
                            "or decode (vLLM's proxy: the decode pool streams every token).")
    tp: int = flag("--tp", "--tensor-parallel-size", default=1, help="TP of a colocated replica.")
    prefill_tp: int | None = flag("--prefill-tp", help="TP of a prefill replica (default --tp).")
    decode_tp: int | None = flag("--decode-tp", help="TP of a decode replica (default --tp).")
    max_num_batched_tokens: str | None = flag("--max-num-batched-tokens", help="Colocated token budget per step "
                                              "(a token count as vLLM reads it: 8192, 8K = 8,192, 8k = 8,000).")
    max_num_seqs: int | None = flag("--max-num-seqs", help="Colocated max_num_seqs.")
    prefill_mnbt: str | None = flag("--prefill-max-num-batched-tokens", help="Prefill pool's token budget per step "
                                    "(a token count, as --max-num-batched-tokens).")
    decode_mns: int | None = flag("--decode-max-num-seqs", help="Decode pool's max_num_seqs.")
    router: str = flag("--router", default="round_robin", help="Router in every pool: round_robin, least_loaded, "
                                                               "prefix_aware.")
    tune: bool = flag("--tune/--no-tune", default=True, help="Also turn one knob per pool on the best split (and the "
                                                             "budget colocated).")
    tune_prefill_mnbt: str | None = flag("--tune-prefill-max-num-batched-tokens",
                                         help="Prefill budget in the tuning run (default ¼; a token count, as "
                                              "--max-num-batched-tokens).")
    tune_decode_mns: int | None = flag("--tune-decode-max-num-seqs",
                                       help="Decode max_num_seqs in the tuning run (default 128).")
    step_cost: str | None = flag("--step-cost", help="As simulate's: roofline (default: each pool's plan), calibrated "
                                 "(bundled measurements for this model, GPU and --tp), calibrated:KEY, or PROFILE.json "
                                 "(kvledger calibrate); a calibration prices every pool's steps.")
    kv_cache_dtype: str = flag_like(EngineFlags, "kv_cache_dtype", "auto", help=(
        "KV cache dtype of every pool, as simulate's (fp8 halves the KV bytes each transfer moves)."))
    search_max_rate: bool = flag("--search-max-rate", default=False, help="Also find each deployment's highest rate "
                                 "meeting the attainment target (slow: ~10 runs each).")


#: the plan settings and pricing flags disagg takes (no KV budget, block size or fractions: the pools plan their own)
TARGET = GroupUse(TargetFlags, only=("max_model_len", "gpu_memory_utilization", "engine_version", "gpu_profile",
                                     "gemm_efficiency", "allreduce_link_share", "enforce_eager", "wddm",
                                     "quantization", "enable_expert_parallel"),
                  first_spelling=True)


@with_groups(workload=WORKLOAD, pools=GroupUse(DisaggFlags, first_spelling=True), target=TARGET)
def disagg(model: str = MODEL_ARG, gpu: str = GPU_OPT, workload: WorkloadFlags = WorkloadFlags(),
           pools: DisaggFlags = DisaggFlags(), target: TargetFlags = TargetFlags(), as_json: bool = JSON_OPT) -> None:
    """Colocated vs prefill/decode-disaggregated serving on the same GPUs: TTFT, ITL, TPOT, goodput per GPU, KV
    transfer."""
    from rich.console import Console

    from kvledger.analyses.judgments.pd_disagg_summary import analyse_disagg
    from kvledger.dynamics.workload.traces import check_trace, load_trace

    check_trace(workload.trace)  # a missing file refused before any planning
    _need_rate(workload)
    p = pools
    ptp = p.tp if p.prefill_tp is None else p.prefill_tp
    dtp = p.tp if p.decode_tp is None else p.decode_tp
    n, splits = _split(p.num_gpus, p.prefill_gpus, p.decode_gpus, ptp, dtp)
    _one_tp_for_a_table(p.step_cost, p.tp, ptp, dtp)
    study = _study(model, gpu, p, target)
    mnbt = _budgets(p, target.engine_version)

    def load(r: float | None):
        return load_trace(workload.trace, num_requests=workload.num_requests, rate=r, seed=workload.seed)

    specs = load(workload.rate)
    offered, wl = _offered(specs, workload, p.search_max_rate)
    whole = workload.num_requests is None
    said = replay_line(workload.trace, len(specs), whole)
    if whole and not as_json:  # the slow default: said before it runs, with the faster way
        typer.echo(said, err=True)
    with working(said):
        r = analyse_disagg(study, specs, num_gpus=n, tp=p.tp, prefill_tp=ptp, decode_tp=dtp, splits=splits,
                           colocated={"max_num_batched_tokens": mnbt["max_num_batched_tokens"],
                                      "max_num_seqs": p.max_num_seqs},
                           prefill={"max_num_batched_tokens": mnbt["prefill_mnbt"]},
                           decode={"max_num_seqs": p.decode_mns},
                           tune=p.tune, tune_prefill_max_num_batched_tokens=mnbt["tune_prefill_mnbt"],
                           tune_decode_max_num_seqs=p.tune_decode_mns, load=load if p.search_max_rate else None,
                           rate_per_s=offered if p.search_max_rate else None, workload=wl)
    if as_json:
        typer.echo(strict_json.dumps(r.to_dict(), indent=2))
    else:
        _render(r, Console(emoji=False), whole_trace=whole)


#: the token-budget flags of ``disagg``, by their parameter
_BUDGET_FLAGS = {"max_num_batched_tokens": "--max-num-batched-tokens",
                 "prefill_mnbt": "--prefill-max-num-batched-tokens",
                 "tune_prefill_mnbt": "--tune-prefill-max-num-batched-tokens"}


def _budgets(p: DisaggFlags, engine_version: str | None) -> dict[str, int | None]:
    """The token budgets given (None where not), read as vLLM ``engine_version`` reads --max-num-batched-tokens
    (``vllm_auto_len.read_engine_tokens``, as plan and simulate: 8K = 8,192, 8k = 8,000; t and T from 0.13.0), then
    checked against their ranges (the range check before the command skips a token count: it is text until read)."""
    from kvledger.accounting.vllm_auto_len import read_engine_tokens
    from kvledger.ranges import check_options

    out = {k: read_engine_tokens(getattr(p, k), flag, "vllm", engine_version) for k, flag in _BUDGET_FLAGS.items()}
    check_options("disagg", out, _BUDGET_FLAGS)
    return out


def _study(model: str, gpu: str, p: DisaggFlags, t: TargetFlags):
    """The ``DisaggStudy`` of the flags: model, GPU and base settings (at the colocated TP), link, SLO, step cost."""
    from kvledger.analyses.judgments.pd_disagg import DEFAULT_SLO, DisaggStudy
    from kvledger.dynamics.engine.kv_link_nodes import pair_link
    from kvledger.ledgers.slo import parse_slo
    from kvledger.units import parse_duration_s

    spec, g, settings = load_target(model, gpu, tp=p.tp, max_model_len=t.max_model_len,
                                    gpu_memory_utilization=t.gpu_memory_utilization, engine_version=t.engine_version,
                                    enforce_eager=bool(t.enforce_eager), wddm=bool(t.wddm),
                                    enable_expert_parallel=bool(t.enable_expert_parallel),
                                    quantization=t.quantization.lower() if t.quantization else None,
                                    kv_cache_dtype=p.kv_cache_dtype)
    kv_link, link_note = pair_link(g, p.link, p.prefill_tp or p.tp, p.decode_tp or p.tp,
                                   parse_duration_s(p.transfer_latency, what="--transfer-latency"))
    cost, info = _step_cost(p.step_cost, spec.name, g.name, p.tp, t)
    return DisaggStudy(spec, g, settings, kv_link, parse_slo(DEFAULT_SLO if p.slo is None else p.slo),
                       target=p.attainment, first_token=p.first_token, router=p.router, step_cost=cost,
                       step_cost_info=info, link_note=link_note,
                       pricing=pricing_flags(t.gpu_profile, t.gemm_efficiency,
                                             allreduce_link_share=t.allreduce_link_share))


def _step_cost(choice: str | None, model: str, gpu: str, tp: int, t: TargetFlags) -> tuple:
    """(step cost, its description) for ``--step-cost`` as simulate takes it (``step_cost_choice``): (None, None) for
    the default or ``roofline`` (each pool priced by its own plan), else the bundled calibration or the profile.

    Raises:
        UnknownNameError: another name. InputError: no bundled table for (model, GPU, TP), or a conflicting profile.
    """
    from kvledger.analyses.serving.profile_scope import refuse_conflicting_profiles, unused_roofline_flags
    from kvledger.analyses.serving.step_cost_choice import (
        CALIBRATED_PREFIX,
        calibrated_step_cost,
        is_profile_choice,
        profile_step_cost,
    )
    from kvledger.errors import UnknownNameError

    if choice is None or choice == "roofline":
        return None, None
    refuse_conflicting_profiles(choice, t.gpu_profile)  # as simulate: the GPU profile prices the roofline
    if choice == "calibrated" or choice.startswith(CALIBRATED_PREFIX):
        cost, info = calibrated_step_cost(choice, model, gpu, tp)
        info["scope"] = "model (bundled measurements)"
    elif is_profile_choice(choice):
        cost, info = profile_step_cost(choice, model, gpu, tp)
    else:
        raise UnknownNameError("step cost model", choice, ["roofline", "calibrated"],
                               hint="Known: roofline, calibrated, calibrated:SOURCE:MODEL@GPU/tpN, or a profile "
                                    "PROFILE.json from `kvledger calibrate`.")
    if unused := unused_roofline_flags(t, choice):  # --gemm-efficiency, --allreduce-link-share: said
        info.setdefault("warnings", []).append(unused)
    return cost, info


def _one_tp_for_a_table(choice: str | None, tp: int, ptp: int, dtp: int) -> None:
    """A bundled calibration is measured at one TP: it prices every pool only when every pool runs at --tp."""
    from kvledger.errors import InputError

    if choice and choice.startswith("calibrated") and (ptp != tp or dtp != tp):
        raise InputError(f"--step-cost {choice} is a table measured at one TP and prices every pool's steps, but the "
                         f"pools run at TP {ptp} (prefill) and {dtp} (decode) against --tp {tp}: give the pools the "
                         "same TP, or leave --step-cost out (each pool's roofline at its own TP)")


def _need_rate(workload: WorkloadFlags) -> None:
    """A lengths-only trace needs --rate (disagg has no closed loop: --concurrency is simulate's)."""
    from kvledger.dynamics.workload.traces import trace_has_arrivals
    from kvledger.errors import InputError

    if workload.rate is None and not trace_has_arrivals(workload.trace):
        raise InputError(f"trace {workload.trace!r} has no arrival times (only lengths): give --rate R (req/s) for "
                         "Poisson arrivals drawn with --seed S (default 0), or --rate inf to send every request at "
                         "t = 0 (disagg replays an open loop; it has no --concurrency)")


def _offered(specs: list, workload: WorkloadFlags, search_max_rate: bool) -> tuple[float, dict]:
    """(the offered rate of ``specs``, req/s (inf when they all arrive at once), the workload's description).

    The offered rate is the one realised by the arrivals ((N − 1) ÷ their span); --rate is kept beside it as the
    requested rate (a lengths-only trace draws Poisson gaps with --seed, so the two differ); null when every request
    arrives at once (``all_at_once`` says it).

    Raises:
        InputError: no requests, or --search-max-rate with an infinite offered rate.
    """
    from kvledger.errors import InputError

    if not specs:
        raise InputError(f"--trace {workload.trace}: no requests to serve")
    span = specs[-1].arrival_s - specs[0].arrival_s if len(specs) > 1 else 0.0
    offered = (len(specs) - 1) / span if span > 0 else float("inf")
    if search_max_rate and not math.isfinite(offered):
        raise InputError("--search-max-rate needs a finite offered rate (the requests all arrive at once; give --rate)")
    return offered, {"trace": workload.trace, "num_requests": len(specs), "offered_rate_req_per_s": offered,
                     "requested_rate_req_per_s": workload.rate if offered != float("inf") else None,
                     "seed": workload.seed, "prompt_tokens_mean": sum(s.num_prompt_tokens for s in specs) / len(specs),
                     "output_tokens_mean": sum(s.num_output_tokens for s in specs) / len(specs)}


def register(app: typer.Typer) -> None:
    """Add ``disagg`` to the app."""
    app.command("disagg")(disagg)
