"""What the step cost of a GPU without measured kernel tables carries from the GPUs that have them, and from public
measurements of its own memory: the per-layer small-kernel floor and the achieved HBM bandwidth share.

A GPU nobody profiled (B200, MI300X, MI355X, L4, L40S …: not in ``op_profiles.PROFILED_GPU`` nor a ``SAME_DIE`` twin)
used to get the flat roofline alone: no floor for the norms, RoPE, activation and residual add of each layer, and
80% of its datasheet bandwidth. Both are now carried:

* **Layer-kernel floors** (``carried_layer_kernel_fit``). At decode these kernels are latency-bound: a few
  microseconds each, set by the launch and the row one thread block walks. The floors of the three profiled GPUs
  (``layer_kernels``: A100 80GB SXM and H100 SXM from Vidur, RTX PRO 6000 from LLMServingSim's vLLM 0.19 profiles)
  are converted to SM cycles at each GPU's boost clock (``catalog/data/gpu_clocks.csv``), averaged per op over the
  GPUs, and priced at the target GPU's clock (the H100's where the catalog has none). The residual add is not
  carried (``CARRIED_OPS``): vLLM runs both of a layer's adds inside its RMSNorms (vLLM 0.11.0
  ``models/llama.py::LlamaDecoderLayer.forward`` passes the residual to ``input_layernorm`` and
  ``post_attention_layernorm``, whose ``layernorm.py::RMSNorm.forward_cuda`` calls ``fused_add_rms_norm``), and
  LLMServingSim's profiles of vLLM 0.19 time no add; Vidur's separate ``add`` is its own harness's kernel. As for
  the RTX PRO 6000's fit, a LayerNorm model (OPT, phi-2) gets its add at the norm's floor (``LayerKernels``).
  Rule chosen from the data: for a Llama-3.1-8B layer at TP 1 (``REF_SHAPE``) the floors of the norms, RoPE and
  activation are 24.4 / 19.0 / 10.8 µs (A100 / H100 / RTX PRO 6000; 34.5k / 37.6k / 28.2k cycles); held out one at a
  time and predicted from the other two, in cycles they are off by −4% / −17% / +28% (mean |error| 16%), averaged in
  seconds with no clock by −39% / −7% / +101% (49%) (``loo_errors``): the floor follows the clock more than the
  wall time, and the RTX PRO 6000's newer kernels are the spread's far end. The carried floor's uncertainty is that
  spread (``carried_range``).
* **Bandwidth share** (``carried_bandwidth``). The roofline's 0.8 of peak bandwidth is what the H100 SXM's measured
  runs hold (``catalog.gpu_measured.REFERENCE_GPU``). Where the catalog has a measured BabelStream Copy figure for
  the GPU from the same harness as the H100's (``gpu_hbm_measured.csv``), the share is scaled by the two GPUs'
  measured shares of peak: 0.8 × (copy / peak) / (copy_H100 / peak_H100) — the H100 gets 0.8 exactly. A GPU
  without a row keeps 0.8, and the step cost's source says so.

Only GPUs without measured tables carry these: the profiled GPUs' own floors and 0.8 are what their bands were
measured on. Nothing here was fitted to serving runs; the held-out public corpus (benchmarks/dense_serving_check.py)
only reports the result.
"""

from __future__ import annotations

import functools

from kvledger.accounting.layer_kernels import OPS, LayerKernelFit, layer_kernel_fit, op_shape
from kvledger.accounting.op_profiles import PROFILED_GPU
from kvledger.accounting.vidur_profiles import SAME_DIE
from kvledger.catalog.gpu_measured import REFERENCE_GPU, boost_clock, hbm_measured

__all__ = ["DEFAULT_BANDWIDTH_FRACTION", "REF_SHAPE", "has_measured_tables", "carried_params", "layer_floor_s",
           "loo_errors", "carried_range", "CARRIED_OPS", "unprofiled_sources", "carried_layer_kernel_fit",
           "carried_bandwidth", "bandwidth_words"]

