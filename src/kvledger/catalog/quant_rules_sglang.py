"""The compute capability below which SGLang refuses a checkpoint's quantization at start-up (the server does not
start), by release.

``model_loader/loader.py::_get_quantization_config`` refuses a GPU below the config class's ``get_min_capability()``
("The quantization method … is not supported for the current GPU. Minimum capability: …"); compressed-tensors checks
each linear scheme's own minimum when it creates the layer (``compressed_tensors.py::_check_scheme_supported``:
"Quantization scheme is not supported for the current GPU. Min capability: …"). Read in SGLang 0.5.3, 0.5.5, 0.5.14
and 0.5.23 (``srt/layers/quantization/``; the releases between are not read and take the rule of the read release
before them):

* fp8 (``fp8.py`` ``Fp8Config``, a checkpoint's quant_method fp8): 80 in every release read (100 only for MXFP8).
* ModelOpt FP8 (``modelopt_quant.py`` ``ModelOptFp8Config``): 89 in every release read. ModelOpt NVFP4
  (``ModelOptFp4Config``): 100 in 0.5.3 and 0.5.5, 80 in 0.5.14 and 0.5.23.
* AWQ: 75 (``AWQConfig``; from 8.0 ``AWQMarlinConfig.override_quantization_method`` serves it as awq_marlin, 80).
  GPTQ: 60 (``GPTQConfig``; Marlin from 8.0). bitsandbytes 70. MXFP4 (``mxfp4.py``): 80 in every release read.
* compressed-tensors (config 70): W8A8 int8 (``compressed_tensors_w8a8_int8.py``) 89 in 0.5.3 and 0.5.5, 80 in 0.5.14
  and 0.5.23; W8A8 fp8 below 8.9 falls back to W8A16 fp8 (80); W4A16/W8A16 int (``compressed_tensors_wNa16.py``) 80.
  FP4 compressed-tensors checkpoints are not checked here.
"""

from __future__ import annotations

from kvledger.catalog.quant import QuantScheme

__all__ = ["SGLANG_80_FROM", "sglang_min_capability"]

SGLANG_80_FROM = (0, 5, 14)
"""The first SGLang release read whose ModelOpt NVFP4 and compressed-tensors W8A8 int8 minimum is 80 (0.5.5: 100
and 89)."""


def sglang_min_capability(q: QuantScheme, version: tuple[int, ...]) -> tuple[int, str] | None:
    """(SGLang ``version``'s minimum compute capability for checkpoint scheme ``q``, the method's name in SGLang's
    words), or None where none is read (unquantized, FP4 compressed-tensors)."""
    new = tuple(version) >= SGLANG_80_FROM
    if q.description.startswith("modelopt"):
        return (80 if new else 100, "modelopt_fp4") if q.method == "nvfp4" else (89, "modelopt")
    if q.method == "compressed-tensors":
        if q.bits == 4 and q.scale_bytes == 1:  # NVFP4 / MXFP4 in compressed-tensors: not read
            return None
        int8_w8a8 = q.bits == 8 and q.scale_bytes == 4 and " int8" in q.description
        return (80 if new or not int8_w8a8 else 89), "compressed-tensors"
    return {"fp8": (80, "fp8"), "awq": (75, "awq"), "gptq": (60, "gptq"), "bitsandbytes": (70, "bitsandbytes"),
            "mxfp4": (80, "mxfp4")}.get(q.method)
