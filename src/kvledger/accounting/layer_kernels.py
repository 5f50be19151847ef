"""The non-GEMM kernels of each decoder layer — RMSNorms, RoPE, the gated activation, the residual add — priced from
their measured floors and their bytes: a property of the GPU and the layer's widths, not fitted to a model.

The roofline prices a layer's weight GEMMs and its attention; the small kernels between them are neither. Each reads
and writes the step's activations once, so at a prefill's thousands of tokens it moves bytes at the HBM's pace, and
at a decode step's few dozen it runs at its floor: a few microseconds set by the launch and by the row width one
thread block walks. On an H100 SXM Vidur's profiles time them at 13–22 µs per layer at TP 4 and 19–41 µs at TP 1 for
1–128 tokens: an 80-layer Llama-2-70B at TP 4 spends ~1.6 ms of each decode step in them, against ~13 ms of weight
read, and none of it was priced before.

Data: Vidur's operator profiles (microsoft/vidur, MIT; ``data/profiling/vidur/compute/<gpu>/*/mlp_median.csv``, the
files ``gemm_efficiency`` reads): the median time of ``input_layernorm``, ``post_attention_layernorm``, ``attn_rope``,
``mlp_act`` and ``add`` per layer against ``num_tokens`` (1 … 4,096) at TP 1, 2, 4, 8, for 5–7 model shapes per GPU
(rows without a post-attention norm, phi-2's, are left out); for the RTX PRO 6000, LLMServingSim's profiles of vLLM
0.19's own modules (``op_profiles``: its ``layernorm`` for both norms, the residual add inside it, so no ``add`` op).

Model, per op (``OPS``), for a step of T tokens::

    t(T) = max(a + w · width, bytes(T) / bandwidth)

* ``width``, the elements of one row a block handles: the hidden size for the norms and the add, (query + KV
  heads) / TP × head size for RoPE, intermediate size / TP for the activation;
* ``bytes``, activations read and written once (2 B each): norms 4·T·H, add 6·T·H, RoPE 4·T·(H_q + H_kv)/TP·d,
  activation 6·T·I/TP (gated; 4·T·I/TP otherwise); a model without RoPE (OPT's learned positions) has no RoPE op;
* ``a`` and ``w``, the floor: least squares over the rows of at most ``FLOOR_MAX_TOKENS`` tokens;
* ``bandwidth``: at run time the roofline's own (HBM × its bandwidth share, 0.8 uncalibrated), as every other byte
  it prices. The fit also reads Vidur's (the median bytes / time of the rows slower than three times the median
  floor: 1.1–1.8 TB/s on the H100 for the norms, RoPE and activation, 34–55% of its HBM), kept for the fit's error
  but not used: those were vLLM's 2023 kernels, since vectorized (vllm-project/vllm PR #27931 for ``rms_norm``) and,
  in V1, compiled with the model (torch.compile).

A layer's kernels (``layer_ops``): one norm per hidden-size norm weight of layer 0 (Llama's two, at Vidur's input and
post-attention norms' floors; Gemma-2's four; phi-2's one), RoPE unless the model has none, the activation (a gated
one's floor: every Vidur row is gated), one ``add`` (Vidur's harness's; where a GPU's profiles time none, vLLM 0.19's,
an RMSNorm model has none and a LayerNorm model's sits at the norm's floor: ``rms_norms``). vLLM runs no add for an
RMSNorm model (from 0.2.2 ``models/llama.py``, ``mistral.py``, ``qwen.py`` hand the residual to both norms:
``layernorm.py::RMSNorm.forward`` → ``fused_add_rms_norm``) and two for a LayerNorm one (0.2.3 and 0.11.0 ``opt.py``:
``residual + hidden_states`` twice); priced so, the measured counts fell (leave-one-deployment-out throughput 8/9 →
7/9), so the one add stays until what else is missing is found. Hybrid models (Mamba, linear attention) get no term
(``kernels_apply``). Bytes are priced at the roofline's bandwidth (Vidur's 2023 kernels were slower than today's); on
a GPU whose profiles are of today's engine (``LayerKernelFit.bytes_at_fit``: the RTX PRO 6000, whose activations of up
to a few thousand tokens stay in its L2) at the faster of that and the profiles' own.

The fit's error is the |predicted / measured − 1| of the per-layer sum with Vidur's own bandwidth end, in sample and
leaving each model shape (all its TPs) out (``LayerKernelFit.loso_*``); the max() under-prices the bend between the
two ends (leave-one-shape-out bias at ≤ 256 tokens −8% on the H100, −11% on the A100). The term is part of the
measured pricing (``--gemm-efficiency measured``, the default) on the GPUs with operator profiles
(``op_profiles.PROFILED_GPU``) and their ``SAME_DIE`` twins, whatever the weights' dtype: vLLM builds the same norms,
RoPE and activation for an FP8 or quantized model (0.11.0 ``models/llama.py``: ``RMSNorm``, ``get_rope`` and
``SiluAndMul`` take no quant_config; the linear methods alone do), as a GPU nobody profiled carries them
(carried_kernels). The FP8 activations' quantization kernels (``w8a8_utils``' ``scaled_fp8_quant``) are not priced.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from statistics import median as _median

from kvledger.accounting.vidur_profiles import SAME_DIE, VIDUR_GPU, bundled_fit

__all__ = ["OPS", "kernel_words", "LayerKernelFit", "fit_layer_kernels", "layer_kernel_fit", "LayerKernels",
           "FLOOR_MAX_TOKENS", "layer_ops", "kernels_apply", "op_shape", "rms_norms"]

OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
FLOOR_MAX_TOKENS = 16  # rows at or under this many tokens fit the floor a + w · width
_BOUND = 3.0  # rows slower than this × the median floor fit the bandwidth end


@dataclass(frozen=True)
class LayerKernelFit:
    """One GPU's fit: per op ``(a_s, w_s_per_element, bandwidth_Bps)`` in ``OPS`` order, and its errors.

    Attributes:
        gpu: catalog GPU id. params: per op (floor s, floor s per row element, the profiles' achieved bytes/s — the
            fit's error uses it), None for an op the profiles never time alone (vLLM 0.19's residual add, inside its
            RMSNorm). bytes_at_fit: ``LayerKernels`` prices an op's bytes at the faster of the roofline's bandwidth
            and the profiles' (True: profiles of the engine version priced, LLMServingSim's vLLM 0.19, whose
            activations the RTX PRO 6000 moves at 2.0–3.2 TB/s, above its 1.79 TB/s GDDR7: L2-resident); False: at
            the roofline's (Vidur's 2023 kernels, slower than today's).
        source: where the data came from. shapes: the model shapes fitted. num_rows: profile rows used.
        fit_median / loso_median / loso_p90: median and 90th percentile |predicted / measured − 1| of the per-layer
            sum, in sample and leaving each shape out. loso_bias_decode: the median signed error at ≤ 256 tokens,
            leaving each shape out.
    """

    gpu: str
    params: tuple[tuple[float, float, float] | None, ...]
    source: str
    shapes: tuple[str, ...]
    num_rows: int
    fit_median: float = 0.0
    loso_median: float = 0.0
    loso_p90: float = 0.0
    loso_bias_decode: float = 0.0
    bytes_at_fit: bool = False


def op_shape(op: str, hidden: int, inter: int, heads: int, kv_heads: int, head_dim: int, tp: int,
             gated: bool = True) -> tuple[float, float]:
    """(bytes per token, row width in elements) of one op of a layer (module doc), per GPU."""
    if op in ("input_layernorm", "post_attention_layernorm"):
        return 4.0 * hidden, float(hidden)
    if op == "add":
        return 6.0 * hidden, float(hidden)
    if op == "attn_rope":  # KV heads fewer than the ranks are replicated (one per GPU), as vLLM shards them
        w = (heads // tp + max(1, kv_heads // tp)) * head_dim
        return 4.0 * w, float(w)
    return (6.0 if gated else 4.0) * (inter // tp), float(inter // tp)


def _rows(shape: str, rows, ops: tuple[str, ...] = OPS) -> list[tuple[str, int, list[tuple[float, float, float]]]]:
    """(shape, tokens, [(bytes, width, measured s) per op of ``ops``]) of one shape's profile rows
    (``op_profiles``'s layout); rows missing one of ``ops`` are skipped."""
    out = []
    for r in rows:
        if any(not r.get(f"time_stats.{op}.median") for op in ops):
            continue
        h, tp, nq = int(r["n_embd"]), int(r["num_tensor_parallel_workers"]), int(r["n_head"])
        hd, T = int(r.get("head_dim") or h // nq), int(r["num_tokens"])
        shaped = [(op_shape(op, h, int(r["n_expanded_embd"]), nq, int(r["n_kv_head"]), hd, tp,
                            r["use_gated_mlp"] == "True"), float(r[f"time_stats.{op}.median"]) * 1e-3) for op in ops]
        out.append((shape, T, [(bpt * T, w, t) for (bpt, w), t in shaped]))  # ms → s above
    return out


def _timed_ops(shapes) -> tuple[str, ...]:
    """The ``OPS`` a GPU's profiles time in some row (LLMServingSim's have no ``add``: vLLM fuses it into the norm)."""
    return tuple(op for op in OPS if any(r.get(f"time_stats.{op}.median") for _, _, rows in shapes for r in rows))


def _fit_op(pts: list[tuple[int, float, float, float]]) -> tuple[float, float, float]:
    """(a, w, bandwidth) of one op from (tokens, bytes, width, s) points (module doc): least squares, 2 unknowns."""
    small = [(w, t) for T, _, w, t in pts if T <= FLOOR_MAX_TOKENS]
    n = len(small)
    if not n:
        raise ValueError(f"no profile row of at most {FLOOR_MAX_TOKENS} tokens: the floor cannot be fitted")
    mw, mt = sum(w for w, _ in small) / n, sum(t for _, t in small) / n
    sxx = sum((w - mw) ** 2 for w, _ in small)
    slope = sum((w - mw) * (t - mt) for w, t in small) / sxx if sxx > 0 else 0.0
    a = mt - slope * mw
    floor = _median([t for _, t in small])
    bound = [b / t for _, b, _, t in pts if t > _BOUND * floor]
    if not bound:
        raise ValueError(f"no profile row slower than {_BOUND:g} × the floor: the bandwidth end cannot be read")
    return a, slope, _median(bound)


def _fit(rows, num_ops: int) -> tuple[tuple[float, float, float], ...]:
    return tuple(_fit_op([(T, *ops[i]) for _, T, ops in rows]) for i in range(num_ops))


def _layer_s(params, ops_bw: list[tuple[float, float]]) -> float:
    """Σ over ops of max(a + w · width, bytes / bandwidth), s."""
    return sum(max(a + w * width, b / bw) for (a, w, bw), (b, width) in zip(params, ops_bw, strict=True))


def _all_ops(timed: tuple[str, ...], params) -> tuple[tuple[float, float, float] | None, ...]:
    """``params`` of the ``timed`` ops spread over ``OPS``, None for an op the profiles do not time."""
    by = dict(zip(timed, params, strict=True))
    return tuple(by.get(op) for op in OPS)


def fit_layer_kernels(gpu_id: str) -> LayerKernelFit | None:
    """The fit afresh from the operator profiles of a catalog GPU id (``op_profiles.PROFILED_GPU``), with its errors;
    None for another GPU. ``layer_kernel_fit`` reads the same fit from the bundled file. An op the profiles never
    time separately (LLMServingSim's vLLM 0.19 ``add``, fused into its norm) gets None: no kernel of its own."""
    from kvledger.accounting.op_profiles import profile_shapes, source_words

    profiled = profile_shapes(gpu_id)
    if not profiled:
        return None
    timed = _timed_ops(profiled)
    rows = [r for _, name, rs in profiled for r in _rows(name, rs, timed)]
    params = _fit(rows, len(timed))
    shapes = tuple(sorted({s for s, _, _ in rows}))

    def err(p, r) -> float:
        return _layer_s(p, [(b, w) for b, w, _ in r[2]]) / sum(t for _, _, t in r[2]) - 1

    loso, dec = [], []
    for s in shapes:
        p = _fit([r for r in rows if r[0] != s], len(timed))
        for r in rows:
            if r[0] == s:
                e = err(p, r)
                loso.append(abs(e))
                if r[1] <= 256:
                    dec.append(e)
    loso.sort()
    src = source_words(gpu_id, [x for x in profiled if x[1] in shapes], "kvledger.accounting.layer_kernels")
    return LayerKernelFit(gpu_id, _all_ops(timed, params), src, shapes, len(rows),
                          _median([abs(err(params, r)) for r in rows]), _median(loso),
                          loso[min(len(loso) - 1, int(0.9 * len(loso)))], _median(dec), gpu_id not in VIDUR_GPU)


@functools.lru_cache(maxsize=8)
def layer_kernel_fit(gpu_id: str) -> LayerKernelFit | None:
    """The bundled fit for a catalog GPU id (``data/layer_kernels.json``, written by benchmarks/build_gemm_curves.py;
    a test checks it is ``fit_layer_kernels``'s), a ``SAME_DIE`` GPU's twin's; None for any other GPU."""
    if gpu_id in SAME_DIE:
        from dataclasses import replace

        twin = layer_kernel_fit(SAME_DIE[gpu_id])
        return replace(twin, gpu=gpu_id, source=f"{twin.source}; taken for {gpu_id}: the same die as {twin.gpu}")
    d = bundled_fit("layer_kernels.json", "fits", gpu_id)
    if d is None:
        return None
    return LayerKernelFit(**{**d, "params": tuple(None if p is None else tuple(p) for p in d["params"]),
                             "shapes": tuple(d["shapes"])})


def layer_ops(model) -> tuple[str, ...]:
    """The ops priced per layer (``OPS`` names, repeated): one per hidden-size norm weight of the first decoder layer
    (Llama's two; Gemma-2's four; phi-2's one, its attention and MLP in parallel), the first at Vidur's input norm's
    floor and the rest at its post-attention norm's; RoPE unless the model has none (OPT's learned positions); the
    activation; one residual add. Per-head norms (Qwen3's q/k norms) are not counted. An MoE model whose MLPs are all
    routed experts (Mixtral, Qwen3-MoE, gpt-oss) has no activation kernel of its own: vLLM runs it inside the fused-MoE
    call (``fused_experts``' ``silu_and_mul``; matmul_ogs' fused SwiGLU), priced by the fused-MoE term (moe_kernel)."""
    norms = sum(1 for w in model.weights if re.search(r"\.0\.[^.]*(norm|ln)[^.]*\.weight$", w.path)
                and w.numel == model.hidden_size) or 2
    out = ["input_layernorm"] + ["post_attention_layernorm"] * (norms - 1)
    act = ["mlp_act"] if not model.is_moe or _dense_mlp(model) else []
    return tuple(out + (["attn_rope"] if model.rope_cache_bytes else []) + act + ["add"])


def _dense_mlp(model) -> bool:
    """Whether an MoE model has MLP weights outside its routed experts (a shared expert, dense layers)."""
    return any(not w.expert and re.search(r"\.(gate_proj|up_proj|down_proj|gate_up_proj|fc1|fc2)\.weight$", w.path)
               for w in model.weights)


def rms_norms(model) -> bool:
    """Whether the model's layer norms are RMSNorms (no bias beside the first decoder layer's norm weights), which vLLM
    fuses the residual add into; LayerNorms (OPT, phi-2) have a bias and a separate add."""
    return not any(re.search(r"\.0\.[^.]*(norm|ln)[^.]*\.bias$", w.path) and not re.search(r"vision|visual", w.path)
                   for w in model.weights)  # a vision tower's LayerNorms are not the decoder's


def kernel_words(ops: tuple[str, ...]) -> str:
    """A layer's priced kernels in words, from ``LayerKernels.ops``: "2 norms, RoPE, activation and add", or, where
    the GPU's profiles time the residual add inside the norm (vLLM 0.19's fused kernel), "2 norms (the residual add
    fused in), RoPE and activation"."""
    norms = sum(op.endswith("layernorm") for op in ops)
    first = f"{norms} norm" + ("s" if norms != 1 else "") + ("" if "add" in ops else " (the residual add fused in)")
    parts = [first] + (["RoPE"] if "attn_rope" in ops else []) + (["activation"] if "mlp_act" in ops else [])
    if "add" in ops or len(parts) == 1:
        return ", ".join(parts) + " and add" * ("add" in ops)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def kernels_apply(model) -> bool:
    """Whether the term prices this model: every decoder layer an attention layer (full or sliding window) with an
    MLP; hybrids (Mamba, linear attention) run other kernels in their other layers, not measured here."""
    return set(model.layer_counts()) <= {"full", "sliding_window"}


class LayerKernels:
    """A model's non-GEMM layer kernels on one GPU at one TP: ``step_s(T)``, cached per token count.

    Args:
        fit: the GPU's fit (``layer_kernel_fit``): the floors. model: the parsed model (its hidden, intermediate and
            head sizes; a gated MLP; RoPE or none). tp: tensor-parallel degree.
        bandwidth_Bps: the bandwidth the bytes end is priced at, B/s: the roofline's (HBM × its bandwidth share).
    """

    def __init__(self, fit: LayerKernelFit, model, tp: int, bandwidth_Bps: float) -> None:
        self.fit, self.num_layers = fit, model.num_layers
        gated = any("gate" in w.path for w in model.weights)  # gate_proj / gate_up_proj: a gated MLP (dense models)
        by_op = dict(zip(OPS, fit.params, strict=True))
        if by_op["add"] is None and not rms_norms(model):  # untimed because fused into vLLM's RMSNorm: a LayerNorm
            by_op["add"] = by_op["input_layernorm"]  # model's add is its own kernel, at a norm's floor
        ops = tuple(op for op in layer_ops(model) if by_op[op] is not None)  # fused into the RMSNorm: no kernel
        self.ops = ops
        self.params = tuple((by_op[op][0], by_op[op][1], max(bandwidth_Bps, by_op[op][2]) if fit.bytes_at_fit
                             else bandwidth_Bps) for op in ops)
        self._per_token = [op_shape(op, model.hidden_size, model.intermediate_size, model.num_attention_heads,
                                    model.num_kv_heads, model.head_dim, tp, gated) for op in ops]
        self._cache: dict[int, float] = {}

    def step_s_array(self, num_tokens):
        """``step_s`` over a numpy array of token counts (the same operations elementwise), s."""
        import numpy as np

        T = np.asarray(num_tokens, dtype=float)
        out = np.zeros_like(T)
        for (a, w, bw), (bpt, width) in zip(self.params, self._per_token, strict=True):
            out = out + np.maximum(a + w * width, bpt * T / bw)
        return np.where(T > 0, self.num_layers * out, 0.0)

    def step_s(self, num_tokens: int) -> float:
        """The layer kernels' time in a step over ``num_tokens`` tokens, all layers, s (0 for no tokens)."""
        t = self._cache.get(num_tokens)
        if t is None:
            t = 0.0 if num_tokens <= 0 else self.num_layers * _layer_s(
                self.params, [(bpt * num_tokens, w) for bpt, w in self._per_token])
            if len(self._cache) < 65536:
                self._cache[num_tokens] = t
        return t
