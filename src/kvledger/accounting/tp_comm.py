"""Tensor-parallel all-reduce time per engine step: two all-reduces per decoder layer at TP > 1, priced from the link
bandwidth and a measured per-call latency.

vLLM shards attention column-then-row and the MLP (or MoE) likewise, so each decoder layer ends
two row-parallel GEMMs (``o_proj`` and ``down_proj`` / the experts' output) with an all-reduce of
the step's activations, ``T × hidden_size × 2 B`` (bf16) for ``T`` tokens
(``vllm/model_executor/layers/linear.py : RowParallelLinear.forward``,
``tensor_model_parallel_all_reduce``). One ring all-reduce of ``S`` bytes over ``n`` ranks moves
``2(n−1)/n · S`` bytes over each GPU's link::

    t_all_reduce = latency(n) + 2(n − 1)/n · S / link_bytes_per_s (one direction)

The link is the GPU catalog's scale-up link (its bidirectional figure halved; the host link where
there is none). The per-call latency is fitted here, at import, to Vidur's measured NCCL
all-reduce medians bundled under ``accounting/data/profiling/vidur/network`` (microsoft/vidur, MIT;
DGX-A100 and DGX-H100, 2–8 ranks, 2 KiB–64 MiB): the median over messages ≤ 8 MiB of
``measured − 2(n−1)/n·S / nominal link`` — 31–34 µs on H100 (2, 4, 8 ranks), 53–62 µs on A100; the
resulting model's median absolute error on those messages is 9–15% (H100) and 10–18% (A100). Those
were eager ``torch.distributed`` calls: vLLM's custom all-reduce inside CUDA graphs is likely
faster for small messages, so for decode steps this term leans high (pass a latency to override).
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from kvledger.catalog.gpus import GpuSpec, require_link_bytes_per_s
from kvledger.errors import InputError

__all__ = ["allreduce_latency_s", "link_bytes_per_s", "allreduce_step_s", "FIT_MAX_BYTES"]

_DATA = Path(__file__).parent / "data" / "profiling" / "vidur" / "network"
FIT_MAX_BYTES = 8 << 20  # messages used for the latency fit, B (decode and chunked-prefill activations)
_NOMINAL_LINK = {"a100_dgx": 300e9, "h100_dgx": 450e9}  # NVLink 3 / NVLink 4, one direction, B/s (gpus.csv ÷ 2)


@cache
def _fitted_latency_s(profile: str) -> dict[int, float]:
    """{ranks: median per-call latency, s} from one Vidur network profile (module doc)."""
    link = _NOMINAL_LINK[profile]
    by_n: dict[int, list[float]] = {}
    with open(_DATA / profile / "all_reduce_median.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            n, size = int(row["num_workers"]), float(row["size"])  # size: message bytes
            if size <= FIT_MAX_BYTES:
                t = float(row["time_stats.all_reduce.median"]) * 1e-3  # ms → s
                by_n.setdefault(n, []).append(t - 2 * (n - 1) / n * size / link)
    out = {}
    for n, xs in by_n.items():
        xs.sort()
        k = len(xs)
        out[n] = xs[k // 2] if k % 2 else (xs[k // 2 - 1] + xs[k // 2]) / 2
    return out


def allreduce_latency_s(gpu: GpuSpec, tp: int) -> float:
    """Per-call all-reduce latency at ``tp`` ranks, s: the A100 fit for Ampere GPUs, the H100 fit otherwise."""
    table = _fitted_latency_s("a100_dgx" if gpu.arch.startswith("sm8") else "h100_dgx")
    if tp in table:
        return table[tp]
    nearest = min(table, key=lambda n: (abs(n - tp), -n))
    return table[nearest]


def link_bytes_per_s(gpu: GpuSpec) -> float:
    """One-direction bandwidth of the link the all-reduce uses, B/s (catalog figures are bidirectional).

    Raises:
        InputError: the GPU has no link figure (a GPU file without links or base); the field to add is named.
    """
    return require_link_bytes_per_s(gpu, "scaleup", "the tensor-parallel all-reduce (TP > 1)") / 2


def allreduce_step_s(num_tokens: float, hidden_size: int, num_layers: int, tp: int, latency_s: float,
                     link_Bps: float, act_bytes: int = 2) -> float:
    """All-reduce time of one step: ``2 × num_layers`` calls of ``num_tokens × hidden_size × act_bytes`` bytes, s (0 at
    TP 1)."""
    if tp <= 1 or num_tokens <= 0:
        return 0.0
    if not link_Bps > 0:
        raise InputError(f"the TP {tp} all-reduce needs a link bandwidth > 0, got {link_Bps!r} B/s")
    payload = num_tokens * hidden_size * act_bytes
    return 2 * num_layers * (latency_s + 2 * (tp - 1) / tp * payload / link_Bps)
