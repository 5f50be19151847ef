"""``kvledger search MODEL --slo … --target 0.9``: which GPU, TP and engine settings serve the traffic at the lowest
cost, and how many GPUs.

The command parses flags into a ``SearchSpec`` and ``Axes`` (``kvledger.analyses.search``),
runs the search with a progress bar, and renders: the table and frontier
(``kvledger.report.search_view``), ``--json``, ``--csv FILE``, ``--plot FILE``
(``kvledger.report.search_figures``). ``--show-command`` prints one candidate's launch commands
(kvledger.cli.search_show).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import typer

from kvledger import strict_json
from kvledger.cli.broken_pipe import will_end_with
from kvledger.cli.dp_flags import SearchDataParallelFlags
from kvledger.cli.flag_groups import EngineFlags, GroupUse, WorkloadFlags, with_groups
from kvledger.cli.pricing_flags import PricingFlags
from kvledger.cli.search_engine import checked_engine
from kvledger.cli.search_flags import SearchAxesFlags, SearchRunFlags, SearchVolumeFlags, search_inputs, with_all2all
from kvledger.cli.search_run import check_gpus, run_candidates
from kvledger.cli.search_show import rank_of, show_command_of, show_ranked
from kvledger.cli.search_status import answer_status, exit_with, no_plot, say_status
from kvledger.cli.session_flags import SessionFlags
from kvledger.ledgers.volume_rate import volume_option

__all__ = ["register"]

#: search varies TP, KV dtype, max_num_seqs, the token budget and prefix caching itself (its own list flags); the
#: rest of the engine, the workload and the pricing flags are the shared groups'.
WORKLOAD = GroupUse(WorkloadFlags, only=("trace", "prompt_lengths", "output_lengths", "arrival_cv", "num_requests",
                                         "seed", "shared_prefix_tokens", "document_pool"),
                    defaults={"num_requests": 2000, "seed": 0},
                    help={"num_requests": "Requests per simulated probe (the same seeded requests for every "
                                          "candidate).",
                          "seed": "RNG seed of the workload."})
ENGINE = GroupUse(EngineFlags, only=("max_model_len", "gpu_memory_utilization", "mem_fraction_static", "quantization",
                                     "engine_version",
                                     "step_cost", "cpu_overhead", "gpu_profile", "gemm_efficiency",
                                     "allreduce_link_share", "wddm", "client_latency", "enable_expert_parallel",
                                     "mamba_ssm_cache_dtype", "inter_node_link", "prefix_cache_retention_interval"),
                  defaults={"step_cost": "roofline"},
                  help={  # search --engine (SearchRunFlags) picks vLLM or SGLang; it takes no --policy
                      "enable_expert_parallel": "vLLM --enable-expert-parallel (data parallel 1) for a MoE model's "
                                                "candidates at TP > 1: by default each is tried off and on (an axis; "
                                                "the on one is tpN+ep, its vllm line carrying the flag); "
                                                "--enable-expert-parallel tries it on only, "
                                                "--no-enable-expert-parallel off only. A dense model has no such axis "
                                                "(vLLM refuses the flag).",
                      "engine_version": "vLLM version whose defaults and memory rules plan and simulate every "
                                        "candidate (default: the newest read, named under the launch commands); "
                                        "with --engine sglang the SGLang release's. Under vLLM each SGLang launch "
                                        "line is an unsimulated equivalent.",
                      "gpu_memory_utilization": "vLLM fraction of device memory, every candidate (default: the "
                                                "vLLM version's; not with --engine sglang).",
                      "mem_fraction_static": "With --engine sglang: SGLang's fraction of the memory free before the "
                                             "weights load, every candidate (default: computed as SGLang computes it "
                                             "from each GPU's memory and TP, as `kvledger plan --engine sglang`).",
                      "quantization": "vLLM --quantization fp8 for every candidate: an unquantized checkpoint's "
                                      "linear weights quantized to FP8 on load, as `kvledger plan -q fp8` plans them "
                                      "(the bytes freed go to the KV pool; steps read FP8 weights, with FP8 GEMMs "
                                      "where the GPU has FP8 tensor cores)."})
SESSIONS = GroupUse(SessionFlags, help={
    "session_workload": "Multi-turn sessions instead of a trace: chat or agent (the presets of `kvledger offload`), "
                        "probed at turn rates (session starts × turns per session).",
    "sessions": "Sessions per probe at least (default 200, the same for every candidate; more where a rate needs them)",
    "session_rate": "The load to size for, session starts per second (× the drawn sessions' turns per session = "
                    "req/s)."})
PRICING = GroupUse(PricingFlags, only=("gpu_provider", "gpu_usd_per_hour", "utilization", "max_utilization",
                                       "batch_share", "cache_hit_rate", "cache_write_rate"),
                   help={"utilization": "Average load ÷ capacity over billed hours for $ per token, without a load "
                                        "(with --rate/--monthly-tokens the sizing's realized utilization is priced; "
                                        "--utilization is then refused)."})


def _write_csv(result: Any, path: Path) -> None:
    from kvledger.analyses.search import CSV_COLUMNS, csv_rows
    from kvledger.outputs import write_text_atomic

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(csv_rows(result))
    write_text_atomic(path, buf.getvalue())


@with_groups(workload=WORKLOAD, sessions=SESSIONS, volume=SearchVolumeFlags,
             axes=GroupUse(SearchAxesFlags, first_spelling=True), engine=ENGINE, pricing=PRICING,
             run=GroupUse(SearchRunFlags, first_spelling=True), dp=SearchDataParallelFlags)
def search_command(
    model: str = typer.Argument(..., help="model: HF id, alias, config.json path or Hub id"),
    slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'"),
    target: float = typer.Option(0.9, "--target", help="share of requests that must meet the SLO at the capacity"),
    workload: WorkloadFlags = WorkloadFlags(),
    sessions: SessionFlags = SessionFlags(),
    rate: float | None = typer.Option(None, "--rate", help="target mean load, req/s: sizes replicas, GPUs and the "
                                                           "monthly bill", show_default=False),
    monthly_tokens: float | None = typer.Option(
        None, "--monthly-tokens", parser=volume_option("--monthly-tokens", positive=True),
        help="target load as input + output tokens per month, e.g. 3B (K, M, B, T: powers of 1000); converted with "
             "the workload's mean tokens per request", show_default=False),
    volume: SearchVolumeFlags = SearchVolumeFlags(),
    axes: SearchAxesFlags = SearchAxesFlags(),
    engine: EngineFlags = EngineFlags(),
    pricing: PricingFlags = PricingFlags(),
    run: SearchRunFlags = SearchRunFlags(),
    dp: SearchDataParallelFlags = SearchDataParallelFlags(),  # the DP axis of a MoE model (analyses/search/dp_axis.py)
) -> None:
    """Configuration search: every GPU × TP × engine setting planned, each feasible one's SLO capacity simulated,
    priced and sized; ranked, with the Pareto frontier and the launch command of the winner.

    Candidates are the product of the axes (--gpus, --tp, --kv-cache-dtype, --max-num-seqs, --max-num-batched-tokens,
    --prefix-caching); --disagg adds prefill/decode-disaggregated units (prefill TP × decode TP × --disagg-splits, KV
    over the GPU's NVLink or PCIe). Each is planned with vLLM's memory rules (--engine sglang: SGLang's, simulated
    with SGLang's scheduler and radix cache); one that does not fit, whose max_model_len does not fit, or has no price
    row is listed with the reason and numbers. Each feasible one gets its SLO capacity per replica (the rate search
    of `kvledger goodput --simulate --target`, the same seeded workload for all), $ per 1M input/output tokens, and with
    --rate, --monthly-tokens or --monthly-input-tokens with --monthly-output-tokens the replicas (for the peak under
    --peak-to-mean, priced at the mean, as `kvledger cost`), GPUs and monthly bill; --api adds the API bill. A
    candidate whose analytic bounds (roofline work, TTFT/TPOT lower bounds) prove it cannot win, be the runner-up or
    reach a frontier is decided by bound, unsimulated, with the margin (--exhaustive simulates every one).

    Exit status: 0 with a ranking; 1 when no candidate meets the SLO (the output still given in full, `--json` with
    `winner: null` and the reason in `no_winner_reason`) or a candidate could not be evaluated; 2 for bad
    input (also when every candidate is refused as an invalid setting, after the output); 3 when no candidate can
    start, every one rejected for memory (its max_model_len or its weights do not fit), as `plan` exits 3 when the
    model does not fit.
    """
    name, axes, dp = checked_engine(run.engine_name, engine, axes, run, dp)  # vLLM-only refused; --attn-dp-size
    spec, ax, load_notes = search_inputs(model, slo, target, workload, sessions, engine, pricing,
                                         (rate, monthly_tokens, volume), axes, run.api, dp.data_parallel_size, name)
    spec = with_all2all(spec, dp.all2all_backend, (model, ax) if dp.enable_dp_attention else None)  # DP attention
    check_gpus(ax.gpus, engine)
    rank = rank_of(run.show_command)
    if run.show_command is not None and rank is None:
        show_command_of(spec, ax, run.show_command, run.as_json)
        return
    from kvledger.cli.outputs import paths_in
    from kvledger.cli.search_files import check_search_files

    check_search_files(run.ledger, run.resume, {"--csv": run.csv_out, "--plot": run.plot}, run.force,
                       [model, *paths_in(workload, sessions, engine, pricing, axes)])
    result, variants = run_candidates(spec, ax, run)
    result.notes[:0] = load_notes  # how a --session-rate became the req/s the sizing uses
    status = answer_status(result)
    will_end_with(status)  # kept by a reader that stops reading (`| head -1`)
    say_status(result, status, run.as_json)  # before the output: a closed stdout ends the process there
    _write(result, variants, rank, run, status)
    exit_with(status)


def _write(result: Any, variants: list | None, rank: int | None, r: SearchRunFlags, status: int) -> None:
    """--csv, --plot (without a ranking, why it was not written: ``status``), then the ranked candidate (a
    --show-command rank), the JSON or the tables."""
    if r.csv_out is not None:
        _write_csv(result, r.csv_out)
    if r.plot is not None and result.ranking:
        from kvledger.report.search_figures import frontier_figure, save_figure

        save_figure(frontier_figure(result), r.plot)
    elif r.plot is not None:
        no_plot(r.plot, status)
    if rank is not None:
        show_ranked(result, rank, r.as_json)
    elif r.as_json:
        from kvledger.report.search_document import search_document

        typer.echo(strict_json.dumps(search_document(result, variants)))
    else:
        from kvledger.report.search_view import print_search

        print_search(result, r.top, r.verbose)
        if variants is not None:
            from kvledger.report.offload_axis_view import print_offload_axis

            print_offload_axis(variants, result.ranking)


def register(app: typer.Typer) -> None:
    """Add the ``search`` command to ``app``."""
    app.command("search")(search_command)
