"""The non-KV memory terms an engine reserves besides weights: activation peak, non-torch memory, CUDA graphs.

vLLM plans use the version-by-version rules of ``vllm_profile.py``; this module keeps the forward-pass
estimate and the 0.13 GiB non-torch figure the SGLang and TensorRT-LLM plans use, the CUDA-graph capture
sizes, and the original single sampler fit (pre-0.17 logs), which ``vllm_profile`` supersedes.

These are modelled, not read from code, and are fitted to public start-up logs
(``catalog/data/vllm_memory_observations.csv``: three vLLM runs on one H100 at
max_num_batched_tokens 8192 and max_num_seqs 1024). Each function returns bytes and a
source string; users with a log should pass the measured values instead.

Activation peak. vLLM's profile run (``gpu_model_runner.py::profile_run``) does one forward
pass over ``max_num_batched_tokens`` tokens, then a dummy sampler pass over
``min(max_num_seqs, max_num_batched_tokens)`` requests with every sampling feature on
(``_dummy_sampler_run``). The torch peak is the larger of the two transients. In the three
logs the peak is proportional to the vocabulary, not to hidden size (Qwen3-0.6B with
hidden 1024 peaks higher than Llama-3.1-8B), so the sampler dominates: fitted
``peak = k · num_reqs · vocab · 4 B + T · hidden · dtype_bytes`` with k = SAMPLER_FP32_COPIES.
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB, MiB

__all__ = ["SAMPLER_FP32_COPIES", "NON_TORCH_BYTES", "CUDAGRAPH_BYTES_PER_GRAPH", "TRTLLM_PLAIN_MLP_ARCHS",
           "trtllm_plain_mlp", "activation_peak_bytes",
           "forward_peak_bytes", "sampler_peak_bytes", "cudagraph_capture_sizes", "cudagraph_bytes",
               "fit_sampler_copies"]

SAMPLER_FP32_COPIES = 9.57
"""Live fp32 (num_reqs × vocab) tensors at the sampler's peak, fitted by least squares to the three
H100 logs in vllm_memory_observations.csv (Llama-3.1-8B 4.76, gpt-oss-20b 7.38, Qwen3-0.6B 5.56 GiB;
residuals −0.015, +0.005, +0.002 GiB). ``tests/accounting/test_overheads.py`` re-fits it from the file."""

NON_TORCH_BYTES = int(0.13 * GiB)
"""CUDA context, cuBLAS workspaces and other non-torch allocations after profiling: 0.13 GiB in all
three H100 TP=1 logs (vllm_memory_observations.csv). TP > 1 adds NCCL buffers that are not modelled."""

CUDAGRAPH_BYTES_PER_GRAPH = 8 * MiB
"""Per captured graph, B. An assumption: public 0.21+ logs print totals of 0.17 GiB (club-3090 #127)
and 0.36 GiB for 16 graphs (gpustack/runner #251); vllm #50780 measures ~24 MiB per FULL graph while
vllm #45178 shows the estimator overshooting. Pass your log's "Estimated CUDA graph memory" instead."""


TRTLLM_PLAIN_MLP_ARCHS = ("Starcoder2ForCausalLM",)
"""Architectures TensorRT-LLM's PyTorch backend builds with the plain ``_torch/modules/mlp.py::MLP`` (``up_proj`` →
activation → ``down_proj``, no gate): ``_torch/models/modeling_starcoder2.py`` (``nn.GELU``, out of place), read in a
stored copy of ``main`` (not pinned to a release). Its ``forward`` keeps ``up_proj``'s output (I/TP) alive while the
activation writes its own (I/TP): 2·I/TP. The other plain-MLP families vLLM serves (OPT, GPT-2, Falcon, BLOOM, MPT...)
have no model file there (no ``modeling_gpt2.py``, ``modeling_phi.py``); Nemotron-H's relu² MLP is left gated-sized
(its ``relu2`` helper not read)."""


def trtllm_plain_mlp(model: ModelSpec) -> bool:
    """Whether TensorRT-LLM's PyTorch backend runs ``model``'s dense MLP plain (``TRTLLM_PLAIN_MLP_ARCHS``)."""
    return not model.is_moe and any(a in TRTLLM_PLAIN_MLP_ARCHS for a in model.architectures)


def forward_peak_bytes(model: ModelSpec, num_tokens: int, tp: int = 1, plain_mlp: bool = False) -> float:
    """Transient activations of one decoder layer's forward over ``num_tokens`` tokens, per GPU, B.

    Live at once: the residual and normed hidden state (2·h), the q/k/v output
    ((H_q + 2·H_kv)·d), and the MLP's gate/up output plus its activation (3·I; 2·I for a plain
    MLP, ``plain_mlp``: fc1's output and its activation's; for MoE top_k × 3·I_moe per token, the
    fused-MoE intermediate cache). An estimate, not fitted: in the logs the sampler transient is larger.
    """
    h, d = model.hidden_size, model.head_dim
    qkv = (model.num_attention_heads + 2 * model.num_kv_heads) * d / tp
    if model.is_moe:
        inter = max((w.rows for w in model.weights if w.expert and w.path.endswith("up_proj.weight")),
                    default=model.intermediate_size)
        mlp = model.experts_per_token * 3 * inter / tp
    else:
        mlp = (2 if plain_mlp else 3) * model.intermediate_size / tp
    return num_tokens * (2 * h + qkv + mlp) * model.dtype_bytes


def sampler_peak_bytes(model: ModelSpec, num_reqs: int, copies: float = SAMPLER_FP32_COPIES) -> float:
    """Sampler transient at ``num_reqs`` dummy requests: ``copies × num_reqs × vocab × 4 B`` (fp32 logits), B."""
    return copies * num_reqs * model.vocab_size * 4


def activation_peak_bytes(model: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int, tp: int = 1) -> tuple[float,
    str]:
    """The torch peak increase of vLLM's profile run, per GPU, B, and how it was obtained."""
    reqs = min(max_num_seqs, max_num_batched_tokens)
    fwd = forward_peak_bytes(model, max_num_batched_tokens, tp)
    hidden = max_num_batched_tokens * model.hidden_size * model.dtype_bytes
    smp = sampler_peak_bytes(model, reqs) + hidden
    if smp >= fwd:
        return smp, (f"model: sampler pass {SAMPLER_FP32_COPIES} × {reqs} reqs × {model.vocab_size:,} vocab × 4 B "
                     f"+ {max_num_batched_tokens} tokens × {model.hidden_size} × {model.dtype_bytes} B hidden states "
                     "(fitted to 3 H100 vLLM logs, within 0.02 GiB)")
    return fwd, (f"model: forward pass over {max_num_batched_tokens} tokens × (2·h + qkv + 3·I) × {model.dtype_bytes} "
                 f"B "
                 "(estimate; exceeds the fitted sampler term)")


def cudagraph_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int,
                            max_capture_size: int | None = None) -> list[int]:
    """vLLM's default CUDA-graph batch sizes: 1, 2, 4, then steps of 8 to 256 and of 16 beyond, up to
    ``min(max_capture_size or min(2 × max_num_seqs, 512), max_num_batched_tokens)`` (``config/vllm.py ::
    _set_cudagraph_sizes``; ``--max-cudagraph-capture-size`` gives the cap)."""
    top = min(max_capture_size or min(2 * max_num_seqs, 512), max_num_batched_tokens)
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
    return [s for s in sizes if s <= top]


def cudagraph_bytes(max_num_seqs: int, max_num_batched_tokens: int) -> tuple[float, str]:
    """Estimated CUDA-graph memory, B: number of captured sizes × CUDAGRAPH_BYTES_PER_GRAPH (an assumption)."""
    n = len(cudagraph_capture_sizes(max_num_seqs, max_num_batched_tokens))
    return (
        n * CUDAGRAPH_BYTES_PER_GRAPH,
        f"assumption: {n} captured sizes × {CUDAGRAPH_BYTES_PER_GRAPH // MiB} MiB per graph",
    )


def fit_sampler_copies(rows: list[tuple[ModelSpec, float, int, int]]) -> float:
    """Least-squares ``k`` in ``peak − T·h·dtype = k · reqs · vocab · 4`` over (model, peak_bytes, mnbt, max_num_seqs)
    rows."""
    num = den = 0.0
    for m, peak, mnbt, seqs in rows:
        x = min(seqs, mnbt) * m.vocab_size * 4
        y = peak - mnbt * m.hidden_size * m.dtype_bytes
        num += x * y
        den += x * x
    return num / den
