"""Step cost from Vidur's operator-level GPU profiles (Agrawal et al., Vidur, MLSys 2024; microsoft/vidur, MIT).

The step time is Vidur's sum (``vidur/entities/execution_time.py``: per-layer block time × layers, plus
CPU overhead), with Vidur's fitted regressors replaced by interpolation in the measured tables:

    step_ms = L · [ Σ_ops linear_op(n)                         (mlp.csv medians, n = tokens in the step)
                    + s_pre · attn_prefill(c_eq, p_eq)            (legacy A100 attention.csv)
                    + s_dec · attn_decode(B, mean KV)
                    + 2 · (all_reduce(n · d · 2 B) + 0.02 ms) ]   (network/*/all_reduce.csv, only TP > 1)
              + cpu(B_total)                                   (cpu_overheads.csv: schedule + sampler +
                                                                prepare_inputs + process_model_outputs)

L = ``num_layers`` (model_configs/*.yml), d = hidden size, linear ops = the two norms, QKV and output projections,
RoPE, MLP up/act/down and the residual add (the post-attention norm only where the model has one). Embedding and LM
head are left out, as Vidur does. 0.02 ms is Vidur's default NCCL launch overhead.

Attention was measured only once: A100, Llama-2-70B shape at TP2 (per GPU 32 query heads, 4 KV heads, head_dim 128).
Other shapes and GPUs are scaled:

* decode (memory-bound): s_dec = (kv_heads/GPU · head_dim)/(4 · 128) × the GPU/A100 time ratio of this model's
  ``mlp_up_proj`` at 1 token (a weight-read-bound GEMV measured on both GPUs; H100 ≈ 0.55);
* prefill (compute-bound): s_pre = (q_heads/GPU · head_dim)/(32 · 128) × the same ratio at the largest common token
  count (a compute-bound GEMM; H100 ≈ 0.34).

Several prefill chunks in one step are priced as one chunk with the same prior-KV sum p_eq and the same number of
causal query–key pairs (for prompts without prior KV this is Vidur's √Σc² aggregation). Beyond the measured grids,
attention grows in proportion to pairs (prefill) or to B·KV (decode); linear ops in proportion to tokens; CPU overhead
is held at the end values (batch 8–128). Ray's TP communication time (``ray_comm_time``) is not included: it belongs
to the Ray-based executor profiled then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.vidur_grid import Grid2, attention_grids, causal_pairs, mean_by_key, num, read_rows

__all__ = ["VidurStepCost", "build_vidur_cost", "VIDUR_LINEAR_OPS", "NCCL_LAUNCH_MS"]

VIDUR_LINEAR_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
                    "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
NCCL_LAUNCH_MS = 0.02
_REF_KV_WIDTH = 4 * 128     # KV heads per GPU × head_dim of the attention table (Llama-2-70B, TP2)
_REF_Q_WIDTH = 32 * 128     # query heads per GPU × head_dim of the attention table
_CPU_OPS = ("schedule_median", "sampler_e2e_median", "prepare_inputs_e2e_median", "process_model_outputs_median")


@dataclass(frozen=True, slots=True, eq=False)
class VidurStepCost:
    """Vidur-profile step cost for one (model, GPU, TP); see the module docstring for the formula.

    Attributes:
        name: "vidur:<model>@<gpu>/tp<N>".
        num_layers: transformer layers L.
        hidden_size: d, for the all-reduce payload n·d·2 bytes.
        tokens, linear_ms: per-layer Σ linear-op time (ms) at each measured token count.
        decode, prefill: attention tables (ms per layer, reference shape on A100).
        decode_scale, prefill_scale: s_dec and s_pre.
        allreduce_bytes, allreduce_ms: one all-reduce's time vs payload (TP > 1), else None.
        cpu_batch, cpu_ms: CPU overhead per step vs requests in the step, else None.
        notes: where each part came from (files, fallbacks used).
    """

    name: str
    num_layers: int
    hidden_size: int
    tokens: np.ndarray
    linear_ms: np.ndarray
    decode: Grid2
    prefill: Grid2
    decode_scale: float
    prefill_scale: float
    allreduce_bytes: np.ndarray | None = None
    allreduce_ms: np.ndarray | None = None
    cpu_batch: np.ndarray | None = None
    cpu_ms: np.ndarray | None = None
    notes: tuple[str, ...] = field(default=())
    by_batch: dict = field(default_factory=dict, repr=False)  # decode_steps_s's per-batch-size terms, filled as met

    def _linear(self, n: float) -> float:
        if n > self.tokens[-1]:
            return float(self.linear_ms[-1] * n / self.tokens[-1])
        return float(np.interp(n, self.tokens, self.linear_ms))

    def _allreduce(self, n: float) -> float:
        if self.allreduce_bytes is None or n <= 0:
            return 0.0
        size = n * self.hidden_size * 2
        top = self.allreduce_bytes[-1]
        t = np.interp(min(size, top), self.allreduce_bytes, self.allreduce_ms)
        return float(t * (size / top if size > top else 1.0)) + NCCL_LAUNCH_MS

    def _decode_attn(self, b: int, kv_tokens: float) -> float:
        if b == 0:
            return 0.0
        avg = kv_tokens / b
        t = self.decode.at(b, avg)
        grow = (b * avg) / (min(b, self.decode.xs[-1]) * min(max(avg, self.decode.ys[0]), self.decode.ys[-1]))
        return t * max(grow, 1.0) * self.decode_scale

    def _prefill_attn(self, shape: StepShape) -> float:
        if shape.num_prefill_tokens == 0:
            return 0.0
        p_eq = max(shape.prefill_kv_tokens - shape.num_prefill_tokens, 0)
        h = p_eq + 0.5
        c_eq = -h + math.sqrt(h * h + 2 * max(shape.prefill_attn_pairs, 1.0))
        g = self.prefill
        c_cl, p_cl = min(max(c_eq, g.xs[0]), g.xs[-1]), min(p_eq, g.ys[-1])
        grow = causal_pairs(c_eq, p_eq) / causal_pairs(c_cl, p_cl)
        return g.at(c_cl, p_cl) * max(grow, 1.0) * self.prefill_scale

    def _cpu(self, b: int) -> float:
        return 0.0 if self.cpu_batch is None or b == 0 else float(np.interp(b, self.cpu_batch, self.cpu_ms))

    def breakdown_ms(self, shape: StepShape) -> dict[str, float]:
        """Line items of one step, ms, summing to ``step_time_s(shape) × 1000``."""
        if shape.num_tokens == 0:
            return {}
        n, L = shape.num_tokens, self.num_layers
        return {  # Python floats: the interpolation helpers may hand back numpy scalars
            "linear_ops": float(L * self._linear(n)),
            "attention_prefill": float(L * self._prefill_attn(shape)),
            "attention_decode": float(L * self._decode_attn(shape.num_decode_seqs, shape.decode_kv_tokens)),
            "tp_all_reduce": float(L * 2 * self._allreduce(n)),
            "cpu_overhead": float(self._cpu(shape.num_seqs)),
        }

    def step_time_s(self, shape: StepShape) -> float:
        # a Python float: the simulator stores one per step
        return float(sum(self.breakdown_ms(shape).values())) / 1000.0

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        if num_seqs == 0 or num_steps == 0:
            return np.zeros(num_steps, dtype=np.float64)
        L, b = self.num_layers, num_seqs
        per_b = self.by_batch.get(b)
        if per_b is None:  # what depends on the batch alone, computed once per batch size (the same floats)
            per_b = self.by_batch[b] = (L * (self._linear(b) + 2 * self._allreduce(b)) + self._cpu(b),
                                        self.decode.row(b))
        fixed, row = per_b
        avg = kv_tokens / b + np.arange(num_steps, dtype=np.float64)     # mean KV grows by one per step
        ys = self.decode.ys
        attn = np.interp(np.clip(avg, ys[0], ys[-1]), ys, row)
        grow = np.maximum((b * avg) / (min(b, self.decode.xs[-1]) * np.clip(avg, ys[0], ys[-1])), 1.0)
        return (fixed + L * attn * grow * self.decode_scale) / 1000.0


def _linear_table(path: Path, tp: int, post_attn_norm: bool) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    rows = [r for r in read_rows(path) if int(r["num_tensor_parallel_workers"]) == tp]
    if not rows:
        raise LookupError(f"{path} has no rows for TP {tp}")
    ops = [op for op in VIDUR_LINEAR_OPS if post_attn_norm or op != "post_attention_layernorm"]
    per = mean_by_key([((int(r["num_tokens"]),), sum(num(r.get(f"time_stats.{op}.median")) for op in ops))
                        for r in rows])
    tokens = np.array(sorted(k[0] for k in per), dtype=np.float64)
    return tokens, np.array([per[(int(t),)] for t in tokens]), rows[0]


def _op_at(path: Path, tp: int, tokens: int, op: str = "mlp_up_proj") -> float | None:
    vals = [num(r[f"time_stats.{op}.median"]) for r in read_rows(path)
            if int(r["num_tensor_parallel_workers"]) == tp and int(r["num_tokens"]) == tokens]
    return float(np.mean(vals)) if vals else None


def _gpu_ratios(root: Path, gpu: str, model: str, tp: int) -> tuple[float, float]:
    """(memory-bound, compute-bound) GPU/A100 time ratios from the model's mlp_up_proj measured on both GPUs
    (< 1: the GPU is faster than the A100)."""
    if gpu == "a100":
        return 1.0, 1.0
    a100, other = root / "compute/a100" / model / "mlp_median.csv", root / "compute" / gpu / model / "mlp_median.csv"
    big = int(min(_linear_table(a100, tp, True)[0][-1], _linear_table(other, tp, True)[0][-1]))
    mem = _op_at(other, tp, 1) / _op_at(a100, tp, 1)
    comp = _op_at(other, tp, big) / _op_at(a100, tp, big)
    return mem, comp


def _cpu_table(root: Path, gpu: str, model: str, tp: int, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    table_gpu = gpu if (root / "cpu_overheads" / gpu).is_dir() else "a100"
    rows = read_rows(root / "cpu_overheads" / table_gpu / "cpu_overheads.csv")
    fallback = {"meta-llama/Meta-Llama-3-8B": "meta-llama/Llama-2-7b-hf",
                "meta-llama/Meta-Llama-3-70B": "meta-llama/Llama-2-70b-hf"}
    name = model if any(r["model_name"] == model for r in rows) else fallback.get(model, "meta-llama/Llama-2-7b-hf")
    tps = sorted({int(r["tensor_parallel_degree"]) for r in rows if r["model_name"] == name},
                 key=lambda t: (abs(t - tp), t))
    use_tp = tps[0]
    per = mean_by_key([((int(r["batch_size"]),), sum(num(r[k]) for k in _CPU_OPS))
                        for r in rows if r["model_name"] == name and int(r["tensor_parallel_degree"]) == use_tp])
    if (table_gpu, name, use_tp) != (gpu, model, tp):
        notes.append(f"CPU overhead from the {table_gpu} table of {name} at TP{use_tp} (no exact match)")
    batch = np.array(sorted(k[0] for k in per), dtype=np.float64)
    return batch, np.array([per[(int(b),)] for b in batch])


def build_vidur_cost(root: Path, gpu: str, model: str, tp: int, model_config: dict, *,
                     include_cpu_overhead: bool = True, gpu_label: str | None = None) -> VidurStepCost:
    """Assemble a :class:`VidurStepCost` from the bundled tables under ``root`` (``.../profiling/vidur``).

    ``gpu`` is a Vidur device folder ("a100", "h100", "a40"); ``model`` an org/name folder; ``model_config``
    the parsed ``model_configs/<model>.yml``. Raises LookupError when a needed table is missing.
    """
    notes: list[str] = [f"linear ops: vidur compute/{gpu}/{model}/mlp.csv medians, TP{tp}"]
    tokens, linear, first = _linear_table(root / "compute" / gpu / model / "mlp_median.csv", tp,
                                          bool(model_config.get("post_attn_norm", True)))
    n_head, n_kv, d = int(first["n_head"]), int(first["n_kv_head"]), int(first["n_embd"])
    head_dim = d // n_head
    mem, comp = _gpu_ratios(root, gpu, model, tp)
    dec_scale = max(1, n_kv // tp) * head_dim / _REF_KV_WIDTH * mem
    pre_scale = (n_head // tp) * head_dim / _REF_Q_WIDTH * comp
    notes.append(f"attention: A100 Llama-2-70B-TP2 table × {dec_scale:.3f} (decode), × {pre_scale:.3f} (prefill)")
    decode, prefill = attention_grids(root / "attention/a100/attention_median.csv")
    ar_bytes = ar_ms = None
    if tp > 1:
        net = root / "network" / f"{gpu}_dgx" / "all_reduce_median.csv"
        if not net.is_file():
            raise LookupError(f"no all-reduce profile for {gpu} (needed for TP {tp})")
        per = mean_by_key([((int(r["size"]),), num(r["time_stats.all_reduce.median"]))
                            for r in read_rows(net) if int(r["num_workers"]) == tp])
        if not per:
            raise LookupError(f"{net} has no {tp}-GPU all-reduce rows")
        ar_bytes = np.array(sorted(k[0] for k in per), dtype=np.float64)
        ar_ms = np.array([per[(int(s),)] for s in ar_bytes])
        notes.append(f"TP all-reduce: vidur network/{gpu}_dgx, {tp} GPUs, + {NCCL_LAUNCH_MS} ms launch each")
    cpu_b = cpu_ms = None
    if include_cpu_overhead:
        cpu_b, cpu_ms = _cpu_table(root, gpu, model, tp, notes)
    return VidurStepCost(f"vidur:{model}@{gpu_label or gpu}/tp{tp}", int(model_config["num_layers"]), d, tokens, linear,
                         decode,
                         prefill, dec_scale, pre_scale, ar_bytes, ar_ms, cpu_b, cpu_ms, tuple(notes))
