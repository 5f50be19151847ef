"""The rows vLLM's MoE layers work on in the profile run under data parallelism with ``--enable-expert-parallel``.

Read in vLLM 0.19.0 and 0.33.0 (and the defaults in 0.9.0, 0.11.0, 0.13.0–0.17.0, 0.26.0, 0.29.0):

* The profile run: every DP rank runs ``profile_run`` → ``_dummy_run(max_num_tokens, is_profile=True)``; the ranks
  agree on their token counts (0.19 V1 ``gpu_model_runner.py::_determine_batch_execution_and_padding`` →
  ``dp_utils.coordinate_batch_across_dp``; 0.33 V2 ``v1/worker/gpu/model_runner.py::_dummy_run`` →
  ``gpu/dp_utils.py::sync_cudagraph_and_dp_padding``), so ``num_tokens_across_dp`` holds max_num_batched_tokens for
  every rank (``forward_context.py::DPMetadata``).
* The all-to-all: ``--all2all-backend`` defaults to ``allgather_reducescatter`` (``config/parallel.py`` of 0.14.0–
  0.17.0, 0.19.0, 0.26.0, 0.29.0, 0.33.0; ``VLLM_ALL2ALL_BACKEND``'s default in 0.11.0 and 0.13.0; "naive", also an
  all-gather, in 0.9.0; 0.19 and 0.33 turn a requested "naive" or "pplx" into it).
  ``all2all.py::AgRsAll2AllManager.dispatch`` (modular kernels' prepare, ``prepare_finalize/naive_dp_ep.py``) and
  ``dispatch_router_logits`` (the runner's naive dispatch for methods without an internal kernel, e.g. unquantized
  Triton in 0.19) ``all_gatherv`` every rank's rows over the DP group:
  each GPU's MoE layer runs DP × max_num_batched_tokens rows (each TP rank of a DP rank the same ones; the
  sequence-parallel MoE split is opt-in). ``modular_kernel.py::_fused_experts`` sizes the kept workspaces with
  ``M_full`` = those rows (M_chunk = M_full: no chunking in 0.19 or 0.33), and 0.11–0.14's per-call Triton caches
  take min(rows, VLLM_FUSED_MOE_CHUNK_SIZE: 32,768 to 0.11, 16,384 from 0.12).
* No DP chunking for this backend: 0.19's ``runner/default_moe_runner.py::use_dp_chunking`` (VLLM_MOE_DP_CHUNK_SIZE
  256 rows per rank) holds only for deepep_low_latency, mori, flashinfer_nvlink_two_sided and nixl_ep; 0.33 has no
  DP chunking at all. Those backends (and deepep_high_throughput, whose rows follow the routing) need
  ``--all2all-backend`` and extra packages; given, ``vllm_all2all`` counts their rows (or says it does not model
  them). 0.33's "passthrough" backend is bound
  only to the FlashInfer MoE-EP megakernels (``config/kernel.py``: DeepSeek-V4 checkpoints with ``--moe-backend``).

* FP8 before the all-gather (0.19.0 and 0.34.0 ``prepare_finalize/naive_dp_ep.py::_quantize_and_setup_dispatch``):
  the prepare step quantizes the rows to the experts' ``quant_dtype`` before ``dispatch`` unless the experts kernel
  ``expects_unquantized_inputs``; of the FP8 kernels only FlashInfer CUTLASS does, and only for 128-block FP8
  (``flashinfer_cutlass_moe.py``), which 0.19's FP8 oracle puts first on SM 9.0 under EP (``oracle/fp8.py``
  ``_get_priority_backends``); the monolithic kernels' path asks the same (``modular_kernel.py``). So per-tensor (or
  per-channel) FP8 experts gather 1 B per element from SM 8.9 (a static scale is not gathered), and block FP8 off
  Hopper (Triton on SM 8.9; FlashInfer TRT-LLM or DeepGEMM on SM 10.0) 1 B plus an fp32 scale per 128 columns of a
  row; block FP8 on Hopper stays in the model dtype, as do releases before 0.19 (not read for it): ``dispatch_bytes``.

So the kept fused-MoE workspace grows DP-fold (Qwen3-235B-A22B bf16, Triton, DP 8: 65,536 × 8 × (4,096 + 4,096) × 2 B
= 8 GiB, where 8,192 rows give 1 GiB), and the gathered hidden states, DP × tokens × hidden × d, are live during the
MoE forward. No DP + EP start-up log is in the data to check this against (the 0.19 corpus' one DP run, Llama-3.1-8B
DP 2, is dense and failed before its profile).
"""

