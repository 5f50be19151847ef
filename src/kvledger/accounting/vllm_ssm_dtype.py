"""The recurrent-state (SSM) dtype vLLM gives Mamba and Gated DeltaNet layers when ``--mamba-ssm-cache-dtype`` is
``auto``.

``auto`` means the model dtype (``layers/mamba/mamba_utils.py : MambaStateDtypeCalculator._mamba_state_dtype``),
except where a model's config hook in ``models/config.py`` (``MODELS_CONFIG_MAP``) rewrites the cache config first:

- Nemotron-H (``NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype``, from 0.13): the config's
  ``mamba_ssm_cache_dtype``, else float16 in 0.13–0.19 and float32 from 0.20 (read in 0.13.0, 0.19.0, 0.20.0 and
  0.33.0).
- Qwen3.5 (``Qwen3_5ForConditionalGenerationConfig.verify_and_update_config``, from 0.17): the text config's
  ``mamba_ssm_dtype`` (read in 0.16.0, which has no hook, 0.17.0 and 0.33.0).

A float32 state doubles the SSM part of every state page, and with it the attention block the page must fit in
(``platforms/interface.py : _align_hybrid_block_size``).
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.layers import StateLayer
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["MAMBA_DTYPES", "NEMOTRON_H", "QWEN3_5", "check_ssm_dtype", "ssm_dtype_rule", "with_ssm_dtype"]

MAMBA_DTYPES = ("auto", "float32", "float16", "bfloat16")
"""The values vLLM 0.33 accepts for --mamba-ssm-cache-dtype (config/cache.py MambaDType)."""

NEMOTRON_H = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2"})
"""Architectures mapped to the Nemotron-H hook in ``MODELS_CONFIG_MAP`` (vLLM 0.33)."""
QWEN3_5 = frozenset({"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                     "Qwen3_5MoeForConditionalGeneration"})
"""Architectures mapped to the Qwen3.5 hook in ``MODELS_CONFIG_MAP`` (vLLM 0.17 and 0.33)."""


def check_ssm_dtype(value: str | None) -> str:
    """``--mamba-ssm-cache-dtype value`` lower-cased ("auto" for None), as every command that plans a pool reads it.

    Raises:
        InputError: a value vLLM refuses, naming the ones it accepts.
    """
    if value is None:
        return "auto"
    if value.lower() not in MAMBA_DTYPES:
        raise InputError(f"--mamba-ssm-cache-dtype {value}: vLLM accepts {', '.join(MAMBA_DTYPES)}")
    return value.lower()


def ssm_dtype_rule(model: ModelSpec, ver: tuple, given: str) -> tuple[str, str | None]:
    """(the SSM state dtype vLLM ``ver`` uses, why) for ``--mamba-ssm-cache-dtype given``; why is None where
    ``auto`` stays the model dtype or the flag was given."""
    if given.lower() != "auto" or not any(isinstance(layer, StateLayer) for layer in model.layers):
        return given, None
    arch = model.architectures[0] if model.architectures else ""
    hint = model.ssm_dtype_hint
    if arch in NEMOTRON_H and ver >= (0, 13, 0):
        default = "float32" if ver >= (0, 20, 0) else "float16"
        dtype = hint or default
        where = "the config's mamba_ssm_cache_dtype" if hint else f"vLLM's default for Nemotron-H ({default})"
        hook = "NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype"
    elif arch in QWEN3_5 and ver >= (0, 17, 0) and hint:
        dtype, where = hint, "the config's mamba_ssm_dtype"
        hook = "Qwen3_5ForConditionalGenerationConfig.verify_and_update_config"
    else:
        return given, None
    size = 4 if dtype == "float32" else 2
    return dtype, (f"Mamba SSM state in {dtype} ({size} B per element): --mamba-ssm-cache-dtype auto becomes "
                   f"{where} (models/config.py {hook}); conv state in the model dtype")


def with_ssm_dtype(model: ModelSpec, s: PlanSettings, ver: tuple) -> tuple[PlanSettings, tuple[str, ...]]:
    """The settings with the SSM state dtype vLLM resolves ``auto`` to, and the note saying so (if any)."""
    given = s.mamba_ssm_cache_dtype
    if given.lower() != "auto" and not any(isinstance(layer, StateLayer) for layer in model.layers):
        return s, (f"--mamba-ssm-cache-dtype {given} has no effect: the model keeps no Mamba (SSM) state",)
    dtype, why = ssm_dtype_rule(model, ver, given)
    return (replace(s, mamba_ssm_cache_dtype=dtype), (why,)) if why else (s, ())
