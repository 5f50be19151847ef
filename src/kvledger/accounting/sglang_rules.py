"""SGLang's start-up memory defaults version by version: mem_fraction_static, chunked_prefill_size and the decode
CUDA-graph batch size, as ``srt/server_args.py`` sets them when the user does not.

Read from the wheels of 0.4.0, 0.4.0.post1, 0.4.1, 0.4.3, 0.4.5, 0.4.5.post2, 0.4.5.post3, 0.4.6, 0.4.6.post1,
0.4.6.post2, 0.4.6.post4, 0.4.6.post5, 0.4.7, 0.4.8, 0.4.9, 0.5.0rc0, 0.5.1, 0.5.2, 0.5.3, 0.5.5 and 0.5.10 (0.5.23:
``arg_groups/memory_hook.py``, in ``memory.py``). GPU memory is nvidia-smi's total in MiB
(``get_device_memory_capacity``). The pool rule itself did not change over these releases
(``model_runner.py::profile_max_num_token``: free memory after the weights − free memory before them × (1 −
mem_fraction_static)); only its inputs did. Where a rule changed between two read versions, it switches at the later one
and the source says so. 0.4.0–0.4.5.post2 set ``cuda_graph_max_bs`` 160 from 25,000 MiB (read in 0.4.0, 0.4.0.post1,
0.4.1, 0.4.3, 0.4.5.post2); from 0.4.5.post3 to 0.5.2 a GPU of 35 GiB or more leaves it unset (the graph runner's
own list: up to 160 in 0.4.5.post3's and 0.4.6's ``cuda_graph_runner.py``; 160 here, and the replay does not pad those
releases' decode batches, sglang_steps.py); it does not enter the fraction there.

  * 0.4.0–0.4.5.post2: mem_fraction_static by TP alone: 0.88 (TP 1), 0.87 (2–3), 0.85 (4–7), 0.81 (8–15), 0.79 (≥ 16).
  * 0.4.5.post3–0.4.6.post1: the same up to 81,920 MiB; above, (memory − 13 GiB) ÷ memory (not rounded). Public
    check: llm-ie-benchmarks' DeepSeek-R1 logs on 8 × H200 print mem_fraction_static=0.9074083090470262 =
    (143,771 − 13,312) ÷ 143,771 under 0.4.5.post3, and 0.81 under 0.4.5.post2.
  * 0.4.6.post2–0.4.6.post5 (read in all four wheels): the table by TP×PP up to 81,920 MiB, else 0.88; above 96 GiB
    min(f + 48 GiB·(1 − f) ÷ memory, (memory − 18 GiB) ÷ memory). Public check: sglang#6753 (H200, 2025-05-29,
    between 0.4.6.post5 and 0.4.7) prints mem_fraction_static=0.8717961202189594 = (143,771 − 18,432) ÷ 143,771.
  * 0.4.7: the same, plus 0.79 above 180,000 MiB.
  * 0.4.8–0.5.2: a reserve by memory tier, round((memory − reserve) ÷ memory, 3): 2.8 + TP·PP/10 GiB below 35 GiB,
    9.5 + TP·PP/2 below 90, 12 + TP·PP/2 below 160, 32 GiB above. Public check: sglang#7478 (June 2025, DeepSeek-R1
    at TP 16 over two 8×H100 nodes) prints mem_fraction_static=0.78 = round((81,559 − 17.5 × 1,024) ÷ 81,559, 3).
  * 0.5.3 on: reserve = 512 + 1.5·max(chunked_prefill_size, 2,048) + 2·cuda_graph_max_bs + TP·PP/8·1,024 MiB, at
    least 10 GiB above 60 GiB. From 20 to 35 GiB: chunked_prefill_size 2,048 and cuda_graph_max_bs 16 (24 from 0.5.5;
    80 at TP ≥ 4) up to 0.5.19; 4,096 and 48 (160 at TP ≥ 4) from 0.5.20 (``arg_groups/memory_hook.py``, read in
    0.5.17–0.5.23: 0.5.19 has the old tier, 0.5.20–0.5.23 the new). The prefill CUDA graphs' term (8 MiB per
    captured size, 1.5 GiB with MLA; on by default from 0.5.10) depends on the model and is added by
    sglang_graphs.py (sglang_prefill_graphs.py); the defaults here leave it out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvledger.accounting.memory import sglang_defaults, sglang_mem_fraction_static
from kvledger.accounting.vllm_releases import RELEASE_STRING
from kvledger.errors import InputError

__all__ = ["SGLANG_EARLIEST", "SGLANG_LATEST",
           "SGLANG_LOAD_EXTRA_GIB", "SGLANG_PRELOAD_GIB", "SGLANG_PRELOAD_HIGH_GIB", "SglangDefaults",
           "parse_sglang_version", "sglang_custom_all_reduce", "sglang_custom_ar_max_bytes", "sglang_version_text",
           "sglang_preload_bytes",
           "sglang_preload_high_bytes", "sglang_version_defaults"]

SGLANG_LATEST = (0, 5, 23)
"""Newest SGLang release whose memory rules were read (docs/engine-model.md §3.1)."""
SGLANG_EARLIEST = (0, 4, 0)
"""Oldest SGLang release whose rules were read (``server_args.py``, ``model_executor/cuda_graph_runner.py``)."""
SGLANG_TIER_4K_FROM = (0, 5, 20)
"""First SGLang release giving 20–35 GiB GPUs a 4,096-token prefill chunk and 48 decode graphs (160 at TP ≥ 4):
``arg_groups/memory_hook.py`` of 0.5.20 (0.5.19 still sets 2,048 and 24/80)."""


@dataclass(frozen=True)
class SglangDefaults:
    """What SGLang sets when the user does not: tokens per prefill chunk, the decode CUDA-graph batch cap, the
    fraction of GPU memory for weights + KV pool, and where each was read."""

    chunked_prefill_size: int
    cuda_graph_max_bs: int
    mem_fraction_static: float
    source: str


def parse_sglang_version(v: str) -> tuple[int, ...]:
    """``"0.4.6.post2"`` → (0, 4, 6, 2); ``"0.4.9"`` → (0, 4, 9): the post release counts (0.4.6.post2 changed the
    default fraction), a release candidate or dev suffix does not.

    Raises:
        InputError: text that is not a version, a release before 0.4.0 (not read), or one past the next minor of
            the newest read (``SGLANG_LATEST``): no such release, most likely a typo.
    """
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", str(v).strip())
    if not m:
        raise InputError(f"--engine-version {v!r} is not an SGLang version like 0.4.6 or 0.5.3")
    if not RELEASE_STRING.match(str(v).strip()):  # "0.5.23,0.4.9" is no version, not 0.5.23
        raise InputError(f"--engine-version {v!r} is not one SGLang version like 0.5.3 (one run per version)")
    ver: tuple[int, ...] = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if m.group(4):
        ver += (int(m.group(4)),)
    if ver < SGLANG_EARLIEST:
        raise InputError(f"SGLang {v} predates the releases whose rules were read (0.4.0 onwards: memory plan, "
                         "chunked_prefill_size, CUDA-graph sizes); pass --engine-version 0.4.0 or later, or leave it "
                         "out for 0.5.23's rules")
    if ver[:2] > (SGLANG_LATEST[0], SGLANG_LATEST[1] + 1):
        newest, near = sglang_version_text(SGLANG_LATEST), f"{SGLANG_LATEST[0]}.{SGLANG_LATEST[1] + 1}.x"
        raise InputError(f"--engine-version {v}: no such SGLang release is known; the newest known is {newest} (the "
                         f"newest whose code was read), and a version up to {near} "
                         f"is planned with its rules and a note. A typo? Pass the version your server runs "
                         f"(`python -c 'import sglang; print(sglang.__version__)'`), or {newest}")
    return ver


def sglang_version_text(ver: tuple[int, ...]) -> str:
    """(0, 4, 6, 2) → "0.4.6.post2"; (0, 4, 9) → "0.4.9"."""
    return ".".join(map(str, ver[:3])) + (f".post{ver[3]}" if len(ver) > 3 else "")


def _by_tp(tp: int) -> float:
    """0.4.0–0.4.8 (server_args.py ``__post_init__``): the fraction by TP size."""
    for lim, frac in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
        if tp >= lim:
            return frac
    return 0.88


def _over_mib(gib: float, mib: float) -> bool:
    """True when ``gib`` GiB of GPU memory exceeds ``mib`` MiB (server_args.py compares MiB)."""
    return gib * 1024 > mib


def _rule_047(smi_mib: float, n: int, vtxt: str = "0.4.7") -> tuple[float, str]:
    """0.4.7's fraction (server_args.py ``__post_init__``) at TP×PP ``n``, and its source; 0.4.6.post2–post5 the same
    without the 180,000 MiB branch."""
    frac = _by_tp(n) if smi_mib <= 81_920 else 0.88
    src = f"SGLang {vtxt} default (server_args.py): {frac} by TP×PP {n}"
    if smi_mib > 180_000 and vtxt == "0.4.7":
        return 0.79, "SGLang 0.4.7 default above 180,000 MiB (server_args.py): 0.79"
    if smi_mib > 96 * 1024:
        frac = min(frac + 48 * 1024 * (1 - frac) / smi_mib, (smi_mib - 18 * 1024) / smi_mib)
        src += f"; above 96 GiB min(f + 48 GiB·(1 − f) / {smi_mib:,.0f}, ({smi_mib:,.0f} − 18 GiB) / {smi_mib:,.0f})"
    return frac, src


def _small_batch_limits(ver: tuple[int, int, int], gib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) before 0.5.3: 2,048 and 8 (80 at TP ≥ 4 from 0.4.0.post1, read in its
    and 0.4.1's server_args.py; 0.4.0 has 8 at any TP) below 25,000 MiB
    (to 0.4.7) or 35 GiB (0.4.8+); otherwise 8,192 (16,384 above 180,000 MiB in 0.4.7, from 160 GiB in 0.4.8+)
    and 160."""
    small = gib < (35 if ver >= (0, 4, 8) else 25_000 / 1024)
    if small:
        return 2048, (80 if tp >= 4 and ver >= (0, 4, 0, 1) else 8)
    big = gib >= 160 if ver >= (0, 4, 8) else (ver >= (0, 4, 7) and _over_mib(gib, 180_000))
    return (16384 if big else 8192), 160