DEFAULT_BANDWIDTH_FRACTION = 0.8  # the roofline's flat share (settings.PlanSettings), validated on the H100 SXM
#: the ops carried: the residual add runs inside vLLM's RMSNorms (module doc)
CARRIED_OPS = tuple(op for op in OPS if op != "add")
#: Llama-3.1-8B's layer at TP 1: hidden, intermediate, query heads, KV heads, head size, TP
REF_SHAPE = (4096, 14336, 32, 8, 128, 1)
_NAMES = {"nvidia_a100_80gb_sxm": "A100 80GB SXM", "nvidia_h100_sxm": "H100 SXM",
          "nvidia_rtx_pro_6000_server": "RTX PRO 6000"}


def has_measured_tables(gpu_id: str) -> bool:
    """Whether the GPU has operator profiles of its own or of its die (its GEMM curve and layer-kernel floors)."""
    return gpu_id in PROFILED_GPU or gpu_id in SAME_DIE


def _clock_hz(gpu_id: str) -> float:
    """The GPU's boost clock, Hz; the reference GPU's where the catalog has none."""
    c = boost_clock(gpu_id) or boost_clock(REFERENCE_GPU)
    return c[0]


def carried_params(sources: tuple[str, ...], clock_hz: float | None) -> tuple[tuple[float, float, float] | None, ...]:
    """Per op of ``OPS``: (floor s, s per row element, bytes/s) averaged in cycles over the ``sources`` GPUs that time
    the op, at ``clock_hz`` (None: averaged in seconds, no clock); None for an op not in ``CARRIED_OPS``."""
    out = []
    for i, op in enumerate(OPS):
        pts = [(p[0] * (_clock_hz(g) if clock_hz else 1.0), p[1] * (_clock_hz(g) if clock_hz else 1.0), p[2])
               for g in sources if (p := layer_kernel_fit(g).params[i]) is not None and op in CARRIED_OPS]
        n, at = len(pts), clock_hz or 1.0
        out.append(None if not n else (sum(a for a, _, _ in pts) / n / at,
                                       sum(w for _, w, _ in pts) / n / at, sum(b for _, _, b in pts) / n))
    return tuple(out)


def layer_floor_s(params, ops: tuple[str, ...] = OPS, shape: tuple[int, ...] = REF_SHAPE) -> float:
    """Σ over ``ops`` of one layer's floors a + w · width at ``shape`` (``REF_SHAPE``), s (an untimed op adds 0)."""
    by = dict(zip(OPS, params, strict=True))
    return sum(by[op][0] + by[op][1] * op_shape(op, *shape)[1] for op in ops if by[op] is not None)


@functools.cache
def loo_errors(by_clock: bool = True) -> dict[str, float]:
    """Per profiled GPU: predicted / measured − 1 of its per-layer floor at ``REF_SHAPE`` (the carried ops it times),
    predicted from the other profiled GPUs in cycles at its clock (``by_clock``) or in seconds (False)."""
    out = {}
    for g in sorted(PROFILED_GPU):
        own = layer_kernel_fit(g).params
        timed = tuple(op for op, p in zip(OPS, own, strict=True) if p is not None and op in CARRIED_OPS)
        rest = tuple(x for x in sorted(PROFILED_GPU) if x != g)
        pred = carried_params(rest, _clock_hz(g) if by_clock else None)
        out[g] = layer_floor_s(pred, timed) / layer_floor_s(own, timed) - 1
    return out


def carried_range() -> tuple[float, float]:
    """The least and greatest leave-one-GPU-out error of the carried floor (``loo_errors``), as fractions."""
    e = loo_errors().values()
    return min(e), max(e)


def unprofiled_sources(gpu_id: str) -> tuple[str, ...]:
    """The profiled GPUs whose floors carry to ``gpu_id`` priced as if nobody had profiled it: all of them but the GPU
    itself and the GPUs of its die (``SAME_DIE``: an H200's are the H100's own)."""
    die = SAME_DIE.get(gpu_id, gpu_id)
    return tuple(g for g in sorted(PROFILED_GPU) if g != die and SAME_DIE.get(g, g) != die)


