"""Non-torch memory per GPU under vLLM, from its mechanisms: CUDA context, NCCL, custom all-reduce and symmetric memory.

What the code decides: whether custom all-reduce is on (``vllm_custom_ar.py``: the topology's checks in
``CustomAllreduce.__init__`` and the engine's own, vLLM's ``--nnodes`` and ROCm). When on it allocates ``meta_size() +
max_size`` and ``max_size`` of shared buffers plus 8 MiB of ``rank_data``, with ``max_size`` = 8 MiB (0.19: ``min(8 MiB,
CUSTOM_ALL_REDUCE_MAX_SIZES[cc][ws])`` when symmetric memory is on), during the TP group's set-up; how much of that the
profile deducts is the version's (``vllm_flag_terms.ca_bytes_in_window``: 24 MiB up to 0.8 except 0.7, 16 MiB in 0.7 and
0.9–0.10, none from 0.11, whose init snapshot follows the set-up), and that is all ``--disable-custom-all-reduce`` takes
off the term for the same set-up (``non_torch_term``). From 0.11
``VLLM_ALLREDUCE_USE_SYMM_MEM`` defaults to 1 and ``symm_mem.py`` allocates a bf16 buffer on sm90/sm100 in the same
set-up, before the snapshot. Before 0.11 NCCL's start-up is in the window too (``vllm_nccl_init.py``).

What the code does not size (NCCL's own buffers, the CUDA context, cuBLAS workspaces) is measured, with the data named:
vLLM 0.19.0 on H100 SXM (NVSwitch, so NCCL's NVLink-SHARP buffers) logs 0.24–0.25 GiB at TP 1, 2.06–2.07 at TP 2,
2.13–2.17 at TP 4, 0.07 per stage at PP 2/4 (shared/data/vllm-startups-0.19); before 0.18, 0.13 GiB at TP 1 (H100,
vllm_memory_observations.csv); on H200 NVSwitch at TP 4 and 8 by release era (``HOPPER_NVSWITCH_GIB``): from 0.18 the
window also holds the CUDA-graph profiling's captures (``GRAPH_PROFILE_IN_WINDOW``, code). Topologies with no start-up
in the corpus get a wide range, and say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvledger.accounting.vllm_custom_ar import (
    ca_max_size,
    custom_all_reduce,
    custom_all_reduce_bytes,
    custom_all_reduce_max_bytes,
    engine_disables_ca,
    tp_group_nodes,
)
from kvledger.accounting.vllm_flag_terms import ca_bytes_in_window, eager_source
from kvledger.accounting.vllm_nccl_init import nccl_init_in_window
from kvledger.accounting.vllm_rocm import is_rocm, rocm_non_torch_term
from kvledger.catalog.gpus import GpuSpec
from kvledger.units import GiB, MiB

__all__ = ["Term", "custom_all_reduce", "custom_all_reduce_bytes", "custom_all_reduce_max_bytes",
           "non_torch_term", "tp_group_nodes",
           "NVLS_ARCHS", "RING_NCCL_LOW_GIB", "RING_NCCL_HIGH_GIB", "GRAPH_PROFILE_IN_WINDOW", "HOPPER_NVSWITCH_GIB",
           "BLACKWELL_NVSWITCH_GIB"]

NVLS_ARCHS = ("sm90", "sm100")
"""Architectures whose NVSwitch boards give NCCL NVLink SHARP (multicast) buffers: Hopper and Blackwell."""

RING_NCCL_GIB, RING_NCCL_LOW_GIB, RING_NCCL_HIGH_GIB = 0.2, 0.05, 0.6
"""NCCL buffers without NVLink SHARP (PCIe, bridges, A100 NVSwitch, across nodes), GiB: no start-up in the corpus
isolates it; an assumption bounded by issue 20's A100 TP 2/4 runs without custom all-reduce, whose whole non-KV
overhead beyond weights was 0.4–0.9 GiB (so NCCL ≤ 0.6)."""

@dataclass(frozen=True)
class Term:
    """One memory term with its range from the evidence, B: ``low ≤ bytes ≤ high``; ``source`` says how the point
    value is built, ``range_source`` why the range is what it is."""

    bytes: float
    low: float
    high: float
    source: str
    range_source: str = ""


V064_ABSOLUTE_NON_TORCH_GIB = 0.35
"""vLLM 0.6.4.x subtracts all non-torch memory on the GPU, the CUDA context included: ``worker.py ::
determine_num_available_blocks`` (0.6.4.post1) takes ``mem_get_info`` used − torch allocated after the profile
run and ``empty_cache`` (0.6.3 and 0.6.5+ count only the growth after the worker's first measurement, taken once the
context exists). Printed as ``non_torch_memory=0.35GiB`` on an RTX 3090 at TP 1 (vllm#10517, Llama-3.1-8B at 20K
and 29K); one GPU measured, so other GPUs get 0.25–0.60 GiB."""


def _base(ver: tuple[int, int, int], gpu: GpuSpec) -> Term:
    """The TP-1 part (CUDA context remainder, cuBLAS workspaces), measured on H100."""
    if (0, 6, 4) <= ver < (0, 6, 5):
        g = V064_ABSOLUTE_NON_TORCH_GIB
        src = (f"vLLM 0.6.4 subtracts all non-torch memory, CUDA context included (worker.py "
               f"determine_num_available_blocks): {g} GiB printed in a public RTX 3090 start-up log")
        if gpu.gpu_id == "nvidia_rtx_3090":
            return Term(g * GiB, (g - 0.02) * GiB, (g + 0.02) * GiB, src, "±0.02 GiB (RTX 3090 logs print 0.35)")
        return Term(g * GiB, 0.25 * GiB, 0.60 * GiB, src, f"CUDA context not measured on {gpu.name}: 0.25–0.60 GiB")
    gib = 0.25 if ver >= (0, 18, 0) else 0.13
    src = f"measured {gib} GiB on H100 at TP 1 ({'vLLM 0.19 start-ups' if gib == 0.25 else 'vLLM ≤0.17 logs'})"
    if gpu.arch == "sm90":
        return Term(gib * GiB, (gib - 0.02) * GiB, (gib + 0.02) * GiB, src, "±0.02 GiB (H100 logs)")
    up, why = ((OFF_HOPPER_GRAPH_WINDOW_UP_GIB, "; from 0.18 up 0.32 GiB (off-Hopper 0.19 records at 2,048 tokens / "
                "256 sequences hold 0.19–0.32 GiB more non-KV memory than the plan's terms)")
               if ver >= GRAPH_PROFILE_IN_WINDOW else (0.15, ", up 0.15 GiB"))
    return Term(gib * GiB, max(0.0, gib - 0.13) * GiB, (gib + up) * GiB, src,
                f"not measured on {gpu.name}: down to 0 (0.03 GiB in a public RTX 4060 log){why}")


OFF_HOPPER_GRAPH_WINDOW_UP_GIB = 0.32
"""How far above the H100 TP-1 figure (0.25 GiB from 0.18) the non-torch range reaches on a GPU where it is not
measured, from 0.18, GiB. Not a point: what the records off Hopper leave unexplained. Data (vLLM 0.19.0, TP 1, 2,048
batched tokens / 256 sequences, both with every planned term from code or the H100 fit): LLMServingSim's RTX 4090 run
(../shared/data/measured-runs/llmservingsim, Llama-3.1-8B, 2,588 blocks of 2 MiB allocated = 5.055 GiB where the plan
leaves 5.371: 0.316 GiB more non-KV memory) and P13 (gpt-oss-20b on an A100, vllm_public_startups.csv: 0.19 GiB). The
0.19.0 code (``gpu_worker.py::determine_available_memory``, read in the wheel) takes the torch peak before
``profile_cudagraph_memory`` and the non-torch growth after it, device-wide (``mem_get_info`` since the init snapshot),
so the rest is non-torch growth during load and profiling on these GPUs (graph capture with FlashAttention 2, driver
or other processes' growth); no log of either run prints the profile's terms, so which it is stays open. Before 0.18 the
window holds no captures and the range keeps +0.15. In sample for those two records' ranges."""


def non_torch_term(ver: tuple[int, int, int], tp: int, pp: int, nnodes: int, gpu: GpuSpec,
                   disable_custom_all_reduce: bool, enforce_eager: bool = False, backend: str | None = None,
                   group_nnodes: int | None = None) -> Term:
    """Non-torch memory growth per GPU by mechanism, B, with its range: the term with custom all-reduce as the
    topology leaves it, less what the version's profile counts of its buffers when it is off (``--disable-custom-all-
    reduce`` or the engine's own reason, ``engine_disables_ca``; one rule on every basis, measured or not); the
    pre-0.18 term under ``--enforce-eager`` from 0.18; widened for 0.6.5–0.6.x. ROCm: ``_rocm_term``.
    ``backend``: ``--distributed-executor-backend`` (None: vLLM's default). ``group_nnodes``: the nodes one DP rank's
    TP × PP ranks span (``topology.nodes_within_dp``; None: ``nnodes``, no DP across nodes)."""
    forced = engine_disables_ca(ver, gpu, nnodes, backend)
    nnodes_seen = nnodes  # the deployment's nodes, for the engine-wide rule above; the TP group sees its DP rank's
    nnodes = nnodes if group_nnodes is None else group_nnodes
    if is_rocm(gpu):
        return _rocm_term(ver, tp, pp, nnodes, gpu, disable_custom_all_reduce, forced)
    if enforce_eager and ver >= GRAPH_PROFILE_IN_WINDOW:
        pre = non_torch_term((0, 17, 0), tp, pp, nnodes_seen, gpu, disable_custom_all_reduce, backend=backend,
                             group_nnodes=nnodes)
        return Term(pre.bytes, pre.low, pre.high, eager_source(pre.source), pre.range_source)
    tp_nodes = tp_group_nodes(tp, pp, nnodes)  # what the TP group's mechanisms see (PP stages may sit on other nodes)
    t = _hopper_nvswitch_measured(ver, tp, pp, tp_nodes, gpu) or _non_torch_term(ver, tp, pp, tp_nodes, gpu)
    topo_on, topo_why = custom_all_reduce(tp, tp_nodes, gpu, False)
    if (disable_custom_all_reduce or forced) and topo_on:
        off, why = ca_bytes_in_window(ver, ca_max_size(ver, tp, gpu.exact_arch))
        flag = "custom all-reduce off (--disable-custom-all-reduce)" if disable_custom_all_reduce else str(forced)
        t = Term(t.bytes - off, t.low - off, t.high - off, _ca_off_source(t.source, topo_why, flag, off, why),
                 t.range_source)
    if (0, 6, 5) <= ver < (0, 7, 0):  # the profiler of vllm PR #10511 as released in 0.6.5
        hi = max(t.high, V065_NON_TORCH_GIB * max(1, min(tp, 2)) * GiB)
        return Term(t.bytes, t.low, hi, t.source, t.range_source + f"; vLLM 0.6.5's profiler printed "
                    f"{V065_NON_TORCH_GIB} GiB at TP 1 and 3.58 at TP 2 on H100 "
                    "(kvledger.accounting.vllm_collectives): up to that")
    return t


def _ca_off_source(source: str, topo_why: str, flag: str, off: float, why: str) -> str:
    """The term's source with custom all-reduce off said once: where the topology's rule put it on in ``source``
    ("custom all-reduce on (TP 8, one node, …) (N MiB of its buffers counted: …)"), that phrase becomes the reason it
    is off, the topology's verdict named as overridden; else the reason is appended. ``off``: its buffers' bytes that
    come off, B."""
    counted = f"{topo_why} ({off / MiB:.0f} MiB of its buffers counted: {why})"
    detail = topo_why.removeprefix("custom all-reduce on (").removesuffix(")")
    said = (f"{flag}, where the topology alone would allow it ({detail}): {off / MiB:.0f} MiB of its buffers less "
            f"({why})")
    return source.replace(counted, said, 1) if counted in source else f"{source}; {said}"


def _rocm_term(ver: tuple[int, int, int], tp: int, pp: int, nnodes: int, gpu: GpuSpec, disabled: bool,
               forced: str | None) -> Term:
    """``vllm_rocm.rocm_non_torch_term`` (MI300X, 0.11.2+, custom all-reduce on and its buffers outside the window)
    plus the custom all-reduce buffers a release before 0.11 counts when it is on: off under --disable-custom-all-reduce
    (no CustomAllreduce, nor quick all-reduce, built only beside it: cuda_communicator.py 0.9.2–0.19.0) and where
    ROCm vLLM runs none (``engine_disables_ca``)."""
    pt, lo, hi, src, why = rocm_non_torch_term(ver, tp, pp, gpu)
    on, ca_why = custom_all_reduce(tp, tp_group_nodes(tp, pp, nnodes), gpu, disabled, forced)
    ca, where = ca_bytes_in_window(ver, ca_max_size(ver, tp, gpu.exact_arch)) if on else (0, "")
    if tp > 1:
        src += f"; {ca_why}" + (f" ({ca / MiB:.0f} MiB of its buffers counted: {where})" if ca else
                                 f" ({where})" if on else "")
    return Term(pt + ca, lo + ca, hi + ca, src, why)


GRAPH_PROFILE_IN_WINDOW = (0, 18, 0)
"""From 0.18 ``gpu_worker.py::determine_available_memory`` calls ``profile_cudagraph_memory`` (warm-up and capture of
the first two graphs of each mode, collectives included, under ``graph_capture``) inside the ``memory_profiling``
window, unless ``--enforce-eager`` or ROCm; 0.16.0 and 0.17.0 have no such call. The non-torch increase is read at the
window's exit, so what the captures leave outside torch's allocator (NCCL and graph resources) is in it from 0.18.
The TP-1 step falls there (0.13 → 0.25 GiB between 0.17 and 0.18 in the Qwen3-14B H100 sweep: 0.17 already ships
torch 2.10, so the step is not the new torch/NCCL); at TP 4 and 8 the step (+1.5 GiB on H200) is measured, and whether
all of it falls at 0.18 or part at 0.17 (torch 2.10's NCCL, FlashInfer all-reduce fusion on by default from 0.17) is
not in the data: 0.17 is planned with the pre-0.18 figures."""


HOPPER_NVSWITCH_GIB = {(False, 4): (0.80, 0.74, 1.82), (False, 8): (1.00, 0.82, 1.08), (True, 4): (2.34, 2.30, 2.36),
                       (True, 8): (2.53, 2.51, 2.54)}
"""Non-torch per GPU on Hopper NVSwitch boards, measured on H200 (GiB: point, low, high), keyed by (from 0.18, TP): the
residual requested − printed weights − printed available KV − code activation peak of vllm-memory-estimator's H200
start-ups (benchmarks/data/vme_startups.csv; ``python benchmarks/accuracy_memory.py`` reprints them).
  * TP 4 before 0.18: Llama-3.3-70B bf16 0.74–0.83 (19), its FP8-dynamic checkpoint 0.75–0.84 (24), Qwen3-235B bf16
    0.80–0.82 (4); Qwen3-235B FP8 with --enable-expert-parallel 1.80–1.82 (4) sets the high end.
  * TP 8 before 0.18: DeepSeek-R1 FP8, the only TP-8 model on H200 (19 start-ups): per release 0.83 (0.11.2),
    1.07 (0.13.0), 1.00 (0.14.1), 1.00 (0.16.0); point = the median of the release means, range = min–max of the rows.
    Leave one release out (median of the other three: 1.00, 1.00, 1.00, 1.00): errors −0.17, +0.07, 0.00, 0.00 GiB,
    at most 0.4% of available KV.
  * TP 8 from 0.18: the same model, 2.52–2.54 (0.18.0 ×4, 0.19.0 ×2); each release predicts the other within 0.01 GiB.
    Not fitted to, and agreeing: TP 8's pre-0.18 figure plus TP 4's step (0.79 → 2.34, Llama-3.3-70B bf16/FP8) gives
    2.55.
  * TP 4 from 0.18: Llama-3.3-70B bf16 2.344–2.354 (10), its FP8-dynamic checkpoint 2.324–2.334 (7), NVIDIA's FP8
    checkpoint 2.304 (1), vLLM 0.18.0 and 0.19.0: point 2.34 (the median, 2.344, to 2 decimals), range 2.30–2.36. Leave
    one out (median of the other 17: 2.334–2.344) the errors are ≤ 0.04 GiB (≤ 0.04% of available KV). Was: the H100
    0.19 figure 2.13, 0.17–0.22 GiB under every row (+0.16% to +0.25% available KV). 0.20.0 rows (2) leave 2.51–2.54:
    the 0.17–0.20 GiB above 2.34 is the CUDA-graph estimate 0.20 subtracts (plan 0.73 GiB), not non-torch.
0.11.0 builds (−3.6 to 1.1) are not covered."""

BLACKWELL_NVSWITCH_GIB = {(True, 4): (2.46, 2.45, 2.47), (True, 8): (2.68, 2.68, 2.69)}
"""The same residual on B200 boards from 0.18 (vme_startups.csv, vLLM 0.18.0 and 0.18.0+rhaiv.7, the only B200
release there): TP 4 Llama-3.3-70B bf16 and FP8-dynamic 2.454–2.474 (8 start-ups), TP 8 DeepSeek-R1 FP8 2.676–2.686
(2). The H100 log2-in-TP figure (2.13 / 2.19) under-charged every B200 start-up by 0.32–0.57 GiB. Leave one out (each
row planned with the median of the others at its TP): errors ≤ 0.020 GiB (≤ 0.02% of available KV). B200 sits 0.13–0.15
GiB above H200 at both TPs (2.30–2.35 / 2.52–2.54). No B200 start-up before 0.18: those releases keep the H100 rule."""


def _hopper_nvswitch_measured(ver: tuple[int, int, int], tp: int, pp: int, nnodes: int, gpu: GpuSpec) -> Term | None:
    """The H200- or B200-measured figure for this release era and TP (``HOPPER_NVSWITCH_GIB``,
    ``BLACKWELL_NVSWITCH_GIB``; custom all-reduce on, as in every row), or None outside its set-up."""
    new = ver >= GRAPH_PROFILE_IN_WINDOW
    table = {"sm90": HOPPER_NVSWITCH_GIB, "sm100": BLACKWELL_NVSWITCH_GIB}.get(gpu.arch, {})
    if pp != 1 or nnodes != 1 or not gpu.nvlink_all_to_all or (new, tp) not in table:
        return None
    if gpu.gpu_id.startswith("nvidia_h100") and new and tp <= 4:  # H100 measured itself there (vLLM 0.19 corpus)
        return None
    pt, lo, hi = table[new, tp]
    if gpu.arch == "sm100":
        return _blackwell_term(ver, tp, pt, lo, hi)
    era = "vLLM 0.18.0–0.19.0" if new else "vLLM 0.11.2–0.16.0"
    data = ("DeepSeek-R1 FP8, " + ("6" if new else "19") + " start-ups" if tp == 8 else
            "Llama-3.3-70B bf16/FP8, 18 start-ups" if new else "Llama-3.3-70B bf16/FP8, Qwen3-235B, 47 start-ups")
    why = f"{lo:.2f}–{hi:.2f} GiB over the rows ({data})"
    if (new, tp) == (False, 4):
        why += "; up to 1.82 with --enable-expert-parallel (Qwen3-235B FP8; the plan has no EP setting)"
    if new and ver >= (0, 20, 0):  # measured on 0.18-0.19 only: a later release may size the captures differently
        lo, hi = HOPPER_NVSWITCH_GIB.get((False, tp), (0, lo))[1], hi + 0.3
        why += (f"; no start-up for vLLM {'.'.join(map(str, ver))}: down to the pre-0.18 figure ({lo:.2f}), "
                f"up 0.3 GiB")
    src = f"measured on H200 NVSwitch at TP {tp}, {era}: {pt:.2f} GiB (vme_startups.csv residual)"
    ca, ca_why = ca_bytes_in_window(ver, ca_max_size(ver, tp, gpu.exact_arch))  # the rows' releases count none
    if ca:
        src += f"; + custom all-reduce {ca / MiB:.0f} MiB, which vLLM {'.'.join(map(str, ver))} counts ({ca_why})"
    nc, nc_lo, nc_hi, nc_src = nccl_init_in_window(ver, tp, gpu)  # the rows' releases count none either
    return Term(pt * GiB + ca + nc, lo * GiB + ca + nc_lo, hi * GiB + ca + nc_hi, src + (f"; {nc_src}" if nc else ""),
                why)


def _blackwell_term(ver: tuple[int, int, int], tp: int, pt: float, lo: float, hi: float) -> Term:
    """``BLACKWELL_NVSWITCH_GIB``'s figure, its range widened past the one release measured (0.18.0)."""
    data = "DeepSeek-R1 FP8, 2 start-ups" if tp == 8 else "Llama-3.3-70B bf16/FP8-dynamic, 8 start-ups"
    why = f"{lo:.2f}–{hi:.2f} GiB over the rows ({data}; leave-one-out errors ≤ 0.02 GiB)"
    if ver >= (0, 19, 0):  # measured on 0.18.0 only
        lo, hi = lo - 0.3, hi + 0.3
        why += f"; no B200 start-up for vLLM {'.'.join(map(str, ver))}: ± 0.3 GiB"
    return Term(pt * GiB, lo * GiB, hi * GiB,
                f"measured on B200 NVSwitch at TP {tp}, vLLM 0.18.0: {pt:.2f} GiB (vme_startups.csv residual)", why)


V065_NON_TORCH_GIB = 1.79
"""non_torch_memory printed by the profiler of vllm PR #10511 (released in 0.6.5) for Meta-Llama-3-8B on H100 at TP 1
(3.58 at TP 2): far above every other version's, so it widens the 0.6.5–0.6.x range rather than moving the point."""


def _non_torch_term(ver: tuple[int, int, int], tp: int, pp: int, nnodes: int, gpu: GpuSpec) -> Term:
    """The term where no H200/B200 row measures it, custom all-reduce as the topology leaves it."""
    vtxt = ".".join(map(str, ver))
    if pp > 1 and tp == 1:
        return Term(0.07 * GiB, 0.05 * GiB, 0.30 * GiB, "measured 0.07 GiB per stage at PP 2 and 4 (vLLM 0.19 H100)",
                    "0.05–0.30 GiB" + ("" if gpu.arch == "sm90" and ver >= (0, 18, 0) else
                                       f": not measured for vLLM {vtxt} on {gpu.name}"))
    base = _base(ver, gpu)
    if tp == 1:
        return base
    ca_on, ca_why = custom_all_reduce(tp, nnodes, gpu, False)
    ca, where = ca_bytes_in_window(ver, ca_max_size(ver, tp, gpu.exact_arch)) if ca_on else (0, "")
    code = f"{ca_why}" + (f" ({ca / MiB:.0f} MiB of its buffers counted: {where})" if ca_on else "")
    if gpu.arch in NVLS_ARCHS and gpu.nvlink_all_to_all and nnodes == 1:
        # measured on 0.19 (custom all-reduce on, its buffers outside the window): + what this version counts of them
        nc, nc_lo, nc_hi, nc_src = nccl_init_in_window(ver, tp, gpu)  # 0.19 holds none of NCCL's start-up
        total = (2.07 + 0.06 * (math.log2(tp) - 1)) * GiB + ca
        src = f"NVSwitch board (NCCL NVLink SHARP): H100 vLLM 0.19 TP 2/4 figure 2.07/2.13 GiB, log2 in TP; {code}"
        if ver >= (0, 18, 0) and gpu.arch == "sm90" and tp <= 4:
            return Term(total, total - 0.03 * GiB, total + 0.05 * GiB, src, "measured 2.06–2.17 GiB (H100, vLLM 0.19)")
        return Term(total + nc, base.low + RING_NCCL_LOW_GIB * GiB + ca + nc_lo, total + 0.3 * GiB + nc_hi,
                    src + (f"; {nc_src}" if nc else ""),
                    f"no start-up for vLLM {vtxt}, {gpu.name}, TP {tp}: down to NCCL without NVLink SHARP")
    src = f"{base.source}; NCCL ring/tree buffers {RING_NCCL_GIB} GiB (assumed); {code}"
    why = (f"{base.range_source}; NCCL {RING_NCCL_LOW_GIB}–{RING_NCCL_HIGH_GIB} GiB: no start-up isolates it for "
           f"{gpu.interconnect or 'this link'}{', across nodes' if nnodes > 1 else ''}")
    return Term(base.bytes + RING_NCCL_GIB * GiB + ca, base.low + RING_NCCL_LOW_GIB * GiB + ca,
                base.high + RING_NCCL_HIGH_GIB * GiB + ca, src, why)
