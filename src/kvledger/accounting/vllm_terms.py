"""Two of vLLM's deductions with their ranges: the weights (MXFP4 layouts) and the profile run's activation peak
(the sampler backend the version may pick, and how far each era's profile run was checked against logs)."""

from __future__ import annotations

from kvledger.accounting import notes as N
from kvledger.accounting import vllm_profile as P
from kvledger.accounting.expert_parallel import ep_size
from kvledger.accounting.max_model_len import config_len
from kvledger.accounting.memory import Deduction
from kvledger.accounting.overheads import cudagraph_capture_sizes
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_all2all import all2all_choice
from kvledger.accounting.vllm_block_choice import vllm_block_size
from kvledger.accounting.vllm_dp_moe import moe_profile_rows
from kvledger.accounting.vllm_mla_profile import MLAProfile, flashinfer_sparse_workspace, mla_profile
from kvledger.accounting.vllm_mxfp4_backend import mxfp4_plan
from kvledger.accounting.vllm_profile import PPStage
from kvledger.accounting.vllm_rocm import ROCM_WEIGHTS_UP, is_rocm
from kvledger.accounting.vllm_runner import v2_sampler
from kvledger.accounting.vllm_sampler import sampler_backends, v1_profile_backend
from kvledger.accounting.vllm_sparse_mla import sparse_mla_choice
from kvledger.catalog.compressed_mla import has_compressed_mla
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB

__all__ = ["weights_term", "weights_item", "activation_item", "profile_mla", "cudagraph_item", "CUDAGRAPH_LOGGED_RATIO",
           "cudagraph_range",
           "WEIGHTS_LOGGED_SPREAD"]

CUDAGRAPH_LOGGED_RATIO = (0.66, 2.34)
"""The CUDA-graph estimate's range as multiples of the rule's point (``vllm_profile.cudagraph_estimate``): the vLLM
0.19.0 H100 corpus (shared/data/vllm-startups-0.19) logs "Estimated CUDA graph memory" of 0.49–1.69 GiB over its 34
start-ups that captured graphs (13 models and checkpoints, TP 1/2/4, PP 2/4) where the rule gives 0.7266 GiB for all
of them (51 sizes, both modes): 0.485/0.7266 = 0.668 and 1.695/0.7266 = 2.333 with the 2-decimal print, rounded out.
What moves it is read, not sized (profile_cudagraph_memory, identical in 0.19, 0.20 and 0.21): the FULL first capture
holds FlashAttention's split-KV buffers (32 splits × 512 tokens × heads per GPU × head size × fp32: 256/128/64 MiB for
Llama-3.1-8B at TP 1/2/4 against 260/132/70 logged) and the per-graph bytes run 1–26 MiB by model and TP. Not fitted to,
and inside: the rank-0 estimates vLLM 0.20.0 implies on H200 (Llama-3.3-70B TP 4 0.91–0.92 GiB, DeepSeek-R1 TP 8
about 1.56; vme_startups.csv residuals above the measured non-torch). Was ±0.12 GiB, which 20 of the 34 logs fall
outside."""


def cudagraph_range(point_bytes: float) -> tuple[float, float, str]:
    """(low, high, why) of the CUDA-graph estimate around the rule's point, B (``CUDAGRAPH_LOGGED_RATIO``)."""
    lo, hi = CUDAGRAPH_LOGGED_RATIO
    return (point_bytes * lo, point_bytes * hi, f"×{lo}–×{hi} of the point: the vLLM 0.19 H100 corpus logs 0.49–1.69 "
            "GiB where the rule gives 0.73 (34 start-ups, TP 1–4, PP 1–4)")


def weights_term(checkpoint: ModelSpec, gpu: GpuSpec, s: PlanSettings, stage: PPStage, ver: tuple[int, int, int],
                 rocm: bool) -> Deduction:
    """The weights vLLM ``ver`` loads on the stage's GPU (catalog/loading.py), MXFP4 experts in the layout of the
    backend vLLM picks (vllm_mxfp4_backend.py, whose reason the text gives), with ``weights_item``'s range."""
    mx = mxfp4_plan(checkpoint, gpu.exact_arch, ver, s.mxfp4_backend)  # exact: 0.10.2–0.12 test SM 10.0
    lw = loaded_weights(checkpoint, tp=s.tp, pp=stage.pp, pp_rank=stage.rank, dtype=None if s.dtype == "auto"
                        else s.dtype, quantization=s.quantization, gpu_arch=gpu.arch, engine_version=ver, rocm=rocm,
                        ep=ep_size(checkpoint, s), mxfp4=mx[:2] if mx else None)
    how = lw.how + (f"; MXFP4 MoE backend: {mx[2]}" if mx else "")
    return weights_item(lw.bytes, N.weights_computed(how), checkpoint, gpu.arch, rocm, lw.marlin_bytes,
                        bool(mx and mx[0] == "marlin"))


