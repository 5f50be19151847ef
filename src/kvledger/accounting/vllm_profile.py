"""vLLM's memory profile version by version: the activation peak, non-torch memory and CUDA-graph estimate per GPU.

What vLLM subtracts before the KV pool (``gpu_worker.py::determine_available_memory``, 0.10–0.19: weights + torch
peak increase + non-torch increase; from 0.20 also the CUDA-graph estimate) is measured in ``profile_run``: one forward
pass over ``max_num_batched_tokens`` tokens, then, on the last pipeline stage only, ``_dummy_sampler_run`` over
``min(max_num_seqs, max_num_batched_tokens)`` requests with temperature 0.5, top-p 0.9, top-k vocabulary − 1, no
logprobs (``gpu_model_runner.py``, alike in every wheel read: 0.11.2–0.18, each of 0.20–0.33). The torch peak is the
larger of the two transients.

Sampler, per logit (requests × vocabulary), from the code:
  * 0.17+ (``sample/ops/topk_topp_triton.py``, batch ≥ 8; any batch from 0.30, ``topk_topp_sampler.py``): the
    model-dtype logits (d B), their fp32 copy, ``probs`` and the noise ``q`` (4 B each) are live at once = d + 12 B;
    the Triton kernel keeps a cached fp32 buffer of (SMs × vocabulary). From 0.21 a second, seeded pass runs
    through ``forward_native`` (``vllm_sampler.py``) after the first is freed: same peak.
  * up to 0.16 (``apply_top_k_top_p`` sorts the fp32 logits: values, int64 indices, the radix sort's
    double buffers, the scattered result) the per-logit bytes are fitted: SAMPLER_BYTES_PER_LOGIT_SORT.
The final hidden states of the forward (tokens × hidden × d) are still referenced during the sampler.

Fitted, with the data named at each constant: the fixed part of the peak (ACTIVATION_FIXED_BYTES), the sort-era
per-logit bytes, non-torch memory by TP/PP, and the CUDA-graph first-capture and per-graph bytes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from kvledger.accounting.vllm_all2all import All2AllChoice
from kvledger.accounting.vllm_dp_moe import dp_moe_words, gathered_hidden_bytes, moe_profile_rows
from kvledger.accounting.vllm_mla_profile import MLAProfile
from kvledger.accounting.vllm_mlp import mlp_peak
from kvledger.accounting.vllm_moe_workspace import moe_dims, moe_workspace, moe_workspace_bytes, transient_workspace
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB, MiB

__all__ = ["ACTIVATION_FIXED_BYTES", "SAMPLER_BYTES_PER_LOGIT_SORT", "CUDAGRAPH_FIRST_CAPTURE_BYTES",
           "CUDAGRAPH_BYTES_PER_GRAPH", "PPStage", "pp_stages",
           "stage_model", "sampler_peak_bytes", "forward_hidden_copies", "forward_peak_bytes", "moe_workspace_bytes",
           "moe_workspace", "activation_peak", "non_torch", "cudagraph_estimate", "sm_count"]

ACTIVATION_FIXED_BYTES = int(0.05 * GiB)
"""Torch peak not explained by the sampler or forward tensors above, B: 0.05 GiB. Data: the vLLM 0.19.0 H100
start-ups of Llama-3.1-8B-Instruct (bf16 1.89, fp32 2.21 GiB) and Qwen2.5-7B-Instruct (2.21 GiB) in
shared/data/vllm-startups-0.19 leave 0.052, 0.065 and 0.050 GiB above the code-derived terms (mean 0.056,
rounded down so that both bf16 rows print as logged); errors after the fit −0.002, −0.015 and 0.000 GiB
(the logs print 2 decimals). Kept in every version."""

SAMPLER_BYTES_PER_LOGIT_SORT = 35.95
"""Bytes per (request × vocabulary) logit at the sampler's peak up to vLLM 0.16 (sort-based top-k/top-p),
on top of the model-dtype logits (d B): fitted by least squares to the two dense pre-0.17 H100 logs at
1,024 requests, Llama-3.1-8B 4.76 and Qwen3-0.6B 5.56 GiB (data/vllm_memory_observations.csv), after the
hidden-state and fixed terms (errors −0.006 and +0.004 GiB). Not fitted to: gpt-oss-20b 7.38 GiB (same file;
7.372 predicted) and Qwen3-14B 5.64 GiB in 0.15/0.16 (the same campaign's version sweep; 5.627 predicted);
see tests/accounting/test_vllm_profile.py."""

CUDAGRAPH_FIRST_CAPTURE_BYTES = 244 * MiB
"""First captured graph of a mode (its private pool), B: vLLM 0.19 ``profile_cudagraph_memory`` logs
"Estimated FULL/PIECEWISE CUDA graph memory: A MiB first-capture + (n-1) × B MiB per-graph"; the larger first
capture is 260 MiB (Llama-3.1-8B) and 228 MiB (Qwen2.5-7B) at TP 1 on H100 (vllm-startups-0.19): mean 244 MiB."""

CUDAGRAPH_BYTES_PER_GRAPH = 5 * MiB
"""Each further graph, B: 6 and 6 MiB (Llama-3.1-8B PIECEWISE, FULL), 4 and 4 MiB (Qwen2.5-7B) in the same logs: mean 5
MiB. With the code's total below this gives 0.73 GiB for 51 sizes in both modes; the logs print 0.84 and 0.61 GiB
(error ±0.12 GiB on those two; across the corpus the estimate ranges 0.49–1.69 GiB: the range,
``vllm_terms.CUDAGRAPH_LOGGED_RATIO``)."""

_SM_BY_ARCH = {"sm90": 132, "sm100": 148, "sm80": 108, "sm89": 142}

_LAYER_RE = re.compile(r"\.(?:layers|h|blocks|layer)\.(\d+)\.")


def sm_count(gpu_id: str, arch: str = "") -> int:
    """SMs (NVIDIA) or CUs (AMD) of a catalog GPU (``catalog.compute_units``: torch's ``multi_processor_count``, which
    vLLM's ``num_compute_units`` reads), else of its architecture's largest part (132, Hopper, when unknown), count.
    The Triton top-k/top-p buffer (``topk_topp_triton.py::apply_top_k_top_p_triton``) has min(this, requests)
    programs, one fp32 vocab row each: the profile run's buffer is min(SMs or CUs, dummy requests) × vocab × 4 B."""
    from kvledger.catalog.compute_units import compute_units

    cu = compute_units(gpu_id)
    return cu.count if cu is not None else _SM_BY_ARCH.get(arch, 132)


@dataclass(frozen=True)
class PPStage:
    """One pipeline-parallel stage: ranks hold layers [start_layer, end_layer); the first holds the
    embedding, the last the final norm, LM head and sampler."""

    rank: int
    pp: int
    start_layer: int
    end_layer: int

    @property
    def is_first(self) -> bool:
        return self.rank == 0

    @property
    def is_last(self) -> bool:
        return self.rank == self.pp - 1

    @property
    def num_layers(self) -> int:
        return self.end_layer - self.start_layer


def pp_stages(num_layers: int, pp: int) -> list[PPStage]:
    """vLLM's layer split (``distributed/utils.py::get_pp_indices``): L // pp layers each, the remainder
    added one by one from the second-to-last stage backwards."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    out, start = [], 0
    for r, n in enumerate(parts):
        out.append(PPStage(r, pp, start, start + n))
        start += n
    return out


def stage_model(model: ModelSpec, st: PPStage) -> ModelSpec:
    """The part of ``model`` one stage loads: its layers and their weights; the embedding on the first stage;
    the final norm and LM head on the last (a tied LM head is its own copy there when pp > 1)."""
    if st.pp == 1:
        return model
    ws = []
    for w in model.weights:
        m = _LAYER_RE.search(w.path)
        if m:
            if st.start_layer <= int(m.group(1)) < st.end_layer:
                ws.append(w)
        elif "embed" in w.path or ".wte." in w.path:
            if st.is_first or (st.is_last and model.tie_word_embeddings):
                ws.append(w)
        elif st.is_last:
            ws.append(w)
    return replace(model, layers=model.layers[st.start_layer:st.end_layer], num_layers=st.num_layers, weights=tuple(ws))


FLASHINFER_BYTES_PER_LOGIT = 12
"""FlashInfer top-k/top-p sampler, B per logit beyond the model-dtype logits (vLLM 0.9–0.11
``topk_topp_sampler.py::flashinfer_sample`` → ``top_k_top_p_sampling_from_logits``): the sampler's fp32 copy of the
logits (4), FlashInfer's ``top_k_mask_logits`` output (4) and the softmax ``probs`` (4), live at once; no sort."""

AITER_BYTES_PER_LOGIT = 8
"""ROCm AITER sampler (vLLM ≥0.12 ``topk_topp_sampler.py::aiter_sample``), B per logit beyond the model-dtype logits:
fp32 logits (4, temperature in place) and the fp32 softmax probs (4) it samples from; no sort (its kernel: not read)."""

_SORT_FREE = {"flashinfer": (FLASHINFER_BYTES_PER_LOGIT, "4 + 4 + 4", "FlashInfer top-k/top-p: fp32 logits, masked "
                             "logits, probs; topk_topp_sampler.flashinfer_sample"),
              "aiter": (AITER_BYTES_PER_LOGIT, "4 + 4", "ROCm AITER: fp32 logits, probs; topk_topp_sampler.py"),
              "flashinfer-v0": (12, "4 + 4 + 4", "V0 FlashInfer: fp32 logits, probs, logprobs, no sort; sampler.py"),
              "v2-greedy": (0, "0", "V2 runner's greedy dummy requests: the logits alone; gpu/sample/sampler.py")}


def sampler_peak_bytes(model: ModelSpec, ver: tuple[int, int, int], num_reqs: int, num_sms: int = 132,
                       backend: str = "pytorch") -> tuple[float, str]:
    """Sampler transient at ``num_reqs`` dummy requests per GPU, B; ``backend``: pytorch, flashinfer or aiter (ROCm)."""
    n = num_reqs * model.vocab_size
    if backend == "logits-only":  # the floor of any sampler: the model-dtype logits and one fp32 copy
        return n * (model.dtype_bytes + 4), f"sampler floor {num_reqs} reqs × vocab × ({model.dtype_bytes} + 4) B"
    if backend in _SORT_FREE:
        extra, terms, what = _SORT_FREE[backend + ("-v0" if ver < (0, 8, 0) else "")]
        return n * (model.dtype_bytes + extra), (f"sampler {num_reqs} reqs × {model.vocab_size:,} vocab × "
                                                 f"({model.dtype_bytes} + {terms}) B ({what})")
    if ver >= (0, 17, 0):  # topk_topp_sampler.py::apply_top_k_top_p: Triton from 8 requests, at any batch from 0.30
        rows = min(num_sms, num_reqs) if num_reqs >= 8 or ver >= (0, 30, 0) else 0
        return n * (model.dtype_bytes + 12) + rows * model.vocab_size * 4, (
            f"sampler {num_reqs} reqs × {model.vocab_size:,} vocab × ({model.dtype_bytes} + 4 + 4 + 4) B + Triton "
            f"top-k/top-p buffer {rows} × vocab × 4 B (vLLM {'.'.join(map(str, ver))} topk_topp_sampler.py, "
            f"topk_topp_triton.py)")
    per = model.dtype_bytes + SAMPLER_BYTES_PER_LOGIT_SORT
    return n * per, (f"sampler {num_reqs} reqs × {model.vocab_size:,} vocab × ({model.dtype_bytes} + "
                     f"{SAMPLER_BYTES_PER_LOGIT_SORT}) B "
                     "(sort-based top-k/top-p up to vLLM 0.16; fitted to 2 H100 logs)")


def forward_hidden_copies(ver: tuple[int, int, int] | None) -> int:
    """Hidden-size activations live at a decoder layer's peak: 3 in the V0 engine (< 0.8), 4 from 0.8.

    V0 runs the layers eagerly (``models/llama.py`` of 0.6.4 and 0.7.2): ``fused_add_rms_norm`` normalises in
    place (``layers/layernorm.py::RMSNorm.forward_cuda``), so while ``LlamaMLP.forward`` holds gate/up (2·I) and
    the activation (I), only the layer's input (still held by the model's loop), the residual and the MLP's
    input are live: 3·h. vllm#10517 (0.6.4, RTX 3090, Llama-3.1-8B, no chunking) prints torch peaks 2.07 and
    2.99 GiB above the weights at 20,000 and 29,000 tokens: 3·h + 3·I gives 2.060 and 2.987 (4·h: 2.21, 3.20).
    From 0.8 (torch.compile graphs) the 0.19 logs fit 4·h (see ``forward_peak_bytes``)."""
    return 3 if ver is not None and ver < (0, 8, 0) else 4


def forward_peak_bytes(model: ModelSpec, num_tokens: int, tp: int = 1,
                       ver: tuple[int, int, int] | None = None) -> float:
    """Transient of one decoder layer's forward over ``num_tokens`` tokens, per GPU, B.

    Live at once: residual, normed input, attention output and the running hidden state (4·h; 3·h in the V0
    engine, ``forward_hidden_copies``), and the MLP's (``vllm_mlp.mlp_peak``: gate/up and activation, 3·I/TP; plain
    fc1 → act, OPT/GPT-2/Falcon/Phi..., 2·I/TP; MoE: shared experts, gated, the routed ones in ``moe_workspace_bytes``).
    From the layer code; checked against the 0.19 logs where the forward dominates (Llama-3.1-8B middle PP stages
    log 1.05 GiB, this gives 1.08 with the fixed term and PP buffers)."""
    mlp = 3 * moe_dims(model)[1] if model.is_moe else mlp_peak(model).elements
    return num_tokens * (forward_hidden_copies(ver) * model.hidden_size + mlp / tp) * model.dtype_bytes


def activation_peak(model: ModelSpec, ver: tuple[int, int, int], mnbt: int, max_num_seqs: int, tp: int = 1,
                    stage: PPStage | None = None, num_sms: int = 132, backend: str = "pytorch",
                    arch: str = "", ep: int = 1, mla: MLAProfile | None = None, dp: int = 1,
                    a2a: All2AllChoice | None = None) -> tuple[float, str]:
    """The "torch peak memory increase" of vLLM's profile run on one GPU of ``stage``, B, and how it was built;
    ``ep`` > 1: ``--enable-expert-parallel`` (whole experts per rank: vllm_moe_workspace.py); ``mla``: the MLA
    attention's profile dummy and DeepSeek-V3.2's indexer workspace (vllm_mla_profile.py); ``dp``: DP ranks, whose
    rows the MoE layers gather under expert parallelism (vllm_dp_moe.py; ``a2a``: its all2all backend)."""
    st = stage or PPStage(0, 1, 0, model.num_layers)
    hidden = mnbt * model.hidden_size * model.dtype_bytes
    rows = moe_profile_rows(model, mnbt, dp, ep, a2a)
    ws, _, _, ws_why = moe_workspace(model, ver, rows, tp, arch, ep, dp, a2a.backend if a2a else None)
    # up to 0.14 the routed experts' Triton caches live during the forward only (fused_experts_impl, vLLM 0.11.0)
    cache, cache_why = transient_workspace(model, ver, rows, tp, ep) if not ws else (0.0, "")
    fwd = forward_peak_bytes(model, mnbt, tp, ver) + cache + gathered_hidden_bytes(model, mnbt, dp, ep, a2a, ver, arch)
    k, mlp = forward_hidden_copies(ver), (None if model.is_moe else mlp_peak(model))
    peak, why = fwd, (f"forward over {mnbt:,} tokens × ({k}·h + {mlp.copies if mlp else 3}·I/TP) × {model.dtype_bytes} "
                      f"B (layer code{'; V0 norms in place' if k == 3 else ''}"
                      f"{f'; {mlp.source}' if mlp and mlp.copies == 2 else ''}){' ' * bool(cache_why)}{cache_why}")
    if mla is not None and k * hidden + mla.dummy > fwd:  # the attention's dummy beside the layer's hidden states
        fwd = peak = k * hidden + mla.dummy
        why = f"attention over {mnbt:,} tokens × {k}·h × {model.dtype_bytes} B + {mla.why}"
    if st.is_last:
        smp, src = sampler_peak_bytes(model, ver, min(max_num_seqs, mnbt), num_sms, backend)
        if smp + hidden >= fwd:
            peak, why = smp + hidden, src + f" + {mnbt:,} × {model.hidden_size} × {model.dtype_bytes} B hidden states"
    if mla is not None and mla.kept > ws:  # one workspace-manager buffer, grown to the largest request
        peak += mla.kept
        why += f"; + {mla.kept / GiB:.2f} GiB workspace-manager buffer (the indexer's; fused-MoE workspaces share it)"
    elif ws or ws_why:
        peak += ws
        why += f"; + {ws / GiB:.2f} GiB fused-MoE workspaces " + (f"kept after the forward ({ws_why})" if ws_why
                                                                    else "(kept by the workspace manager)")
    if st.pp > 1:
        peak += 2 * hidden
        why += "; + PP intermediate tensors (hidden + residual)"
    if dp_words := dp_moe_words(model, mnbt, dp, ep, a2a, ver, arch):
        why += "; " + dp_words
    return (
        peak + ACTIVATION_FIXED_BYTES,
        why + f"; + {ACTIVATION_FIXED_BYTES / GiB:.2f} GiB fixed (fitted to vLLM 0.19 logs)",
    )


def non_torch(ver: tuple[int, int, int], tp: int, pp: int) -> tuple[float, str]:
    """Non-torch memory growth during profiling per GPU (CUDA context remainder, cuBLAS, NCCL/all-reduce buffers), B.

    Measured, not derived (the engine code does not size it): vLLM 0.19.0 on H100 logs 0.24–0.25 GiB at
    TP 1, 2.06–2.07 at TP 2, 2.13–2.17 at TP 4 and 0.07 on every stage at PP 2 and 4 (vllm-startups-0.19);
    before 0.18, 0.13 GiB at TP 1 (vllm_memory_observations.csv and a Qwen3-14B version sweep of the same
    campaign: 0.13 → 0.25 GiB at 0.18). TP > 1 is interpolated in log2(TP) between 2.07 (TP 2) and 2.13 (TP 4).
    """
    if tp > 1:
        v = 2.07 + 0.06 * (math.log2(tp) - 1)
        src = (f"measured on vLLM 0.19 H100 at TP 2/4 (2.07/2.13 GiB, NCCL and custom all-reduce buffers); "
               f"TP {tp}: log2 interpolation")
        if tp > 4:
            src += " (extrapolated beyond TP 4)"
        if ver < (0, 18, 0):
            src += f"; not measured for vLLM {'.'.join(map(str, ver))}"
        return v * GiB, src
    if pp > 1:
        return 0.07 * GiB, "measured on vLLM 0.19 H100, every stage at PP 2 and 4 (0.07 GiB)"
    if ver >= (0, 18, 0):
        return 0.25 * GiB, "measured on vLLM 0.19 H100 at TP 1 (0.24–0.25 GiB; 0.25 from 0.18)"
    return 0.13 * GiB, "measured 0.13 GiB on H100 TP 1 before vLLM 0.18 (vllm_memory_observations.csv)"


def cudagraph_estimate(num_sizes: int, full_and_piecewise: bool = True, cap: int | None = None, seqs: int = 0) -> tuple:
    """vLLM's pre-KV CUDA-graph estimate, B (``gpu_model_runner.py::profile_cudagraph_memory``, 0.19–0.33): the modes
    share one pool, so total = max over modes of the first capture + Σ over modes (n − 1) × per-graph (both fitted:
    CUDAGRAPH_FIRST_CAPTURE_BYTES, CUDAGRAPH_BYTES_PER_GRAPH); a ``cap`` below ``seqs`` (max_num_seqs): its price."""
    if num_sizes <= 0:
        return 0.0, "no CUDA graphs captured"
    modes = 2 if full_and_piecewise else 1
    return CUDAGRAPH_FIRST_CAPTURE_BYTES + modes * (num_sizes - 1) * CUDAGRAPH_BYTES_PER_GRAPH, (
        f"{CUDAGRAPH_FIRST_CAPTURE_BYTES // MiB} MiB first capture + {modes} mode(s) × ({num_sizes} − 1) graphs × "
        f"{CUDAGRAPH_BYTES_PER_GRAPH // MiB} MiB (profile_cudagraph_memory's sum; sizes fitted to vLLM 0.19 H100 logs; "
        f"range ×0.66–×2.34 over the corpus)" + (f"; --max-cudagraph-capture-size {cap}: decode batches above {cap} "
                                                 "run without CUDA graphs, slower steps the step cost does not price"
                                                 if cap and cap < seqs else ""))
