"""vLLM's ``--quantization`` against the checkpoint's own ``quant_method``: what it accepts, what it quantizes on load,
and what it refuses.

``config/model.py::ModelConfig._verify_quantization`` (read in 0.11.0, 0.19.0 and 0.33.0): each override method may
rename the checkpoint's method given the flag — ``awq_marlin`` when the AWQ checkpoint is Marlin-compatible (4-bit,
group -1/32/64/128) and the flag is absent, ``marlin`` or ``awq_marlin`` (``gptq_marlin`` likewise for a 4- or 8-bit
symmetric GPTQ one); ``modelopt`` and ``modelopt_fp4`` whatever the flag; from 0.26 ``auto_awq``/``auto_gptq`` for
awq, awq_marlin, marlin, auto_awq (gptq, gptq_marlin, marlin, auto_gptq). Then a flag that differs from the
(renamed) checkpoint method is refused: "Quantization method specified in the model config (…) does not match the
quantization method specified in the `quantization` argument (…)". ``-q awq`` on an AWQ checkpoint forces the plain
AWQ kernel: the same weights (kvledger's bytes are the same), a slower GEMM.

On an unquantized checkpoint two methods quantize on load and are modelled: ``fp8`` (``fp8.py``: every Linear in FP8
with a per-tensor fp32 scale) and ``bitsandbytes`` (``bitsandbytes.py`` ``BitsAndBytesConfig()`` defaults:
``load_in_4bit``, ``bnb_4bit_quant_type`` fp4, no double quantization; ``bitsandbytes_loader.py`` quantizes each
Linear with ``quantize_4bit``, blocksize 64: 4-bit values + an fp32 absmax per 64 as its quant state; embeddings and
the LM head, not ``LinearBase``, stay in the model dtype).

Other methods need a checkpoint already quantized: ``model_loader/weight_utils.py::get_quant_config`` (read in 0.19.0
and 0.33.0) takes their settings from config.json's ``quantization_config``, else from the file the method's
``get_config_filenames`` names in the checkpoint, and with neither raises "Cannot find the config file for <method>"
at start-up (``_CONFIG_FILES``).
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant import QuantScheme, online_fp8
from kvledger.catalog.quant_rules import NO_BITSANDBYTES_FROM
from kvledger.errors import InputError

__all__ = ["ONLINE_METHODS", "scheme_for_flag", "online_scheme"]

ONLINE_METHODS = ("fp8", "bitsandbytes")
"""``--quantization`` values modelled on an unquantized checkpoint."""
_KNOWN = frozenset({"fp8", "bitsandbytes", "awq", "awq_marlin", "auto_awq", "gptq", "gptq_marlin", "auto_gptq",
                    "marlin", "compressed-tensors", "modelopt", "modelopt_fp4", "fbgemm_fp8", "mxfp4", "gguf",
                    "experts_int8", "moe_wna16", "torchao", "inc", "quark", "ptpc_fp8", "fp_quant", "petit_nvfp4",
                    "modelopt_mxfp8", "modelopt_mixed", "bitblas", "gptq_bitblas", "hqq", "tpu_int8", "deepspeedfp",
                    "ipex", "auto-round", "rtn", "cpu_awq"})
_NONE = (None, "", "auto", "none")
_CONFIG_FILES = {"awq": "quant_config.json or quantize_config.json", "auto_awq": "quantize_config.json or "
                 "quant_config.json", "modelopt": "hf_quant_config.json", "modelopt_fp4": "hf_quant_config.json",
                 "petit_nvfp4": "hf_quant_config.json", "inc": "quantization_config.json",
                 **dict.fromkeys(("awq_marlin", "gptq", "gptq_marlin", "auto_gptq", "moe_wna16", "cpu_awq"),
                                 "quantize_config.json")}
"""The quantization config file each method reads from a checkpoint without ``quantization_config`` in config.json
(``get_config_filenames`` of awq.py, gptq.py, awq_marlin.py, gptq_marlin.py, moe_wna16.py, cpu_wna16.py, inc.py,
modelopt.py, petit.py in 0.19.0; auto_awq.py, auto_gptq.py in 0.33.0)."""


def online_scheme(method: str) -> QuantScheme:
    """The scheme of ``--quantization method`` (fp8 or bitsandbytes) applied to an unquantized checkpoint on load."""
    if method == "bitsandbytes":
        return QuantScheme("bitsandbytes", 4, 64, None, (), "bitsandbytes (in-flight --quantization bitsandbytes): "
                           "4-bit fp4 + fp32 absmax per 64", None, 4)
    return online_fp8()


def _override(q: QuantScheme, flag: str | None, version: tuple[int, int, int]) -> str | None:
    """The method an override of vLLM ``version`` renames checkpoint scheme ``q`` to under ``--quantization flag``
    (None: absent), or None where none does."""
    cm = q.config_method
    if cm.startswith("modelopt"):
        return cm  # modelopt.py: override_quantization_method returns it whatever the flag
    if cm not in ("awq", "gptq"):
        return None
    if version >= (0, 26, 0):  # auto_awq.py / auto_gptq.py
        return f"auto_{cm}" if flag in (None, cm, f"{cm}_marlin", "marlin", f"auto_{cm}") else None
    marlin_ok = (q.bits == 4 if cm == "awq" else q.bits in (4, 8) and q.symmetric) and q.group_size in (0, 32, 64, 128)
    return f"{cm}_marlin" if marlin_ok and flag in (None, "marlin", f"{cm}_marlin") else None


def scheme_for_flag(model: ModelSpec, flag: str | None, version: tuple[int, int, int]) -> QuantScheme:
    """The weight scheme vLLM ``version`` loads ``model`` with under ``--quantization flag``.

    Raises:
        InputError: an unknown method, a method that does not match the checkpoint's (vLLM refuses it), or one that
            would quantize an unquantized checkpoint on load and is not modelled.
    """
    q = model.quant
    if flag in _NONE:
        return q
    if flag not in _KNOWN:
        raise InputError(f"--quantization {flag!r:.40}: not a vLLM quantization method (vLLM: \"Unknown quantization "
                         f"method\"); for a quantized checkpoint leave it out: vLLM reads the method from its config")
    if q.method == "none":
        if flag in ONLINE_METHODS:
            return online_scheme(flag)
        if flag in _CONFIG_FILES:
            raise InputError(_needs_quantized_checkpoint(model.name, flag, version))
        raise InputError(f"--quantization {flag}: {model.name} is unquantized, and quantizing it with {flag} on load "
                         f"is not modelled (modelled: {', '.join(ONLINE_METHODS)}); plan a checkpoint already "
                         f"quantized with {flag}")
    if _override(q, flag, version) is not None or flag == q.config_method:
        return q
    vtxt = ".".join(map(str, version))
    raise InputError(f"--quantization {flag}: {model.name} is already quantized as {q.config_method} "
                     f"({q.description}); vLLM {vtxt} refuses the mismatch at start-up (\"Quantization method "
                     f"specified in the model config ({q.config_method}) does not match the quantization method "
                     f"specified in the `quantization` argument ({flag})\"); leave --quantization out: vLLM serves it "
                     f"as "
                     f"{_override(q, None, version) or q.config_method}")


def _needs_quantized_checkpoint(model_name: str, flag: str, version: tuple[int, int, int]) -> str:
    """vLLM's refusal of ``--quantization flag`` on unquantized ``model_name``: the method quantizes nothing on load,
    it reads a pre-quantized checkpoint's settings (``_CONFIG_FILES``), and the methods that do quantize on load in
    ``version`` (bitsandbytes only before 0.28.0, which removed it: quant_rules.py)."""
    works = ("--quantization fp8 (FP8 weights, quantized on load) or bitsandbytes (4-bit, quantized in flight) works"
             if version < NO_BITSANDBYTES_FROM else
             "--quantization fp8 (FP8 weights, quantized on load) works (bitsandbytes, removed in vLLM 0.28.0, up to "
             "0.27)")
    return (f"--quantization {flag}: {model_name} is unquantized, and {flag} does not quantize weights on load: vLLM "
            f"reads its settings from a checkpoint already quantized with it (config.json's quantization_config, or "
            f"{_CONFIG_FILES[flag]}), and with neither refuses at start-up (\"Cannot find the config file for "
            f"{flag}\"); on an unquantized checkpoint {works}; or plan a checkpoint already quantized with {flag}")
