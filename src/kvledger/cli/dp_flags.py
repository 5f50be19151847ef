"""The parallelism flags of the simulator-based commands beyond TP (``kvledger plan`` models their memory:
accounting/dp_attention.py): ``simulate``, ``goodput``, ``cost`` and ``report`` simulate vLLM's DP ranks of a MoE
model in lock-step (``SimDataParallelFlags``, through :func:`with_dp`; analyses/serving/sim_dp.py), and SGLang's DP
attention (analyses/serving/sim_sglang_dp.py); ``simulate``,
``goodput --simulate`` and ``cost --simulate`` simulate vLLM's pipeline stages (analyses/serving/sim_pp.py),
``report`` refuses them; ``search`` takes a DP axis (``SearchDataParallelFlags``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.cli.flag_groups import GroupUse, flag
from kvledger.errors import InputError

__all__ = ["SimDataParallelFlags", "SIM_DP", "SearchDataParallelFlags", "DP_REFUSAL",
           "with_dp", "fold_attn_dp", "refuse_dp_on_files"]

DP_REFUSAL = (
    "{flags} is SGLang's DP attention, and this search plans and simulates vLLM: add --engine sglang to search "
    "SGLang with it (a candidate at TP N ≥ 2 as --attn-dp-size N --ep-size N, a MoE model SGLang runs DP attention "
    "for); vLLM's own DP axis is --data-parallel-size with --enable-expert-parallel, whose SGLang launch line carries "
    "SGLang's nearest layout (--attn-dp-size N); or drop {flags}")
"""The refusal, formatted with the flags given."""
_SG_WORKS = ("simulate takes SGLang's DP attention as --engine sglang --tp N --ep-size N --attn-dp-size N "
             "(deprecated: --enable-dp-attention --dp-size N) [--moe-a2a-backend none|deepep]")


@dataclass(frozen=True, slots=True)
class SimDataParallelFlags:
    """``kvledger simulate``'s parallelism beyond TP: vLLM's --data-parallel-size (simulated for a MoE model with
    --enable-expert-parallel: sim_dp.py), SGLang's --enable-dp-attention with --moe-a2a-backend (sim_sglang_dp.py)
    and vLLM's --pp (sim_pp.py)."""

    data_parallel_size: int | None = flag("--data-parallel-size", "--dp-size", "-dp", help=(
        "vLLM's DP ranks of a MoE model (with --enable-expert-parallel): N engine cores on N × TP GPUs, each its own "
        "scheduler and KV pool, stepping in lock-step behind vLLM's load balancer."))
    enable_dp_attention: bool = flag("--enable-dp-attention", default=False, help=(
        "SGLang's DP attention (--engine sglang, with --dp-size N = --tp and --ep-size N): N DP ranks "
        "in lock-step, each its own scheduler and KV pool, routed round robin, the MoE layers over every rank's "
        "tokens. Deprecated in SGLang 0.5.22 for --attn-dp-size N."))
    attn_dp_size: int | None = flag("--attn-dp-size", help=(
        "SGLang's attention DP size (0.5.22 on; --engine sglang): --attn-dp-size N is --enable-dp-attention "
        "--dp-size N, the spelling SGLang deprecates; 1 (its default) is no DP attention."))
    moe_a2a_backend: str | None = flag("--moe-a2a-backend", help=(
        "SGLang's MoE all-to-all backend under --enable-dp-attention: none (default: every rank's tokens "
        "gathered) or deepep (dispatch and combine)."))
    pp: int | None = flag("--pp", "--pipeline-parallel-size", help=(
        "vLLM's pipeline stages, each --tp GPUs with its share of the layers and their KV: the release's pipeline "
        "loop (the V2 model runner from 0.23: N + 1 batches in flight, each request's decodes N steps apart; "
        "without async scheduling the batch queue of N), each stage priced as its layers' share of the step plus "
        "the send to the next (simulate, goodput --simulate, cost --simulate, report)."))
    all2all_backend: str | None = flag("--all2all-backend", help=(
        "vLLM's expert-parallel all-to-all backend (VLLM_ALL2ALL_BACKEND before 0.11.1) for the DP ranks' memory plan: "
        "the rows each GPU's MoE layers run in the profile, as `kvledger plan --all2all-backend` counts them "
        "(default: the version's); the release's own choices, others refused."))

    def __post_init__(self) -> None:
        if self.pp is not None and self.pp < 1:
            raise InputError(f"--pp {self.pp}: give a stage count of at least 1")
        if self.data_parallel_size is not None and self.data_parallel_size < 1:
            raise InputError(f"--data-parallel-size {self.data_parallel_size}: give a rank count of at least 1")


