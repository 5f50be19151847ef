"""What vLLM refuses of a weight quantization by release before it loads a weight: the GPU's compute capability below
the method's minimum, GPTQ bit widths its kernels do not take, and bitsandbytes after its removal.

* ``config/vllm.py::_get_quantization_config`` refuses a GPU below ``get_min_capability()`` ("The quantization method
  … is not supported for the current GPU. Minimum capability: …"). Read per method (``quantization/*.py``):
  fp8 (``Fp8Config``, the checkpoint's and online ``--quantization fp8``): 80 in 0.11.0, 0.12.0, 0.13.0; 75 from
  0.14.0 (read in 0.14.0, 0.15.0, 0.17.0, 0.19.0, 0.26.0, 0.33.0; below sm89 the weights run on Marlin, weight-only);
  ModelOpt FP8 (``modelopt.py`` ``ModelOptFp8Config``): 89 in 0.9.2–0.26.0, 80 from 0.27.0 (read in 0.27.0–0.29.0,
  0.33.0); ModelOpt NVFP4 (``ModelOptNvFp4Config``): 80 in 0.9.2–0.13.0, 75 from 0.14.0 (read in 0.14.0, 0.15.0,
  0.17.0, 0.19.0, 0.26.0–0.29.0, 0.33.0); AWQ 75 (``awq.py``; ``awq_marlin`` falls back to it where Marlin cannot
  run); GPTQ 60 (``gptq.py``, ``auto_gptq.py``); bitsandbytes 70; MXFP4 80 (``mxfp4.py`` ``Mxfp4Config``, read in
  0.10.1, 0.11.0–0.17.0, 0.19.0, 0.26.0–0.29.0 and 0.33.0; gpt-oss's own config class inherits it in 0.33.0).
* MXFP4 arrives in 0.10.1: 0.9.2 and 0.10.0 have no ``quantization/mxfp4.py`` and no "mxfp4" in
  ``QUANTIZATION_METHODS``, so ``config.py::ModelConfig._verify_quantization`` refuses gpt-oss's checkpoint ("Unknown
  quantization method: mxfp4. Must be one of […]") before any model class is chosen.
* bitsandbytes is gone from 0.28.0: ``quantization/bitsandbytes.py`` and ``model_loader/bitsandbytes_loader.py`` are in
  0.27.0 and not in 0.28.0, 0.29.0 or 0.33.0, and "bitsandbytes" is no longer in ``QUANTIZATION_METHODS``, so
  ``config/model.py::ModelConfig._verify_quantization`` refuses a bitsandbytes checkpoint and ``--quantization
  bitsandbytes`` alike ("Unknown quantization method: bitsandbytes. Must be one of […]").
* GPTQ widths: ``gptq.py`` takes 2, 3, 4 and 8 bits (``gptq_marlin`` 4 and 8 symmetric, the rest on the GPTQ kernel)
  up to 0.19.0; 0.26.0 and 0.33.0 load GPTQ through ``auto_gptq.py``, whose ``TYPE_MAP`` holds (4, sym) and
  (8, sym) only ("Unsupported quantization config: bits=…, sym=…"). Releases 0.20–0.25 are not read: taken as 0.19.

* compressed-tensors: the config passes from 70 (``CompressedTensorsConfig.get_min_capability``), then
  ``compressed_tensors.py::_check_scheme_supported`` refuses the layer's scheme below its own minimum ("Quantization
  scheme is not supported for the current GPU. Min capability: …"; ``schemes/*.py``, read in 0.9.0, 0.9.2, 0.10.1,
  0.11.0–0.19.0, 0.26.0, 0.28.0, 0.33.0): FP8 W8A8 below sm89 falls back to W8A16 FP8, 80 up to 0.15.0 and 75 from
  0.16.0; NVFP4 (W4A4, falling back to W4A16) 80 up to 0.15.0, 75 from 0.16.0; MXFP4 80 (from 0.14.0; none before);
  INT8 W8A8 75; W4A16/W8A16 int (``wNa16``) 80 up to 0.11.0, 75 from 0.12.0; W4A8 int 1 (no limit).

Each is a start-up refusal of a valid checkpoint or flag: :class:`EngineRefusalError`, exit 3 (an unknown
``--quantization`` spelling is refused in ``quant_flag.py``, exit 2).
"""

from __future__ import annotations

from kvledger.catalog.quant import QuantScheme
from kvledger.errors import EngineRefusalError

__all__ = ["FP8_MIN_CAPABILITY_75_FROM", "AUTO_GPTQ_FROM", "NO_BITSANDBYTES_FROM", "DEPRECATED_FROM", "MXFP4_FROM",
           "min_capability", "check_quant_release", "deprecated_method_note"]