def weights_item(b: float, how: str, checkpoint: ModelSpec, arch: str, rocm: bool = False,
                 marlin_bytes: float = 0.0, marlin: bool = False) -> Deduction:
    """Weights, exact from the tensors except MXFP4 experts off the Marlin path, whose layout varies by version: on
    H100 +4.7% (gpt-oss-20b, llm-d-benchmark, vLLM ≤0.16) and +5.9% (gpt-oss-120b, vLLM 0.14.1, vllm#33155) above
    the tensors; the Marlin path's padding is modelled (catalog/loading.py) and matched 65.97 GiB on vllm#23278.
    ``marlin_bytes``: the other layout's weights (``LoadedWeights.marlin_bytes``: Marlin where vLLM takes it only
    without ``triton_kernels``, or Triton's where Marlin is the point and vLLM takes Triton once it is installed): the
    range reaches them. ``marlin``: the point is the Marlin layout, which matched the log (no spread above it)."""
    if rocm:  # "Model loading took" is device-wide used memory on ROCm (vllm_rocm module docstring)
        up = ROCM_WEIGHTS_UP + (0.11 if checkpoint.quant.method == "mxfp4" else 0.0)
        return Deduction("weights", b, how, b, b * (1 + up), f"ROCm measures the weights as device-wide used memory "
                         f"(platforms/rocm.py): up to +{up:.1%} (MI300X logs)")
    if checkpoint.quant.method != "mxfp4":
        lo, hi = WEIGHTS_LOGGED_SPREAD
        low_text = f"{lo:+.2%}".replace("-", "−")
        return Deduction("weights", b, how, b * (1 + lo) - PRINT_ROUNDING_BYTES, b * (1 + hi) + PRINT_ROUNDING_BYTES,
                         f"the tensors {low_text} … {hi:+.2%} (buffers allocated at load that are not checkpoint "
                         "tensors; public corpus on CUDA) and the log's 2-decimal print (±0.005 GiB)")
    up = 0.11 if arch in ("sm80", "sm86") else 0.06
    why = f"MXFP4 layout varies by version and GPU: up to +{up:.0%}"
    if marlin and marlin_bytes:  # the other end: Triton's layout, whose logs run up to +6% above its tensors
        return Deduction("weights", b, how, min(b, marlin_bytes), max(b, marlin_bytes * 1.06), f"the Marlin layout "
                         f"as allocated, down to {marlin_bytes / GiB:.2f} GiB in the Triton layout vLLM takes once "
                         "triton_kernels is installed (mxfp4.py get_mxfp4_backend; logs up to +6% above it)")
    if marlin_bytes > b * (1 + up):
        why += (f"; {marlin_bytes / GiB:.2f} GiB in the Marlin layout, which vLLM takes on {arch} when the optional "
                "triton_kernels package is not installed (mxfp4.py get_mxfp4_backend)")
    return Deduction("weights", b, how, b, max(b * (1 + up), marlin_bytes), why)


WEIGHTS_LOGGED_SPREAD = (-0.001, 0.0025)
"""Relative spread of vLLM's logged "Model loading took" around the tensors' bytes on CUDA, non-MXFP4 checkpoints
(benchmarks/accuracy_memory.py, 2026-12-02: 125 logged weights in the public corpus and the 0.19 H100 corpus, point
error −0.14% … +0.21% once the ±0.005 GiB print rounding is taken off: Llama-3.1-8B W4A16 +0.21%, DeepSeek-R1-0528
FP8 at TP 8 +0.08–0.10% (0.06–0.08 GiB per GPU not in the checkpoint's tensors), Qwen3-235B-A22B-2507 at TP 4 +0.05%
(its 262,144-position RoPE table against the base config's 40,960). Before this range the weights were a point and 33
of 90 logged weights with a range fell outside it."""
PRINT_ROUNDING_BYTES = 0.005 * GiB
"""Half the last printed digit of vLLM's GiB figures (two decimals)."""

_MEASURED_PROFILE_VERSIONS = ((0, 15, 0), (0, 19, 99))
"""vLLM versions whose profile-run peak was checked against H100 logs (0.15–0.19; the ≤0.16 sort fit's campaign)."""