@functools.cache
def carried_layer_kernel_fit(gpu_id: str, as_unprofiled: bool = False) -> LayerKernelFit | None:
    """The floors carried to a GPU without measured tables (module doc), None for a GPU with them unless
    ``as_unprofiled`` (``--gemm-efficiency carried``: any GPU priced as if nobody had profiled it, from the other
    profiled GPUs' floors, ``unprofiled_sources``). Its ``loso_median`` is the median |error| leaving one profiled GPU
    out. NVIDIA and AMD GPUs only: a TPU's or Gaudi's compiled graphs fuse these ops, so nothing measured carries to
    them."""
    if (has_measured_tables(gpu_id) and not as_unprofiled) or not gpu_id.startswith(("nvidia_", "amd_")):
        return None
    sources = unprofiled_sources(gpu_id)
    clock = boost_clock(gpu_id)
    at = (f"at this GPU's {clock[0] / 1e6:,.0f} MHz boost clock" if clock else
          f"at the H100 SXM's {_clock_hz(REFERENCE_GPU) / 1e6:,.0f} MHz (the catalog has no clock for this GPU)")
    lo, hi = carried_range()
    errs = sorted(abs(e) for e in loo_errors().values())
    why = ("--gemm-efficiency carried, priced as if nobody had profiled this GPU (its own and its die's floors left "
           "out)" if has_measured_tables(gpu_id) else "no operator profile of this GPU")
    source = (f"carried, {why}: the measured floors of the "
              f"{', '.join(_NAMES[g] for g in sources)} (Vidur; LLMServingSim's vLLM 0.19 profiles) in SM cycles at "
              f"each one's boost clock, averaged per op, {at}; leaving one profiled GPU out the per-layer floor is "
              f"off by {lo:+.0%}…{hi:+.0%}, its range here (kvledger.accounting.carried_kernels)")
    return LayerKernelFit(gpu_id, carried_params(sources, _clock_hz(gpu_id)), source, (), 0, 0.0,
                          errs[len(errs) // 2], errs[-1], 0.0, False)


def carried_bandwidth(gpu, as_unprofiled: bool = False) -> float | None:
    """The bandwidth share a GPU without measured tables carries from its measured BabelStream Copy (module doc), None
    where it has tables (unless ``as_unprofiled``: ``--gemm-efficiency carried``), no measured row, or a bandwidth
    other than the catalog's (``--gpu-bandwidth``)."""
    from kvledger.catalog.gpus import get_gpu

    m, ref = hbm_measured(gpu.gpu_id), hbm_measured(REFERENCE_GPU)
    if m is None or (has_measured_tables(gpu.gpu_id) and not as_unprofiled) or gpu.hbm_bandwidth_bytes_per_s != get_gpu(
            gpu.gpu_id).hbm_bandwidth_bytes_per_s:
        return None
    ref_peak = get_gpu(REFERENCE_GPU).hbm_bandwidth_bytes_per_s
    share = DEFAULT_BANDWIDTH_FRACTION * (m.copy_bytes_per_s * ref_peak) / (  # the H100: 0.8 exactly
        ref.copy_bytes_per_s * gpu.hbm_bandwidth_bytes_per_s)
    return min(share, 1.0)


def bandwidth_words(gpu, fraction: float, as_unprofiled: bool = False) -> str:
    """Where an uncalibrated roofline's bandwidth share came from, for the step cost's source (``as_unprofiled``:
    ``--gemm-efficiency carried``, as on a GPU nobody profiled)."""
    share = carried_bandwidth(gpu, as_unprofiled)
    if share is not None and abs(share - fraction) < 1e-12:
        m, ref = hbm_measured(gpu.gpu_id), hbm_measured(REFERENCE_GPU)
        from kvledger.catalog.gpus import get_gpu

        ref_peak = get_gpu(REFERENCE_GPU).hbm_bandwidth_bytes_per_s
        return (f"bandwidth share {share:.3f}: 0.8 × this GPU's measured BabelStream Copy share of peak "
                f"({m.copy_bytes_per_s / 1e12:.2f} TB/s of {gpu.hbm_bandwidth_bytes_per_s / 1e12:g}) ÷ the H100 "
                f"SXM's ({ref.copy_bytes_per_s / 1e12:.2f} of {ref_peak / 1e12:g}), {m.source}")
    if (has_measured_tables(gpu.gpu_id) and not as_unprofiled) or hbm_measured(gpu.gpu_id) is not None:
        return ""
    return (f"bandwidth share {fraction:g} of peak: the default; the catalog holds no measured sustained bandwidth "
            f"for {gpu.name}")