FP8_MIN_CAPABILITY_75_FROM = (0, 14, 0)
"""The first release read whose ``Fp8Config.get_min_capability`` is 75 (0.13.0: 80)."""
AUTO_GPTQ_FROM = (0, 26, 0)
"""The first release read that loads GPTQ through ``auto_gptq.py`` (4- and 8-bit symmetric only; 0.19.0: gptq.py)."""
DEPRECATED_FROM = {"fbgemm_fp8": (0, 14, 0)}
"""Checkpoint methods kvledger reads that ``DEPRECATED_QUANTIZATION_METHODS`` lists, from the first release read that
refuses them without ``--allow-deprecated-quantization`` (0.14.0, 0.15.0, 0.16.0, 0.17.0, 0.19.0, 0.26.0–0.29.0,
0.33.0 list fbgemm_fp8; 0.13.0 has no such list)."""
MODELOPT_FP8_MIN_CAPABILITY_80_FROM = (0, 27, 0)
"""The first release read whose ``ModelOptFp8Config.get_min_capability`` is 80 (0.26.0: 89)."""
MXFP4_FROM = (0, 10, 1)
"""The first release with ``quantization/mxfp4.py`` (0.10.0 has none: "Unknown quantization method: mxfp4")."""
NO_BITSANDBYTES_FROM = (0, 28, 0)
"""The first release without bitsandbytes (0.27.0 has ``quantization/bitsandbytes.py``; 0.28.0 does not)."""
CT_75_FROM = (0, 16, 0)
"""The first release read whose compressed-tensors W8A16 FP8 and NVFP4 schemes take 75 (0.15.0: 80)."""
CT_WNA16_75_FROM = (0, 12, 0)
"""The first release read whose compressed-tensors ``wNa16`` scheme takes 75 (0.11.0: 80)."""


def _ct_min_capability(q: QuantScheme, version: tuple[int, int, int]) -> tuple[int, tuple[int, int, int] | None]:
    """(The compute capability vLLM ``version``'s compressed-tensors scheme for ``q`` needs, the first release read
    that takes it from 75 or None) (module docstring); 70, the config's, where no scheme minimum is above it (W4A8
    int) or none is read (MXFP4 before 0.14)."""
    if q.bits == 4 and q.scale_bytes == 1:  # NVFP4 (group 16) or MXFP4 (group 32)
        if q.group_size == 32:
            return (80 if version >= (0, 14, 0) else 70), None
        return (80 if version < CT_75_FROM else 75), CT_75_FROM
    if " float" in q.description:  # FP8: W8A8 needs 89, below it W8A16 FP8 (Marlin)
        return (80 if version < CT_75_FROM else 75), CT_75_FROM
    if q.scale_bytes is None:  # wNa16: packed int weights, model-dtype scales
        return (80 if version < CT_WNA16_75_FROM else 75), CT_WNA16_75_FROM
    return (75 if q.bits == 8 else 70), None  # W8A8 int8; W4A8 int: 1, under the config's 70


def _check_ct(q: QuantScheme, vtxt: str, version: tuple[int, int, int], cap: int) -> None:
    """Refuse a compressed-tensors checkpoint's scheme below its minimum on a GPU of capability ``cap``."""
    need, from75 = _ct_min_capability(q, version)
    if cap >= need or cap < 70:  # below 70 the config's own check refuses it (min_capability, config/vllm.py)
        return
    later = (f"; vLLM {from75[0]}.{from75[1]} and later take it from 75" if from75 and need == 80 and cap >= 75
             else f"; a GPU of compute capability {need // 10}.{need % 10} or more loads it")
    raise EngineRefusalError(f"vLLM {vtxt} does not start: this compressed-tensors checkpoint "
                             f"({q.description.split(':')[0].removeprefix('compressed-tensors ')}) needs compute "
                             f"capability {need} or more, this GPU has {cap} (compressed_tensors.py: \"Quantization "
                             f"scheme is not supported for the current GPU. Min capability: {need}\"){later}")


def min_capability(q: QuantScheme, quantization: str | None, version: tuple[int, int, int]) -> tuple[int, str] | None:
    """(vLLM ``version``'s minimum compute capability for the scheme, the method's name), or None where not read."""
    if q.config_method == "fbgemm_fp8":
        return 80, "fbgemm_fp8"  # FBGEMMFp8Config (fbgemm_fp8.py): 80 in every release read, 0.11.0–0.33.0
    if q.description.startswith("modelopt"):  # ModelOptFp8Config, ModelOptNvFp4Config (modelopt.py)
        if q.method == "nvfp4":
            return (80 if version < FP8_MIN_CAPABILITY_75_FROM else 75), "modelopt_fp4"
        return (89 if version < MODELOPT_FP8_MIN_CAPABILITY_80_FROM else 80), "modelopt"
    if q.method == "fp8":
        name = "fp8" if quantization in (None, "", "auto", "none", "fp8") else quantization
        return (80 if version < FP8_MIN_CAPABILITY_75_FROM else 75), name
    return {"awq": (75, "awq"), "gptq": (60, "gptq"), "bitsandbytes": (70, "bitsandbytes"),
            "mxfp4": (80, "mxfp4"), "compressed-tensors": (70, "compressed-tensors")}.get(q.method)