from __future__ import annotations

from kvledger.accounting.vllm_all2all import All2AllChoice, all2all_rows
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["DP_MOE_RULE", "moe_profile_rows", "gathered_hidden_bytes", "dp_moe_words", "dispatch_bytes"]

FP8_DISPATCH_FROM = (0, 19, 0)
"""The first release read with the FP8 quantization before the all-gather (0.19.0, 0.34.0; earlier ones not read)."""

DP_MOE_RULE = ("the default all2all_backend allgather_reducescatter all-gathers every DP rank's profile rows into each "
               "MoE layer (distributed/device_communicators/all2all.py::AgRsAll2AllManager, vLLM 0.19.0 and 0.33.0; "
               "no DP chunking for it)")
"""The rule's words, as plan prints them beside the figures, at the default backend (``vllm_all2all`` for others)."""


def moe_profile_rows(model: ModelSpec, tokens: int, dp: int, ep: int, a2a: All2AllChoice | None = None) -> int:
    """Rows one GPU's MoE layers run in the profile forward: under expert parallelism with DP > 1 (``ep`` > 1:
    ``expert_parallel.ep_size``), DP × ``tokens`` (``a2a``: the all2all backend, None the default; a DP-chunked one
    runs DP × min(tokens, 256) per call: ``vllm_all2all.all2all_rows``), else ``tokens``."""
    return all2all_rows(a2a, tokens, dp) if model.is_moe and ep > 1 and dp > 1 else tokens


def dispatch_bytes(model: ModelSpec, ver: tuple[int, int, int] = (0, 0, 0), arch: str = "",
                   a2a: All2AllChoice | None = None) -> tuple[float, str]:
    """(B per gathered row, words) of the hidden states vLLM ``ver`` all-gathers on ``arch`` (module docstring): the
    model dtype's hidden × d, or hidden × 1 B (+ ⌈hidden/128⌉ × 4 B of block scales) where the prepare step quantizes
    to FP8 before the default all-gather."""
    h, q = model.hidden_size, model.quant
    fp8 = q.method == "fp8" and ver >= FP8_DISPATCH_FROM and arch in ("sm89", "sm90", "sm100", "sm120") \
        and (a2a is None or a2a.backend == "allgather_reducescatter")
    if fp8 and not q.block:
        return float(h), f"{h} × 1 B (FP8, quantized before the all-gather)"
    if fp8 and arch != "sm90":
        sc = -(-h // q.block[1]) * 4
        return float(h + sc), f"({h} × 1 B + {sc} B of block scales) (FP8, quantized before the all-gather)"
    return float(h * model.dtype_bytes), f"{h} × {model.dtype_bytes} B"


def gathered_hidden_bytes(model: ModelSpec, tokens: int, dp: int, ep: int, a2a: All2AllChoice | None = None,
                          ver: tuple[int, int, int] = (0, 0, 0), arch: str = "") -> float:
    """The all-gathered (or dispatched) hidden states live while a MoE layer runs, B: rows × ``dispatch_bytes`` (the
    router logits or top-k ids and weights gathered beside them are left out); 0 without DP + EP."""
    if not (model.is_moe and ep > 1 and dp > 1):
        return 0.0
    return moe_profile_rows(model, tokens, dp, ep, a2a) * dispatch_bytes(model, ver, arch, a2a)[0]


def dp_moe_words(model: ModelSpec, tokens: int, dp: int, ep: int, a2a: All2AllChoice | None = None,
                 ver: tuple[int, int, int] = (0, 0, 0), arch: str = "") -> str:
    """The activation term's words for the gathered rows; "" without DP + EP."""
    if not (model.is_moe and ep > 1 and dp > 1):
        return ""
    rows = moe_profile_rows(model, tokens, dp, ep, a2a)
    how = f"DP {dp} × {tokens:,}" if rows == dp * tokens else f"DP {dp} × min({tokens:,}, 256)"
    rule = a2a.words if a2a and (a2a.given or a2a.backend != "allgather_reducescatter") else DP_MOE_RULE
    return (f"MoE rows {rows:,} = {how} ({rule}): the fused-MoE workspaces take them, "
            f"and the forward holds the {'dispatched' if a2a and a2a.rows != 'gathered' else 'gathered'} hidden "
            f"states, {rows:,} × {dispatch_bytes(model, ver, arch, a2a)[1]}")
