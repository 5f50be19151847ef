"""The parallelism flags of the simulator-based commands beyond TP (``kvledger plan`` models their memory:
accounting/dp_attention.py): ``simulate``, ``goodput``, ``cost`` and ``report`` simulate vLLM's DP ranks of a MoE
model in lock-step (``SimDataParallelFlags``, through :func:`with_dp`; analyses/serving/sim_dp.py), and SGLang's DP
attention (analyses/serving/sim_sglang_dp.py); ``simulate``,
``goodput --simulate`` and ``cost --simulate`` simulate vLLM's pipeline stages (analyses/serving/sim_pp.py),
``report`` refuses them; ``search`` takes a DP axis (``SearchDataParallelFlags``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.analyses.serving.sim_parallel import fold_attn_dp, with_dp
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
