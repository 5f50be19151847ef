"""Whether vLLM can load an unquantized checkpoint under online FP8 (``--quantization fp8``): before 0.16.0 every
weight is first allocated in the checkpoint dtype, so the load peak is the whole 16-bit weight set of the GPU's stage.

Read in the wheels:
- 0.11.0–0.14.x (0.11.0, 0.13.0, 0.14.0 read): ``layers/quantization/fp8.py::Fp8LinearMethod.create_weights`` makes
  the weight of a checkpoint not serialized in FP8 with ``torch.empty(..., dtype=params_dtype)`` on the device, and
  ``Fp8MoEMethod.create_weights`` keeps ``params_dtype`` for the experts likewise; ``process_weights_after_loading``
  quantizes (``ops.scaled_fp8_quant``) only once the whole model has loaded.
- 0.15.0: ``Fp8OnlineLinearMethod`` / ``Fp8OnlineMoEMethod`` quantize each layer as soon as its last chunk is loaded
  (a patched ``weight_loader`` counting copied elements), but still allocate every 16-bit weight at model
  construction (``torch.empty(..., dtype=params_dtype)``), before any is loaded: the same peak.
- 0.16.0 on (0.16.0, 0.19.0, 0.33.0 read): those weights are created on ``device="meta"`` and materialized just in
  time in the weight loader, one layer at a time, then quantized: the peak is the FP8 weights plus a layer in flight,
  which the plan's FP8 weights term already bounds (nothing more is checked).
The limit at load time is the device itself (gpu_memory_utilization caps the KV budget, not the load): the 16-bit
weights of the stage plus what the process already holds (the plan's non-torch term) must fit the device total.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvledger.accounting.expert_parallel import ep_size
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_profile import PPStage
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import DoesNotFitError
from kvledger.units import GiB

__all__ = ["ONLINE_FP8_STREAMS_FROM", "online_fp8_applies", "check_online_fp8_load"]

ONLINE_FP8_STREAMS_FROM = (0, 16, 0)
"""The first vLLM release whose online FP8 creates weights on the meta device and materializes them per layer
(``fp8.py::Fp8OnlineLinearMethod.create_weights``, ``device="meta"``); earlier ones allocate the 16-bit set first."""


def online_fp8_applies(checkpoint: ModelSpec, s: PlanSettings) -> bool:
    """True when ``--quantization fp8`` quantizes an unquantized checkpoint on load (online FP8)."""
    return s.quantization == "fp8" and checkpoint.quant.method == "none"


def check_online_fp8_load(checkpoint: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver: tuple[int, int, int],
                          total_bytes: int, stages: Iterable[tuple[PPStage, float]]) -> None:
    """Refuse online FP8 on a vLLM before 0.16.0 where a GPU cannot hold its stage's 16-bit weights during the load.

    Args:
        total_bytes: the device total CUDA reports, B. stages: each stage with the plan's non-torch term on it, B.

    Raises:
        DoesNotFitError: exit 3, with the load peak, the device total and what loads instead.
    """
    if not online_fp8_applies(checkpoint, s) or ver >= ONLINE_FP8_STREAMS_FROM:
        return
    worst = None
    for st, non_torch in stages:
        lw = loaded_weights(checkpoint, tp=s.tp, pp=st.pp, pp_rank=st.rank,
                            dtype=None if s.dtype == "auto" else s.dtype, quantization=None, gpu_arch=gpu.arch,
                            engine_version=ver, rocm=gpu.gpu_id.startswith("amd_"), ep=ep_size(checkpoint, s))
        peak = lw.bytes + non_torch
        if peak > total_bytes and (worst is None or peak > worst[1] + worst[2]):
            worst = (st, lw.bytes, non_torch)
    if worst is None:
        return
    st, w16, held = worst
    vtxt = ".".join(map(str, ver))
    where = f" of pipeline stage PP{st.rank}" if st.pp > 1 else ""
    raise DoesNotFitError(
        f"does not load: vLLM {vtxt} with --quantization fp8 first allocates every weight in the checkpoint dtype "
        f"({checkpoint.dtype}) and quantizes only after loading (online FP8 before vLLM 0.16.0: "
        f"model_executor/layers/quantization/fp8.py, Fp8LinearMethod.create_weights), so each GPU{where} holds "
        f"{w16 / GiB:,.2f} GiB of {checkpoint.dtype} weights (computed as vLLM allocates them) + {held / GiB:,.2f} "
        f"GiB non-torch memory = {(w16 + held) / GiB:,.2f} GiB during the load, above the device's "
        f"{total_bytes / GiB:,.2f} GiB; from vLLM 0.16.0 online FP8 materializes and quantizes one layer at a time "
        f"(--engine-version 0.16.0 or later), or serve an FP8 checkpoint, or spread the weights over more GPUs")