SIM_DP = GroupUse(SimDataParallelFlags, first_spelling=True)
"""How simulate, goodput and cost take the group: a range error names --data-parallel-size, the flag vLLM spells."""


@dataclass(frozen=True, slots=True)
class SearchDataParallelFlags:
    """``kvledger search``'s DP axis: vLLM's --data-parallel-size values for a MoE model (each above 1 a candidate of
    DP ranks in lock-step with --enable-expert-parallel: analyses/search/dp_axis.py); SGLang's DP attention with
    --engine sglang only (cli/search_engine.py)."""

    data_parallel_size: str | None = flag("--data-parallel-size", "--dp-size", "-dp", help=(
        "DP sizes to try for a MoE model, e.g. 1,8: each N above 1 adds candidates of N vLLM DP ranks of TP GPUs "
        "(N × TP GPUs) with --enable-expert-parallel, simulated in lock-step as `kvledger simulate` does (default: "
        "1, none); refused for a dense model, whose DP ranks are the replicas the search already sizes."))
    enable_dp_attention: bool = flag("--enable-dp-attention", default=False, help=(
        "With --engine sglang: SGLang's DP attention on every candidate at TP N ≥ 2 (--dp-size N --ep-size N, a MoE "
        "model SGLang runs it for, one node), simulated in lock-step as `kvledger report` and `cost --simulate` "
        "simulate it; refused with vLLM (its DP axis is --data-parallel-size)."))
    attn_dp_size: int | None = flag("--attn-dp-size", help=(
        "With --engine sglang (0.5.22 on): SGLang's attention DP size N, DP attention on the candidates at --tp N "
        "(the --tp axis must be N alone; default N); --enable-dp-attention, which SGLang deprecates, runs it at "
        "every candidate's TP."))
    all2all_backend: str | None = flag("--all2all-backend", help=(
        "vLLM's expert-parallel all-to-all backend for every DP candidate (VLLM_ALL2ALL_BACKEND before 0.11.1): the "
        "rows each GPU's MoE layers run in the profile, as `kvledger plan --all2all-backend` counts them."))


def with_dp(args, dp: SimDataParallelFlags | None, refused_with: str | None = None):
    """``args`` (a ``SimRequestArgs``) with ``--data-parallel-size`` above 1, checked (``sim_dp.check_dp_request``):
    the one path simulate, goodput --simulate and cost --simulate take to vLLM's DP ranks in lock-step; ``args``
    unchanged without it; SGLang's DP attention the same way (``sim_sglang_dp.py``). ``refused_with``: what the command
    runs that the lock-step simulation does not serve (sessions, a host KV tier), refused with the DP ranks.

    Raises:
        InputError: ``refused_with`` given, or what ``check_dp_request`` refuses.
    """
    import dataclasses

    dp = fold_attn_dp(dp, "sglang" if args.policy == "sglang" else "vllm", args.engine_version, args.tp)
    if dp is not None and (dp.enable_dp_attention or dp.moe_a2a_backend):
        args = _with_dp_attention(args, dp)
    if dp is not None and dp.all2all_backend is not None:  # the memory plan's rows (accounting/vllm_all2all.py)
        args = dataclasses.replace(args, all2all_backend=dp.all2all_backend)
    if dp is not None and (dp.pp or 1) > 1:  # vLLM's pipeline stages (analyses/serving/sim_pp.py)
        args = _with_pp(args, dp, refused_with)
    if dp is None or (dp.data_parallel_size or 1) == 1:
        return args

    from kvledger.analyses.serving.sim_dp import check_dp_request

    n = dp.data_parallel_size
    if refused_with:
        raise InputError(f"--data-parallel-size {n} with {refused_with}: the DP ranks' lock-step simulation serves a "
                         "trace or a synthetic workload (open loop or --concurrency) from each rank's GPU pool; drop "
                         f"{refused_with}")
    args = dataclasses.replace(args, data_parallel_size=n)
    check_dp_request(args)
    return args


