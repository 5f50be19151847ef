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

vLLM's custom all-reduce (``distributed/device_communicators/custom_all_reduce.py``; 0.33 ``cuda_communicator.py
:: all_reduce`` tries it before torch symmetric memory and pynccl) takes every call whose message is under its
``max_size`` (8 MiB; from 0.11 on sm90/sm100 ``min(8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES[cc][ws])``: H100 TP 6 512 KiB,
TP 8 256 KiB) when the plan has it on (``vllm_collectives.custom_all_reduce``). Its kernel
(``csrc/custom_all_reduce.cuh``) is one-shot at 2 ranks, below 512 KiB at ≤ 4 ranks and below 256 KiB at ≤ 8
ranks: every rank reads the ``n − 1`` peers' whole buffers over NVLink P2P, ``t = CA_LATENCY_S + (n − 1)·S /
link``; otherwise two-shot (reduce-scatter, then all-gather, two barriers): ``t = 2·CA_LATENCY_S + (n − 1)·S /
link`` — the one-shot's byte term, as vLLM's published H100 TP 4 two-shot times move bytes no faster than one-shot
(below). ``CA_LATENCY_S`` = 6 µs (4–10 µs): vLLM's ``benchmark_device_communicators.py`` on H100 (vllm#24111,
vllm#24532) gives one-shot 7 µs at TP 2 and 10 µs at TP 4 for a 0.5 MiB (32 × 8192 bf16) message, 14 µs at TP 4
for 1 MiB (less the byte term at 450 GB/s: 5.8, 6.5, 7.0 µs); two-shot at TP 4 17, 26, 42 µs at 0.5, 2, 4 MiB
(this rule: 15.5, 26, 40). Eager calls (no CUDA graph) take ~9 µs (sglang#2904): the range's high end. Messages
at or over ``max_size`` (prefill chunks) keep the NCCL price above.

**A GPU without a scale-up link** (PCIe only: L4, L40S, RTX 4090, RTX PRO 6000, …) runs its all-reduces over PCIe,
which no collective drives at the link's nominal rate: the link is priced at ``PCIE_ALLREDUCE_SHARE`` = **0.35** of
the host link's one-direction figure (range 0.20–0.65, ``PCIE_ALLREDUCE_SHARE_RANGE``), for NCCL and the custom
kernel alike. Public measurements: NCCL's all-reduce bus bandwidth on eight RTX PRO 6000 over PCIe Gen5 (64 GB/s a
direction) is 22.2 GB/s with NCCL's defaults (0.35) and 37.6–41.1 GB/s tuned (0.59–0.64); a custom one-shot PCIe
all-reduce with P2P on (lukealonso's) on eight of them reads 256 KiB from each of 7 peers in 73.6 µs, 66 µs past its
7.5 µs floor: 27.8 GB/s (0.43) (voipmonitor/rtx6kpro, ``benchmarks/results.md``, 2026-04). The low end: the decode
step of Qwen3-32B at TP 2 on two RTX PRO 6000 (LLMServingSim's vLLM 0.19 run; 128 sequences, mean context 1,110
tokens) took 58.8 ms against 43.1 ms of its own operators as profiled on that GPU (``op_profiles``: the layers'
GEMMs and kernels, attention, LM head and sampler), 123 µs for each of the step's 128 all-reduces of 1.31 MB: about
13 GB/s past a 20 µs latency (0.20; an upper bound on their time, as any host gap in the step is counted in it).
That run is one kvledger validates against: it sets only the range's low end. Whether the GPUs have peer access at
all (``GpuSpec.p2p``, vLLM's ``_can_p2p``) decides custom all-reduce against NCCL
(``vllm_custom_ar.custom_all_reduce``); the share prices either, and expert parallelism's all-to-all over the same
link (``roofline.py``).
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from kvledger.catalog.gpus import GpuSpec, require_link_bytes_per_s
from kvledger.errors import InputError

__all__ = ["allreduce_latency_s", "link_bytes_per_s", "allreduce_step_s", "allreduce_step_s_array", "FIT_MAX_BYTES",
           "CA_LATENCY_S", "CA_LATENCY_LOW_S", "CA_LATENCY_HIGH_S", "custom_ar_call_s", "PCIE_ALLREDUCE_SHARE",
           "PCIE_ALLREDUCE_SHARE_RANGE", "over_pcie", "link_words", "FITTED_SHARE"]

_DATA = Path(__file__).parent / "data" / "profiling" / "vidur" / "network"
FIT_MAX_BYTES = 8 << 20  # messages used for the latency fit, B (decode and chunked-prefill activations)
CA_LATENCY_S, CA_LATENCY_LOW_S, CA_LATENCY_HIGH_S = 6e-6, 4e-6, 10e-6
"""Per-call latency of vLLM's custom all-reduce kernel in a CUDA graph, s (module doc: vllm#24111/#24532, H100)."""
PCIE_ALLREDUCE_SHARE = 0.35
"""Share of the host link's one-direction bandwidth a TP all-reduce achieves over PCIe (module doc: NCCL's default
bus bandwidth on eight RTX PRO 6000, voipmonitor/rtx6kpro)."""
FITTED_SHARE = "the GPU profile's fit on its TP > 1 runs"
"""Where a GPU profile's all-reduce link share comes from, in words (``calibration.link_fit``)."""
PCIE_ALLREDUCE_SHARE_RANGE = (0.20, 0.65)
"""The share's range: a TP 2 decode step without peer access (0.20) to NCCL tuned on PCIe switches (0.64)."""
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


def link_bytes_per_s(gpu: GpuSpec, share: float | None = None) -> float:
    """One-direction bandwidth of the link the all-reduce uses, B/s (catalog figures are bidirectional); over PCIe,
    the share an all-reduce achieves (``PCIE_ALLREDUCE_SHARE``, module doc); ``share``: a GPU profile's fitted share of
    the link instead (``calibration.link_fit``).

    Raises:
        InputError: the GPU has no link figure (a GPU file without links or base); the field to add is named.
    """
    one_way = require_link_bytes_per_s(gpu, "scaleup", "the tensor-parallel all-reduce (TP > 1)") / 2
    if share is not None:
        return one_way * share
    return one_way * PCIE_ALLREDUCE_SHARE if over_pcie(gpu) else one_way


def over_pcie(gpu: GpuSpec) -> bool:
    """Whether the TP all-reduce runs over the host's PCIe link (no scale-up link in the catalog or GPU file)."""
    return not gpu.interconnect_bytes_per_s > 0


def link_words(gpu: GpuSpec, share: float | None = None, origin: str | None = None) -> str:
    """Where the all-reduce's link bandwidth comes from, in words ("" for a scale-up link at its catalog figure);
    ``origin``: who gave ``share`` (default: a GPU profile's fit)."""
    lo, hi = PCIE_ALLREDUCE_SHARE_RANGE
    pcie = over_pcie(gpu)
    if share is not None:
        pct = f"{share:.0%}" if share >= 0.01 else f"{share * 100:.3g}%"
        link = (f"over PCIe at {pct} of the host link's {gpu.host_link_bytes_per_s / 2e9:g} GB/s" if pcie
                else f"at {pct} of the scale-up link's {gpu.interconnect_bytes_per_s / 2e9:g} GB/s")
        rule = (f"; the default rule {PCIE_ALLREDUCE_SHARE:.0%}, range {lo:.0%}–{hi:.0%}" if pcie else
                "; by default the catalog's figure, 100%")
        return f"{link} a direction ({origin or FITTED_SHARE}{rule})"
    if not pcie:
        return ""
    return (f"over PCIe at {PCIE_ALLREDUCE_SHARE:.0%} of the host link's {gpu.host_link_bytes_per_s / 2e9:g} GB/s a "
            f"direction (range {lo:.0%}–{hi:.0%}, from NCCL and one-shot all-reduces measured over PCIe: "
            "accounting/tp_comm.py)")


def custom_ar_call_s(payload_bytes: float, tp: int, link_Bps: float, latency_s: float = CA_LATENCY_S) -> float:
    """One custom all-reduce call of ``payload_bytes``, s: one-shot or two-shot by size and ranks (module doc)."""
    one_shot = tp == 2 or (tp <= 4 and payload_bytes < 512 * 1024) or (tp <= 8 and payload_bytes < 256 * 1024)
    return (1 if one_shot else 2) * latency_s + (tp - 1) * payload_bytes / link_Bps


def allreduce_step_s(num_tokens: float, hidden_size: int, num_layers: int, tp: int, latency_s: float,
                     link_Bps: float, act_bytes: int = 2, custom_max_bytes: float = 0.0) -> float:
    """All-reduce time of one step: ``2 × num_layers`` calls of ``num_tokens × hidden_size × act_bytes`` bytes, s (0 at
    TP 1); a call under ``custom_max_bytes`` (0: custom all-reduce off) at the custom kernel's price, else NCCL's."""
    if tp <= 1 or num_tokens <= 0:
        return 0.0
    if not link_Bps > 0:
        raise InputError(f"the TP {tp} all-reduce needs a link bandwidth > 0, got {link_Bps!r} B/s")
    payload = num_tokens * hidden_size * act_bytes
    if payload < custom_max_bytes:
        return 2 * num_layers * custom_ar_call_s(payload, tp, link_Bps)
    return 2 * num_layers * (latency_s + 2 * (tp - 1) / tp * payload / link_Bps)


def allreduce_step_s_array(num_tokens, hidden_size: int, num_layers: int, tp: int, latency_s: float,
                           link_Bps: float, custom_max_bytes: float = 0.0):
    """``allreduce_step_s`` over an array of step token counts (bf16 activations), s per step."""
    import numpy as np

    T = np.asarray(num_tokens, dtype=float)
    payload = T * hidden_size * 2
    nccl = latency_s + 2 * (tp - 1) / tp * payload / link_Bps
    one = (tp == 2) | ((tp <= 4) & (payload < 512 * 1024)) | ((tp <= 8) & (payload < 256 * 1024))
    ca = np.where(one, 1.0, 2.0) * CA_LATENCY_S + (tp - 1) * payload / link_Bps
    per_call = np.where(payload < custom_max_bytes, ca, nccl)
    return np.where((T > 0) & (tp > 1), 2 * num_layers * per_call, 0.0)