def _tiers_053(ver: tuple[int, int, int], gib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) of ``_handle_gpu_memory_settings``, 0.5.3–0.5.22 (the 20–35 GiB tier
    as 0.5.23's from ``SGLANG_TIER_4K_FROM``)."""
    if gib < 20:
        return 2048, 8
    if gib < 35:
        if ver >= SGLANG_TIER_4K_FROM:
            return 4096, 48 if tp < 4 else 160
        return 2048, (24 if ver >= (0, 5, 5) else 16) if tp < 4 else 80
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def sglang_version_defaults(ver: tuple[int, ...], smi_mib: float, tp: int, pp: int = 1) -> SglangDefaults:
    """SGLang ``ver``'s defaults on a GPU of ``smi_mib`` MiB at TP ``tp`` × PP ``pp`` (no speculative decoding, no DP
    attention, a text model: the terms those add are not planned)."""
    vtxt = sglang_version_text(ver)
    gib = smi_mib / 1024
    if ver >= SGLANG_LATEST:
        cps, gbs = sglang_defaults(smi_mib, tp)
        frac, src = sglang_mem_fraction_static(smi_mib, tp, cps, gbs)
        newer = f" (rules of 0.5.23, the newest read, for {vtxt})" if ver > SGLANG_LATEST else ""
        return SglangDefaults(cps, gbs, frac, src + newer)
    if ver >= (0, 5, 3):
        cps, gbs = _tiers_053(ver, gib, tp)
        reserved = 512 + 1.5 * max(cps, 2048) + 2 * gbs + tp * pp / 8 * 1024
        if gib > 60:
            reserved = max(reserved, 10 * 1024)
        frac = round((smi_mib - reserved) / smi_mib, 3)
        return SglangDefaults(cps, gbs, frac, (
            f"SGLang {vtxt} default (_handle_gpu_memory_settings, read in 0.5.3/0.5.5/0.5.10/0.5.17–0.5.22): "
            f"round(({smi_mib:,.0f} − {reserved:,.0f} MiB reserved: 512 + 1.5 × {max(cps, 2048):,} + 2 × {gbs} + "
            f"{tp * pp}/8 × 1,024{', floor 10 GiB' if gib > 60 else ''}) / {smi_mib:,.0f}, 3)"))
    cps, gbs = _small_batch_limits(ver, gib, tp)
    if ver >= (0, 4, 8):
        n = tp * pp
        tier = ((35, 2.8 + n / 10), (90, 9.5 + n / 2), (160, 12 + n / 2))
        reserve_gib = next((r for lim, r in tier if gib < lim), 32.0)
        frac = round((smi_mib - reserve_gib * 1024) / smi_mib, 3)
        return SglangDefaults(cps, gbs, frac, (
            f"SGLang {vtxt} default (server_args.py, read in 0.4.8–0.5.2): round(({smi_mib:,.0f} − "
            f"{reserve_gib:g} GiB reserved for {gib:.0f} GiB GPUs at TP×PP {n}) / {smi_mib:,.0f}, 3)"))
    if ver >= (0, 4, 7):
        return SglangDefaults(cps, gbs, *_rule_047(smi_mib, tp * pp))
    if ver >= (0, 4, 6, 2):
        return SglangDefaults(cps, gbs, *_rule_047(smi_mib, tp * pp, vtxt))
    if ver >= (0, 4, 5, 3) and smi_mib > 81_920:  # 0.4.5.post3 brought it (its server_args.py; 0.4.5.post2's has
        # the TP table alone)
        frac = (smi_mib - 13 * 1024) / smi_mib
        return SglangDefaults(cps, gbs, frac, (
            f"SGLang {vtxt} default above 80 GiB (server_args.py, read in 0.4.5.post3 and 0.4.6): ({smi_mib:,.0f} − "
            f"13 GiB) / {smi_mib:,.0f}"))
    frac = _by_tp(tp)
    return SglangDefaults(cps, gbs, frac, (
        f"SGLang {vtxt} default by TP {tp} (server_args.py, read in 0.4.0, 0.4.3, 0.4.5, 0.4.5.post2 and 0.4.6: 0.88 / "
        "0.87 / "
        "0.85 / 0.81 / 0.79 at TP 1 / 2 / 4 / 8 / 16)"))


SGLANG_PRELOAD_HIGH_GIB = {1: 0.75, 2: 2.67}
"""Upper end of the memory SGLang's GPU holds before the weights load (the device's CUDA total less "Load weight begin.
avail mem"), GiB, at TP 1 and at TP ≥ 2, against the 0.13 GiB CUDA context (``overheads.NON_TORCH_BYTES``, the low
end; the plan's point is ``SGLANG_PRELOAD_GIB``). SGLang prints GiB as "GB" (``get_available_gpu_memory`` divides by
1 << 30). Evidence: TP ≥ 2,
sgl-project/sglang PR #11716 (TP 8 on H200, CUDA total 139.96 GiB: "Load weight begin. avail mem=137.29–137.52 GB",
so 2.44–2.67 GiB held, of which "Init torch distributed ends. mem usage=1.77–2.01 GB" is NCCL and custom all-reduce;
2.01 was used here before, the distributed share alone, and the printed H200 TP-8 figure fell outside the range;
benchmarks/data/sglang_public_startups.csv SG02); 4×L4 TP 4 without custom all-reduce holds 0.42 (SG01); TP 1, PR
#4826 (H200: 139.96 − (131.08 + 8.13) = 0.75 GiB). What fills it (CUDA context, cuBLAS, the distributed init's buffers)
depends on the driver, the interconnect and the build, which the plan does not know: a range, not a point."""


def sglang_preload_high_bytes(tp: int, pp: int = 1) -> float:
    """Upper end of SGLang's pre-load memory per GPU (``SGLANG_PRELOAD_HIGH_GIB``), B: a distributed start-up above
    TP·PP 1."""
    return SGLANG_PRELOAD_HIGH_GIB[1 if tp * pp == 1 else 2] * (1 << 30)


SGLANG_PRELOAD_GIB = {False: 0.42, True: 2.67}
"""The plan's point for the memory held before the weights load (CUDA total less "Load weight begin. avail mem"), GiB:
False without custom all-reduce or at TP 2, True with it at TP 4–8 (``sglang_custom_all_reduce``). Measured, not
derivable from code (CUDA context, cuBLAS, NCCL and all-reduce buffers depend on driver, interconnect and build).
False: the median of five start-ups of benchmarks/data/sglang_public_startups.csv and PR #4826 — SG05 H100 0.38, SG06
H100 0.60, SG07 RTX A6000 0.31, PR #4826 H200 0.75 (TP 1), SG01 4×L4 over PCIe 0.42 (custom all-reduce off at TP 4):
0.31–0.75, so ±0.3 GiB × the fraction on the KV budget; the 24 GB GeForce of SG08 under Docker Desktop held 1.13 and
is left out (a desktop GPU's display and WSL share the card). True: SG02 (H200 TP 8, 2.67), the only start-up that
prints it; SG04 (H100 TP 4, K + V only) checks it out of sample. TP 2 with custom all-reduce has no public start-up,
so it keeps the False point (its range still reaches 2.67). The range (SGLANG_PRELOAD_HIGH_GIB, down to the 0.13 GiB
context) stays as it was. SG04 out of sample: with its load computed from code (55.12 GiB of weights, 0.02 RoPE, 0.28
segment tails, sglang_load.py) and SGLang 0.4.9's pool rule, its printed K + V (16.46 GiB at mem_fraction_static 0.93)
implies 1.82 GiB held (1.73–1.90 over the measured load rest's range) on H100 at TP 4, against SG02's 2.67 on H200 at
TP 8: SGLang's own code allocates the same before the weights at both (one TP group: PyNccl, custom all-reduce buffers
of 8 MiB; 0.4.9 and 0.5.3 parallel_state.py), so the difference is NCCL's and the driver's (NVLS buffers scale with the
ranks, the CUDA context with the GPU), which the plan does not know; the point is kept and SG04 stays a miss (−4.8 %)
inside the range."""

SGLANG_LOAD_EXTRA_GIB = (-0.005, 0.065, 0.19)
"""What SGLang's "Load weight end. ... mem usage" holds beyond what code tells (the parameters, the RoPE buffer and the
allocator's segment tails, ``sglang_load.py``), GiB (low, point, high). Residuals, printed − computed, in
benchmarks/data/sglang_public_startups.csv: SG01 −0.001 (QwQ-32B TP 4, L4), SG05 0.100 and SG06 0.089 (Llama-3.1-8B,
H100), SG07 0.041 (Qwen3-14B, RTX A6000), SG08 −0.001 (Llama-3.1-8B, 24 GB GeForce), SG09 0.091 (Qwen2.5-7B shapes,
RTX 3090). Point: their median, 0.065; leave-one-out (median of the other five) errors −0.090, −0.090, −0.048, +0.048,
+0.050, +0.059 GiB (mean |error| 0.064). Low: the 2-decimal print's half step below zero (two residuals are zero within
it); high: the largest residual plus the largest leave-one-out |error|, rounded up: 0.100 + 0.090 = 0.19 (refitted
by tests/analyses/test_sglang_startups.py through ``doctor/sglang_startups.py::sglang_load_leave_one_out``).
``load_model`` reads free memory around ``get_model`` (model_runner.py), so CUDA modules and library workspaces first
touched during the load count here; which ones depends on build and GPU, which code does not tell."""


def sglang_custom_all_reduce(tp: int, all_to_all: bool) -> bool:
    """Whether SGLang sets up custom all-reduce for a TP group of ``tp`` GPUs (``custom_all_reduce.py``,
    0.4.4.post1): world sizes 2, 4, 6 and 8 only, and above two GPUs only when every pair is NVLink-connected."""
    return tp in (2, 4, 6, 8) and (tp == 2 or all_to_all)


SGLANG_CA_V2_FROM = (0, 5, 23)
"""The first read release whose CUDA path runs the JIT custom all-reduce v2 by default (``custom_all_reduce.py ::
dispatch_custom_allreduce``, ``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2`` default True); 0.5.3 runs the legacy kernel."""


def sglang_custom_ar_max_bytes(ver: tuple[int, ...], tp: int, tp_nodes: int, gpu, disabled: bool) -> int:
    """Largest all-reduce message SGLang ``ver`` sends through its custom all-reduce instead of NCCL, B; 0 when off.

    On (``--disable-custom-all-reduce`` unset, its default; ``distributed/bootstrap.py`` ``set_custom_all_reduce``) for
    a TP group inside one node that ``sglang_custom_all_reduce`` admits, with CUDA peer access (``custom_all_reduce_
    utils.py :: can_use_custom_all_reduce_with_nvlink``: ``can_p2p``, skipped on ROCm). Size: 0.5.23's v2, taken on
    CUDA only with NVLink between every pair (``can_use_custom_all_reduce_v2``), up to
    ``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB`` (16,384 KiB: 16 MiB, ``environ.py``; the sm90/sm100 tables of
    ``configs/custom_all_reduce_v2.py`` reach ≥ 32 MB); else the legacy kernel's ``_MAX_CAR_SIZE``, 8 MiB (16 MiB on
    ROCm; 0.5.3 has only it). Priced as vLLM's one-/two-shot kernel (tp_comm.custom_ar_call_s)."""
    amd = gpu.gpu_id.startswith("amd_")
    if (tp == 1 or disabled or tp_nodes > 1 or not sglang_custom_all_reduce(tp, gpu.nvlink_all_to_all)
            or not (amd or gpu.p2p)):
        return 0
    v2 = not amd and tuple(ver[:3]) >= SGLANG_CA_V2_FROM and gpu.nvlink_all_to_all
    return (16 << 20) if amd or v2 else (8 << 20)


def sglang_preload_bytes(tp: int, all_to_all: bool) -> float:
    """The plan's point for the memory held before the weights load (``SGLANG_PRELOAD_GIB``), B."""
    return SGLANG_PRELOAD_GIB[tp >= 4 and sglang_custom_all_reduce(tp, all_to_all)] * (1 << 30)
