"""Whether vLLM starts with an FP8 KV cache on a GPU without native FP8 (below compute capability 8.9): where the only
attention backend it can pick for the model is a Triton one, it refuses at start-up.

Read in vLLM's source, release by release (wheels 0.23.0 to 0.33.0):

* The Triton backends store an FP8 KV cache as ``float8_e4m3fn`` (Triton's ``fp8e4nv``), which has no lowering
  before SM89; ``TritonAttentionImpl.__init__`` (``v1/attention/backends/triton_attn.py``, from 0.24.0) and
  ``TritonMLAImpl.__init__`` (``v1/attention/backends/mla/triton_mla.py``, from 0.26.0) raise ``ValueError`` ("FP8 KV
  cache is not supported by the Triton attention backend ... requires SM89+").
* Below SM90 the other backends drop out (``platforms/cuda.py``, ``_get_backend_priorities`` and each backend's
  ``validate_configuration``): FLASH_ATTN takes no FP8 KV there and no attention sinks below 9.0; FlashInfer serves
  sinks only on SM90/SM100/SM120 (``FlashInferBackend.supports_sink``) and, from 0.25.0, no GPU below SM80
  (``supports_compute_capability``: "broken on SM75"); FLEX_ATTENTION takes no FP8 KV; the MLA backends other than
  TRITON_MLA need SM90 (FLASH_ATTN_MLA, FLASHMLA) or SM100 (FLASHINFER_MLA).

So, below SM89, an FP8 KV cache is refused for a model with attention sinks (gpt-oss) from 0.24.0, for an MLA model
(DeepSeek-V3, Kimi-K2) from 0.26.0, and for every model below SM80 (T4) from 0.25.0. On SM80/SM86 a model without
sinks or MLA gets FlashInfer, which takes fp8, fp8_e4m3 and fp8_e5m2.

Earlier, below SM80 (wheels 0.10.2, 0.11.0, 0.11.1, 0.11.2, 0.12.0): 0.11.0 alone refuses. Its V1 engine (V0 is gone,
and with it 0.10's fallback: ``EngineArgs._is_v1_supported_oracle`` sent an FP8 KV cache FlashAttention cannot take
to V0, which started) gives a GPU below SM80 FlexAttention whatever the KV dtype (``platforms/cuda.py
get_attn_backend_cls``: "FlexAttention is the default for older GPUs"), and ``FlexAttentionImpl.__init__`` raises
``NotImplementedError`` ("FlexAttention does not support quantized kv-cache"). From 0.11.1 the backend is chosen by
priority (``_get_backend_priorities``), and FlashInfer (SM 7.5 to 12.1 until 0.25.0) takes the FP8 cache.
"""

from __future__ import annotations

from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import EngineRefusalError

__all__ = ["FP8_KV_REFUSED_FROM", "FP8_KV_FLEX_ONLY", "fp8_kv_refusal", "check_fp8_kv"]

FP8_KV_REFUSED_FROM: dict[str, tuple[int, int, int]] = {"sinks": (0, 24, 0), "below_sm80": (0, 25, 0),
                                                        "mla": (0, 26, 0)}
"""Why the Triton backend is the only one left → the first vLLM release whose Triton backend refuses FP8 KV there."""
FP8_KV_FLEX_ONLY: tuple[tuple[int, int, int], tuple[int, int, int]] = ((0, 11, 0), (0, 11, 1))
"""The releases [first, next) that give a GPU below SM80 FlexAttention only, which refuses any quantized KV cache."""
_TRITON_QUOTE = ("its Triton kernels store FP8 as fp8e4nv, which needs SM89+ (\"FP8 KV cache is not supported by the "
                 "Triton attention backend\")")
_FLEX_QUOTE = ("FlexAttention takes no quantized KV cache (\"FlexAttention does not support quantized kv-cache\"); "
               "vLLM 0.11.1 to 0.24 start it on FlashInfer")


def _capability(arch: str) -> int | None:
    """``"sm86"`` → 86; None for a GPU that is not NVIDIA (no arch)."""
    return int(arch[2:]) if arch.startswith("sm") and arch[2:].isdigit() else None