def check_quant_release(q: QuantScheme, quantization: str | None, version: tuple[int, int, int],
                        gpu_arch: str) -> None:
    """Refuse what vLLM ``version`` refuses at start-up for scheme ``q`` on ``gpu_arch`` ("sm75", …; others pass).

    Raises:
        EngineRefusalError: the GPU below the method's minimum capability, a GPTQ width the release does not load,
            or bitsandbytes or MXFP4 on a release without it (exit 3).
    """
    vtxt = ".".join(map(str, version))
    if q.method == "mxfp4" and version < MXFP4_FROM:
        raise EngineRefusalError(f"this MXFP4 checkpoint (quant_method mxfp4): vLLM {vtxt} does not start: MXFP4 "
                                 f"arrived in vLLM 0.10.1 (config.py: \"Unknown quantization method: mxfp4\"; "
                                 f"quantization/mxfp4.py is not in {vtxt}); --engine-version 0.10.1 or later loads it")
    if q.method == "bitsandbytes" and version >= NO_BITSANDBYTES_FROM:
        what = ("--quantization bitsandbytes" if quantization == "bitsandbytes"
                else "this bitsandbytes checkpoint (quant_method bitsandbytes)")
        raise EngineRefusalError(f"{what}: vLLM {vtxt} does not start: bitsandbytes was removed in vLLM 0.28.0 "
                                 f"(config/model.py: \"Unknown quantization method: bitsandbytes\"); vLLM 0.27 and "
                                 f"earlier load it (--engine-version 0.27.0), or plan an AWQ or GPTQ 4-bit checkpoint "
                                 f"of the model, about the same weight bytes")
    if q.method == "gptq" and version >= AUTO_GPTQ_FROM and (q.bits not in (4, 8) or not q.symmetric):
        sym = "symmetric" if q.symmetric else "asymmetric (sym: false)"
        raise EngineRefusalError(f"{q.bits:g}-bit {sym} GPTQ: vLLM {vtxt} refuses it at start-up (auto_gptq.py: "
                                 f"\"Unsupported quantization config: bits={q.bits:g}, sym={q.symmetric}\"; 4- and "
                                 f"8-bit symmetric only from 0.26); vLLM 0.19 loads it with its GPTQ kernel: "
                                 f"--engine-version 0.19.0")
    need = min_capability(q, quantization, version)
    cap = int(gpu_arch[2:]) if gpu_arch.startswith("sm") and gpu_arch[2:].isdigit() else None
    if q.method == "compressed-tensors" and cap is not None:
        _check_ct(q, vtxt, version, cap)
    if need and cap is not None and cap < need[0]:
        marlin = " (Marlin, weight-only)" if need[1] == "fp8" else ""
        later = (f"; vLLM 0.14 and later take {need[1]} from 75{marlin}"
                 if need[1] in ("fp8", "modelopt_fp4") and cap >= 75 and version < FP8_MIN_CAPABILITY_75_FROM
                 else f"; a GPU of compute capability {need[0] // 10}.{need[0] % 10} or more loads it")
        raise EngineRefusalError(f"vLLM {vtxt} does not start: the quantization method {need[1]} needs compute "
                                 f"capability {need[0]} or more, this GPU has {cap} (config/vllm.py: \"The "
                                 f"quantization method {need[1]} is not supported for the current GPU. Minimum "
                                 f"capability: {need[0]}\"){later}")


def deprecated_method_note(q: QuantScheme, version: tuple[int, int, int]) -> str | None:
    """The launch flag vLLM ``version`` needs for a checkpoint whose method it lists as deprecated, or None."""
    first = DEPRECATED_FROM.get(q.config_method)
    if first is None or tuple(version) < first:
        return None
    vtxt = ".".join(map(str, version))
    return (f"vLLM {vtxt} starts a {q.config_method} checkpoint only with --allow-deprecated-quantization: without it "
            f"config/model.py::_verify_quantization refuses it (\"The quantization method {q.config_method} is "
            f"deprecated and will be removed in future versions of vLLM. To bypass, set "
            f"`--allow-deprecated-quantization`.\"); planned as served with that flag")
