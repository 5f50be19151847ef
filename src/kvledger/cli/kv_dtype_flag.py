"""``--kv-cache-dtype`` checked against the engine the user names, where the typed value and the engine are both known.

kvledger's own names include 16-bit aliases (bf16, fp16, half: ``accounting.kvcache.KV_DTYPE_BYTES``) that its other
paths use; the engines do not all take them:

- vLLM: ``--kv-cache-dtype`` is ``CacheDType`` (``vllm/config/cache.py``), a Literal argparse turns into choices, so
  bf16, fp16 and half are refused at argument parsing in 0.19 and 0.33 alike (float16 and bfloat16 are vLLM's
  spelling); 0.33 lists more choices than 0.19 (the nvfp4, turboquant, octave, ultraquant and per-token-head ones).
- SGLang 0.5.23: ``--kv-cache-dtype`` choices (``srt/arg_groups/fields/model.py``) auto, fp8_e5m2, fp8_e4m3, mxfp8,
  bf16, bfloat16, nvfp4, fp4_mx_block16: bf16 and bfloat16 are taken, fp16, float16 and half refused (0.5.3's
  ``server_args.py`` has only auto, fp8_e5m2, fp8_e4m3). Its plan's "fp8" keeps the note that names SGLang's spelling.
"""

from __future__ import annotations

from kvledger.accounting.kvcache import KV_DTYPE_BYTES, VLLM_019_CACHE_DTYPES, VLLM_SPELLING, vllm_spelling_fix
from kvledger.errors import InputError

__all__ = ["check_kv_dtype_for_engine", "sim_kv_dtype_check", "vllm_cache_dtypes", "SGLANG_CACHE_DTYPES"]

#: vLLM 0.33's ``CacheDType`` (vllm/config/cache.py): 0.19's (``kvcache.VLLM_019_CACHE_DTYPES``) and 14 more
_VLLM_033 = (*VLLM_019_CACHE_DTYPES, "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
             "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit",
             "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6")
#: SGLang 0.5.23's ``--kv-cache-dtype`` choices (srt/arg_groups/fields/model.py)
SGLANG_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")
_SGLANG_REFUSED = ("fp16", "float16", "half")  # neither 0.5.3's nor 0.5.23's choices


def vllm_cache_dtypes(engine_version: str | None) -> tuple[tuple[str, ...], str]:
    """(vLLM's ``--kv-cache-dtype`` choices, the release they were read in): 0.33's from 0.33 (and with no version,
    the newest read), else 0.19's."""
    from kvledger.accounting.vllm_rules import LATEST, version_tuple

    ver = version_tuple(engine_version or LATEST) or version_tuple(LATEST)
    return (_VLLM_033, "0.33") if ver >= (0, 33, 0) else (VLLM_019_CACHE_DTYPES, "0.19")


def check_kv_dtype_for_engine(values: str | list[str] | tuple[str, ...] | None, engine: str,
                              engine_version: str | None) -> None:
    """Refuse a ``--kv-cache-dtype`` value ``engine`` refuses at argument parsing: for vLLM a 16-bit alias (bf16,
    fp16, half, any case) or a known name not in lower case, with vLLM's name and the version's choices; for SGLang
    fp16, float16 or half, with SGLang's choices. Other engines and unknown names are left to the plan's own check.

    Raises:
        InputError: the value and the engine's fix.
    """
    for given in [values] if isinstance(values, str) else values or ():
        d = given.lower()
        if engine == "vllm" and (d in VLLM_SPELLING or (d != given and (d == "auto" or d in KV_DTYPE_BYTES))):
            choices, read = vllm_cache_dtypes(engine_version)
            raise InputError(f"--kv-cache-dtype {given!r}: vLLM refuses it at argument parsing (its choices are "
                             f"lower case: {', '.join(choices)}, vllm/config/cache.py CacheDType in {read}); write "
                             f"{vllm_spelling_fix(d)}")
        if engine == "sglang" and d in _SGLANG_REFUSED:
            raise InputError(f"--kv-cache-dtype {given!r}: SGLang refuses it at argument parsing (its choices are "
                             f"{', '.join(SGLANG_CACHE_DTYPES)}: srt/arg_groups/fields/model.py in 0.5.23); write "
                             "'auto' for the model's own 16-bit dtype")


def sim_kv_dtype_check(values: str | list[str] | tuple[str, ...] | None, policy: str | None,
                       engine_version: str | None) -> None:
    """``check_kv_dtype_for_engine`` for a simulation: SGLang's names under ``--policy sglang`` (its plan is
    SGLang's), vLLM's under every other policy (``sim_setup.plan_engine``)."""
    engine = "sglang" if (policy or "").strip().lower() == "sglang" else "vllm"
    check_kv_dtype_for_engine(values, engine, engine_version)