def fp8_kv_refusal(model: ModelSpec, gpu: GpuSpec, kv_cache_dtype: str, version: tuple[int, int, int]) -> str | None:
    """vLLM ``version``'s reason to refuse ``--kv-cache-dtype`` (an FP8 one) for ``model`` on ``gpu``; None when it
    starts (not FP8, a GPU with native FP8, a non-NVIDIA GPU, or a release before the refusal)."""
    got = _refusal(model, gpu, kv_cache_dtype, version)
    return got[0] if got else None


def _refusal(model: ModelSpec, gpu: GpuSpec, kv_cache_dtype: str,
             version: tuple[int, int, int]) -> tuple[str, str] | None:
    """(why, what the backend left says) for :func:`fp8_kv_refusal`."""
    cc = _capability(gpu.arch)
    if not kv_cache_dtype.startswith("fp8") or cc is None or cc >= 89:
        return None
    mla = model.layer_counts().get("mla", 0)
    if mla and version >= FP8_KV_REFUSED_FROM["mla"]:
        return ("an MLA model gets TRITON_MLA there (FLASH_ATTN_MLA and FLASHMLA need SM90, FLASHINFER_MLA SM100)",
                _TRITON_QUOTE)
    if any(w.path.endswith(".sinks") for w in model.weights) and version >= FP8_KV_REFUSED_FROM["sinks"]:
        return ("a model with attention sinks gets TRITON_ATTN there (FLASH_ATTN takes sinks from SM90 only, "
                "FlashInfer on SM90/SM100/SM120)", _TRITON_QUOTE)
    if cc < 80 and version >= FP8_KV_REFUSED_FROM["below_sm80"]:
        return ("below SM80 only TRITON_ATTN is left (FLASH_ATTN and FlashInfer need SM80, FLEX_ATTENTION takes no "
                "FP8)", _TRITON_QUOTE)
    if cc < 80 and not mla and FP8_KV_FLEX_ONLY[0] <= version < FP8_KV_FLEX_ONLY[1]:
        return ("below SM80 this release's V1 engine gives attention layers FLEX_ATTENTION (FLASH_ATTN needs SM80; "
                "no V0 engine to fall back to, and no FlashInfer choice before 0.11.1)", _FLEX_QUOTE)
    return None


def check_fp8_kv(model: ModelSpec, gpu: GpuSpec, kv_cache_dtype: str, version: tuple[int, int, int],
                 quantization: str | None = None) -> None:
    """Refuse an FP8 KV cache where vLLM ``version`` does (``fp8_kv_refusal``), after the refusal of the weights'
    quantization (``--quantization`` ``quantization``) that vLLM makes first: ``config/vllm.py::VllmConfig``
    builds the quantization config (``_get_quantization_config``, its capability check) before an attention backend
    is chosen for the KV dtype (model init), so a ModelOpt FP8 checkpoint on a T4 fails on its method, not its KV.

    Raises:
        EngineRefusalError: vLLM refuses this quantization, or this FP8 KV cache, on this GPU (exit 3).
    """
    if _refusal(model, gpu, kv_cache_dtype, version) is not None:
        from kvledger.catalog.quant_flag import scheme_for_flag
        from kvledger.catalog.quant_rules import check_quant_release

        check_quant_release(scheme_for_flag(model, quantization, version), quantization, version, gpu.arch)
    got = _refusal(model, gpu, kv_cache_dtype, version)
    if got is None:
        return
    why, quote = got
    v, cc = ".".join(map(str, version)), _capability(gpu.arch) or 0
    raise EngineRefusalError(f"--kv-cache-dtype {kv_cache_dtype}: vLLM {v} refuses an FP8 KV cache for {model.name} "
                             f"on the {gpu.name} ({gpu.arch}, compute capability {cc // 10}.{cc % 10}): {why}, and "
                             f"{quote}; use --kv-cache-dtype auto, or a GPU of SM89 or later")