def activation_item(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, mnbt: int, seqs: int,
                    stage: PPStage, v2: bool = False) -> Deduction:
    """The profile run's torch peak, with the other sampler backend and the era's evidence as its range; ``v2``: the
    V2 model runner's profile (vllm_runner.py), whose greedy dummy sampler up to 0.32 takes no sampler backend."""
    vtxt = ".".join(map(str, ver))
    if s.activation_peak_bytes is not None:
        return Deduction("activation peak", s.activation_peak_bytes, "given (your log's torch peak increase)")
    sms = P.sm_count(gpu.gpu_id, gpu.arch)
    backend, other, why = sampler_backends(ver, s.sampler_backend, is_rocm(gpu))
    if not v2:
        backend, other, why = v1_profile_backend(ver, backend, other, why)
    elif v2_sampler(ver):
        backend, other, why = v2_sampler(ver), None, ("V2 model runner: greedy dummy requests, no top-k/top-p, so "
                                                     "no sampler backend enters the profile (gpu/sample/sampler.py)")
    ep = ep_size(model, s)  # --enable-expert-parallel: whole experts, so the fused-MoE workspaces take I, not I/TP
    dp = s.data_parallel_size or 1  # with EP, each GPU's MoE layers run every DP rank's rows (vllm_dp_moe.py)
    a2a = all2all_choice(ver, s.all2all_backend)  # ... as its all2all backend moves them (vllm_all2all.py)
    mla = profile_mla(model, gpu, s, ver, seqs)
    peak, src = P.activation_peak(model, ver, mnbt, seqs, s.tp, stage, sms, backend, gpu.arch, ep, mla, dp, a2a)
    ends = [peak] + ([P.activation_peak(model, ver, mnbt, seqs, s.tp, stage, sms, other, gpu.arch, ep, mla, dp,
                                         a2a)[0]]
                     if other else [])
    rows = moe_profile_rows(model, mnbt, dp, ep, a2a)
    # the MoE kernel's choice, when unknown; DP × EP: the profile's whole-chunk reservation (vllm_moe_workspace)
    ws, ws_lo, ws_hi, _ = P.moe_workspace(model, ver, rows, s.tp, gpu.arch, ep, dp, a2a.backend)
    if mla is None or mla.kept < ws_hi:  # the indexer's workspace, when larger, holds the MoE's whichever kernel runs
        ends += [min(ends) - (ws - ws_lo), max(ends) + (ws_hi - ws)] if ws_hi > ws_lo else []
    lo_v, hi_v = _MEASURED_PROFILE_VERSIONS
    if lo_v <= ver <= hi_v and gpu.arch == "sm90":
        err, ev = 0.03 * GiB, "±0.03 GiB (H100 logs)"
        if model.is_moe:  # the fused-MoE workspace estimate: Llama-4-Scout TP 4 is 3.4% low in the 0.19 corpus
            err, ev = max(err, 0.04 * peak), "±4% for MoE (Llama-4-Scout TP 4: 3.4% in the 0.19 corpus)"
    elif lo_v <= ver:
        err, ev = 0.1 * peak, f"±10% (no vLLM {vtxt} profile log on this GPU)"
    else:  # V0 and early V1: the sampler's copies were never measured; its floor is the logits themselves
        ends.append(P.activation_peak(model, ver, mnbt, seqs, s.tp, stage, sms, "logits-only", gpu.arch, ep, mla,
                                      dp, a2a)[0])
        err, ev = 0.1 * peak, f"±10%, down to a logits-only sampler (no vLLM {vtxt} profile log)"
    return Deduction("activation peak", peak, f"model, vLLM {vtxt} profile run: {src}",
                    max(0.0, min(ends) - err), max(ends) + err, f"{why}; {ev}")


def profile_mla(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, seqs: int) -> MLAProfile | None:
    """The MLA dummy and indexer workspace of vLLM's profile run at these settings (vllm_mla_profile.py): sized by
    max_model_len as vLLM resolves it (the given one, else the config's) and the block size it picks."""
    if not any(getattr(x, "kind", "") == "mla" for x in model.layers):
        return None
    block, _ = vllm_block_size(model, s, ver, gpu.arch, has_compressed_mla(model.layers), gpu.capability)
    return mla_profile(model, ver, s.max_model_len or config_len(model, s)[0], seqs, block, s.tp)


def cudagraph_item(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, seqs: int, mnbt: int,
                   runner_src: str = "") -> Deduction:
    """vLLM's CUDA-graph estimate (``vllm_profile.cudagraph_estimate``, range ``cudagraph_range``), plus FlashInfer's
    sparse MLA workspace, which the first FULL capture allocates and keeps (vllm_mla_profile.py)."""
    cap = s.max_cudagraph_capture_size
    cg, src = P.cudagraph_estimate(len(cudagraph_capture_sizes(seqs, mnbt, cap)), cap=cap, seqs=seqs)
    fi, fi_src = flashinfer_sparse_workspace(sparse_mla_choice(model, ver, gpu.arch, s.kv_cache_dtype, s.tp), ver)
    src = f"{src}{' ' * bool(fi_src)}{fi_src}" + (f"; {runner_src}" if runner_src else "")
    lo, hi, why = cudagraph_range(cg)
    return Deduction("CUDA graphs (estimate)", cg + fi, N.cudagraphs_subtracted(src), lo + fi, hi + fi, why)