def fold_attn_dp(dp: SimDataParallelFlags | None, engine: str, engine_version: str | None,
                 tp: int | None) -> SimDataParallelFlags | None:
    """``dp`` with its --attn-dp-size read as SGLang reads it (``accounting/attn_dp.py``): --enable-dp-attention
    --dp-size N; ``dp`` itself without it.

    Raises:
        InputError: what ``resolve_attn_dp_size`` refuses (vLLM, a release before 0.5.22, two DP sizes).
    """
    if dp is None or dp.attn_dp_size is None:
        return dp
    import dataclasses

    from kvledger.accounting.attn_dp import resolve_attn_dp_size

    on, n = resolve_attn_dp_size(dp.attn_dp_size, dp.enable_dp_attention, dp.data_parallel_size, engine=engine,
                                 engine_version=engine_version, tp=tp)
    return dataclasses.replace(dp, enable_dp_attention=on, data_parallel_size=n, attn_dp_size=None)


def _with_dp_attention(args, dp: SimDataParallelFlags):
    """``args`` with SGLang's DP attention and all-to-all backend (sim_sglang_dp.py)."""
    import dataclasses

    if (dp.data_parallel_size or 1) == 1 or not dp.enable_dp_attention:
        given = ("--enable-dp-attention needs --dp-size above 1" if dp.enable_dp_attention else
                 f"--moe-a2a-backend {dp.moe_a2a_backend} needs DP attention, --attn-dp-size N above 1")
        raise InputError(f"{given}: {_SG_WORKS}")
    return dataclasses.replace(args, enable_dp_attention=True, moe_a2a_backend=dp.moe_a2a_backend)


def _with_pp(args, dp: SimDataParallelFlags, refused_with: str | None):
    """``args`` with ``--pp`` above 1, checked (``sim_pp.check_pp_request``)."""
    import dataclasses

    from kvledger.analyses.serving.sim_pp import check_pp_request

    if refused_with:
        raise InputError(f"--pp {dp.pp} with {refused_with}: the pipeline simulation serves a trace or a synthetic "
                         f"workload (open loop or --concurrency) from the stages' GPU KV pool; drop {refused_with}")
    args = dataclasses.replace(args, pp=dp.pp, data_parallel_size=dp.data_parallel_size)
    check_pp_request(args)
    return args


def refuse_dp_on_files(dp: SimDataParallelFlags) -> None:
    """--data-parallel-size / --enable-dp-attention with measured FILEs: the run's own layout is what was measured."""
    if (dp.data_parallel_size or 1) > 1:
        raise InputError(f"--data-parallel-size {dp.data_parallel_size} applies to --simulate (vLLM's DP ranks of a "
                         "MoE model in lock-step); a FILE's run is priced as it was measured: drop it, or give "
                         "--num-gpus for the GPUs that served the file")
    if (dp.attn_dp_size or 1) > 1:
        raise InputError(f"--attn-dp-size {dp.attn_dp_size} applies to --simulate (SGLang's DP attention ranks in "
                         "lock-step); a FILE's run is priced as it was measured: drop it, or give --num-gpus for the "
                         "GPUs that served the file")
    if (dp.pp or 1) > 1:
        raise InputError(f"--pp {dp.pp} applies to --simulate (vLLM's pipeline stages); a FILE's run is priced as it "
                         "was measured: drop it, or give --num-gpus for the GPUs that served the file")
