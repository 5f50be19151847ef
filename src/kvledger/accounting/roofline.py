"""The roofline of one engine step: FLOPs and HBM bytes of a prefill chunk or a decode step, per GPU.

Step time lower bound = max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) (Williams et al., "Roofline",
CACM 2009). Weight matmuls cost 2 FLOPs per active parameter per token and read the weights once per
step; attention costs 4·H_q·d FLOPs per (query, key) pair and reads every sequence's KV; MoE reads only
the experts the step's tokens touch: E·(1 − (1 − k/E)^T) per layer for T tokens under uniform routing.
("How to Scale Your Model", chapters "Rooflines" and "All About Transformer Inference".)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING


from kvledger.accounting.kvcache import KVLedger
from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec

if TYPE_CHECKING:
    import numpy as np

__all__ = ["StepCosts", "RooflineStepCost", "compute_dtype"]


def compute_dtype(model: ModelSpec, gpu: GpuSpec) -> str:
    """Matmul precision: fp8 when the weights are fp8 and the GPU has fp8 tensor cores, else bf16."""
    return "fp8" if model.quant.method == "fp8" and gpu.fp8_flops_per_s else "bf16"


@dataclass(frozen=True)
class StepCosts:
    """FLOPs and bytes of one step on one GPU, split by term.

    Attributes:
        matmul_flops / attn_flops: FLOPs, FLOP. weight_bytes / kv_bytes: HBM bytes read (KV: read + new writes), B.
    """

    matmul_flops: float
    attn_flops: float
    weight_bytes: float
    kv_bytes: float

    @property
    def flops(self) -> float:
        return self.matmul_flops + self.attn_flops

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes


class RooflineStepCost:
    """Per-GPU roofline costs for one model on one GPU at a TP degree; also a StepCostModel for the simulator.

    Args:
        model, gpu, kv: the parsed model, the GPU, and the KV ledger at the serving dtype and TP.
        tp: tensor-parallel degree.
        flops_fraction / bandwidth_fraction: achievable shares of peak (defaults 0.7 and 0.8: assumptions —
            cuBLAS GEMMs and decode attention kernels typically reach 70–80% and 80–90% of datasheet peaks;
            calibrate against a measurement where you have one).
        cpu_overhead_s: fixed per-step time (scheduling, sampling, launch), s.
    """

    name = "roofline"

    def __init__(self, model: ModelSpec, gpu: GpuSpec, kv: KVLedger, tp: int = 1, *, flops_fraction: float = 0.7,
                 bandwidth_fraction: float = 0.8, cpu_overhead_s: float = 0.0) -> None:
        self.model, self.gpu, self.kv, self.tp = model, gpu, kv, tp
        self.dtype = compute_dtype(model, gpu)
        self.peak_flops = gpu.fp8_flops_per_s if self.dtype == "fp8" else gpu.bf16_flops_per_s
        self.bw = gpu.hbm_bandwidth_bytes_per_s
        self.flops_fraction, self.bandwidth_fraction, self.cpu_overhead_s = flops_fraction, bandwidth_fraction, cpu_overhead_s
        w_total, _ = weight_bytes_per_gpu(model, tp, include_rope_cache=False)
        q, db = model.quant, model.dtype_bytes
        emb = sum(q.bytes_of(w, db) for w in model.weights if "embed" in w.path) / tp
        self.expert_bytes = sum(q.bytes_of(w, db) for w in model.weights if w.expert) / tp
        self.dense_weight_bytes = w_total - self.expert_bytes - emb  # embedding rows read are negligible
        head = model.vocab_size * model.hidden_size
        emb_params = sum(w.numel for w in model.weights if "embed" in w.path)
        lm_params = 0 if model.tie_word_embeddings else head
        self.matmul_params = (model.num_active_params - emb_params - lm_params) / tp  # per token, excluding the head
        self.head_flops_per_seq = 2 * head / tp
        self._attn_coef, self._swa = self._attention_coefficients()
        self.state_bytes = kv.state_bytes_per_seq
        self._gemm_cache: dict[int, float] = {}
        self._arange = self._steps_init()
        p, b = self.peak_flops * flops_fraction, self.bw * bandwidth_fraction
        fa, fb = self._attn_coef / p, kv.growing_bytes_per_token / b
        self._fb = fb if not self._swa and fa <= fb else None  # s per KV token read, when the affine shortcut is exact
        self._state_per_seq_s = 2 * self.state_bytes / b

    @staticmethod
    def _steps_init():
        import numpy as np

        return np.arange(1024, dtype=np.float64)

    def _attention_coefficients(self) -> tuple[float, list[tuple[float, float, int]]]:
        """(FLOPs per query–key pair over unbounded layers, [(flops/pair, bytes/token, window) per windowed group])."""
        full, swa = 0.0, []
        for g in self.kv.groups:
            sp = g.spec
            if g.kind == "state":
                continue
            heads = sp.num_attention_heads / self.tp
            if isinstance(sp, MLAAttention):  # absorbed MLA: QK over (latent + rope), PV over the latent
                per_pair = 2 * heads * (sp.kv_lora_rank + sp.qk_rope_head_dim) + 2 * heads * sp.kv_lora_rank
            else:
                per_pair = 2 * heads * sp.head_dim + 2 * heads * sp.v_head_dim
            if g.kind in ("full", "mla"):
                full += per_pair * g.num_layers
            else:
                window = getattr(sp, "window_tokens", 0) or getattr(sp, "chunk_tokens", 0)
                swa.append((per_pair * g.num_layers, g.bytes_per_token, window))
        return full, swa

    def experts_touched_fraction(self, num_tokens: float) -> float:
        """Share of each MoE layer's experts that ``num_tokens`` tokens touch (uniform top-k routing), 0–1."""
        m = self.model
        if not m.is_moe or num_tokens <= 0:
            return 0.0 if m.is_moe else 1.0
        return 1 - (1 - m.experts_per_token / m.num_experts) ** num_tokens

    def weight_read_bytes(self, num_tokens: float) -> float:
        """Weight bytes a step over ``num_tokens`` tokens reads from HBM, B."""
        return self.dense_weight_bytes + self.expert_bytes * self.experts_touched_fraction(num_tokens)

    def costs(self, shape: StepShape) -> StepCosts:
        """FLOPs and bytes of a step of the given aggregate shape, per GPU."""
        T, seqs = shape.num_tokens, shape.num_seqs
        matmul = 2 * self.matmul_params * T + self.head_flops_per_seq * seqs
        pairs = shape.prefill_attn_pairs + shape.decode_kv_tokens
        attn = self._attn_coef * pairs
        kv_tokens = shape.decode_kv_tokens + shape.prefill_kv_tokens
        kv_bytes = self.kv.growing_bytes_per_token * kv_tokens + 2 * self.state_bytes * seqs
        for coef, bpt, window in self._swa:  # each query sees at most `window` keys
            attn += coef * min(pairs, window * T)
            kv_bytes += bpt * min(kv_tokens, window * seqs)
        return StepCosts(matmul, attn, self.weight_read_bytes(T), kv_bytes)

    def time_s(self, c: StepCosts, *, achievable: bool = True) -> float:
        """Step time, s.

        ``achievable=False``: the roofline lower bound of the whole step, max(FLOPs / peak, bytes / bandwidth).
        ``achievable=True``: the weight matmuls and the attention run one after the other, each on its own
        roofline at the achievable fractions, plus the CPU overhead — seed-claims.md §3's step cost
        ``max(weight FLOPs/peak, weight bytes/BW) + attention (max(FLOPs/peak, KV bytes/BW)) + overhead``,
        which stops a compute-bound GEMM term from hiding the KV reads at large batch.
        """
        if not achievable:
            return max(c.flops / self.peak_flops, c.bytes / self.bw)
        p, b = self.peak_flops * self.flops_fraction, self.bw * self.bandwidth_fraction
        return max(c.matmul_flops / p, c.weight_bytes / b) + max(c.attn_flops / p, c.kv_bytes / b) + self.cpu_overhead_s

    def step_time_s(self, shape: StepShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        return self.time_s(self.costs(shape))

    def _gemm_s(self, num_seqs: int) -> float:
        """Weight-matmul term of a pure-decode step of ``num_seqs`` sequences at the achievable fractions, s (cached)."""
        t = self._gemm_cache.get(num_seqs)
        if t is None:
            p, b = self.peak_flops * self.flops_fraction, self.bw * self.bandwidth_fraction
            t = max((2 * self.matmul_params + self.head_flops_per_seq) * num_seqs / p, self.weight_read_bytes(num_seqs) / b)
            if len(self._gemm_cache) < 4096:
                self._gemm_cache[num_seqs] = t
        return t

    def _steps(self, num_steps: int) -> np.ndarray:
        """0, 1, …, num_steps − 1 as float64 (a cached array, sliced)."""
        import numpy as np

        if num_steps > len(self._arange):
            self._arange = np.arange(max(num_steps, 2 * len(self._arange)), dtype=np.float64)
        return self._arange[:num_steps]

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        """Vectorised pure-decode steps (see StepCostModel), s, shape (num_steps,).

        Without windowed layers each step's time is affine in the step index (the KV read grows by
        ``num_seqs`` tokens a step), so the common case is one multiply-add on a cached index array.
        """
        if num_seqs == 0:
            import numpy as np

            return np.zeros(num_steps)
        fb = self._fb
        if fb is not None:  # attention bandwidth-bound at every length (GQA/MHA/MLA at low TP): affine in the step
            if num_steps > len(self._arange):
                self._steps(num_steps)
            base = self._gemm_s(num_seqs) + self.cpu_overhead_s + self._state_per_seq_s * num_seqs
            return (base + fb * kv_tokens) + (fb * num_seqs) * self._arange[:num_steps]
        import numpy as np

        p, b = self.peak_flops * self.flops_fraction, self.bw * self.bandwidth_fraction
        base = self._gemm_s(num_seqs) + self.cpu_overhead_s
        steps = self._steps(num_steps)
        kvt = kv_tokens + num_seqs * steps
        flops = self._attn_coef * kvt
        byts = self.kv.growing_bytes_per_token * kvt + 2 * self.state_bytes * num_seqs
        for coef, bpt, window in self._swa:
            capped = np.minimum(kvt, window * num_seqs)
            flops = flops + coef * capped
            byts = byts + bpt * capped
        return base + np.maximum(flops / p, byts / b)
