"""The context length a config derives, by each of vLLM's two YaRN rules, with the note that shows the arithmetic.

Source: vLLM ``config/model.py::_get_and_verify_max_len``. Every rope type but su/longrope/llama3 multiplies the length
by its factor in every release read, except YaRN: up to 0.26 (read 0.11–0.19, 0.26) a YaRN config's length is
``original_max_position_embeddings`` × factor; 0.33 skips the factor of ``yarn``, ``deepseek_yarn`` and
``deepseek_llama_scaling``, taking ``max_position_embeddings`` as already scaled (0.27–0.32 not read).

SGLang (``get_context_length``: ``srt/hf_transformers_utils.py`` in 0.4.0, ``srt/utils/hf_transformers_utils.py`` in
0.5.3–0.5.9, ``srt/utils/hf_transformers/common.py`` in 0.5.23; the same code in every wheel read: 0.4.0, 0.5.3, 0.5.5,
0.5.6, 0.5.8, 0.5.9, 0.5.10, 0.5.12, 0.5.14, 0.5.15, 0.5.17, 0.5.20, 0.5.22, 0.5.23) has a rule of its own: the first
present of ``max_sequence_length``, ``seq_length``, ``max_seq_len``, ``model_max_length``, ``max_position_embeddings``
(2048 if none) × the ``factor`` of ``config.rope_scaling`` (1 when that dict names
``original_max_position_embeddings`` or ``rope_type`` llama3). What ``config.rope_scaling`` holds depends on the
transformers the release pins: 4.57 up to 0.5.9 (the config's dict as written), 5.x from 0.5.10 (5.3.0 in 0.5.10,
5.19.0 in 0.5.23), where it is ``rope_parameters`` after ``standardize_rope_params`` (``modeling_rope_utils.py``,
read in 5.3.0 and 5.19.0): a llama3/yarn/longrope dict always gets ``original_max_position_embeddings`` (the config's
length when absent), and Gemma-3's dict is nested under ``full_attention`` (``configuration_gemma3.py``), so no
top-level factor is left.
"""

from __future__ import annotations

import math

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.hfread import MAX_LEN_KEYS

__all__ = ["config_max_len", "sglang_context_len", "trtllm_max_seq_len", "SGLANG_LEN_KEYS"]

_RULE = "vLLM config/model.py _get_and_verify_max_len"
_UNSCALED = ("su", "longrope", "llama3")  # vLLM leaves these lengths as the config gives them
_AS_SCALED = _UNSCALED + ("yarn", "deepseek_yarn", "deepseek_llama_scaling")  # 0.33's list
#: SGLang's CONTEXT_LENGTH_KEYS, in its order of preference (the first present wins, not the smallest)
SGLANG_LEN_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
_V5_ORIGINAL = ("llama3", "yarn", "longrope")  # transformers 5 standardize_rope_params adds the original length
#: rope types whose factor TensorRT-LLM leaves out of max_seq_len: the PyTorch backend's and trtllm-build's
_TRT_UNSCALED = {"pytorch": ("su", "longrope", "llama3", "yarn"), "tensorrt": ("su", "longrope", "llama3")}


def config_max_len(c: Cfg, notes: list[str]) -> tuple[int, int, int]:
    """(length key's value, max_model_len vLLM ≤0.26 derives, max_model_len vLLM 0.33 derives); appends the
    derivation when a RoPE factor enters it.

    The smallest of vLLM's length keys (``max_position_embeddings``, ``n_positions``, ``max_seq_len``,
    ``seq_length``, ...), 2048 when none is present (vLLM warns and assumes 2048), then × the RoPE scaling
    factor of every rope type except llama3/longrope/su; YaRN starts from ``original_max_position_embeddings``
    up to 0.26 and applies no factor in 0.33 (both rules returned, the plan takes its version's); Gemma-3's
    length is taken as already scaled.
    """
    found = [c.int(k) for k in MAX_LEN_KEYS if c.has(k)]
    if not found:
        notes.append("the config has none of vLLM's length keys (max_position_embeddings, n_positions, max_seq_len, "
                     "seq_length, ...): vLLM assumes 2048 tokens, and so does this plan")
        return 2048, 2048, 2048
    mpe = min(found)
    rs = c.get("rope_scaling", None) or c.get("rope_parameters", None) or {}
    if not isinstance(rs, dict):
        return mpe, mpe, mpe
    per_type = list(rs.values()) if rs and all(isinstance(v, dict) for v in rs.values()) else [rs]
    if "gemma3" in str(c.get("model_type", "")):  # Gemma-3's length is already scaled
        _gemma3_note(per_type, mpe, notes)
        return mpe, mpe, mpe
    derived, scaling, used, later = mpe, 1.0, None, 1.0
    for rp in per_type:  # rope_parameters may hold one dict per layer type (transformers 5)
        rtype = rp.get("rope_type", rp.get("type", "default"))
        if rtype in _UNSCALED:
            continue
        f = _factor(c, rp, scaling)
        scaling = 1.0 if f is None else f  # vLLM falls back to 1.0 for a null factor
        later = (1.0 if f is None else f) if rtype not in _AS_SCALED else later
        used = rtype if "factor" in rp else used
        derived = _yarn_original(c, rp, mpe) if rtype == "yarn" else derived
    out, out_later = int(derived * scaling), int(mpe * later)
    if used is not None and (scaling != 1.0 or later != 1.0):
        notes.append(_scaled_note(used, mpe, derived, scaling, out, out_later))
    return mpe, out, out_later


def _factor(c: Cfg, rp: dict, default: float) -> float | None:
    """One rope dict's ``factor`` (``default`` when absent, None when null). Raises ConfigError: out of (0, 1024]."""
    f = rp.get("factor", default)
    if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1024):
        raise c.error("rope_scaling", f"factor must be a number in (0, 1024], got {f!r:.40}")
    return None if f is None else float(f)


def _yarn_original(c: Cfg, rp: dict, mpe: int) -> int:
    """YaRN's starting length up to vLLM 0.26: ``original_max_position_embeddings``, else the config's length."""
    orig = rp.get("original_max_position_embeddings")
    if orig is None:
        return mpe
    if isinstance(orig, bool) or not isinstance(orig, int) or not 0 < orig <= mpe:
        raise c.error("rope_scaling", f"original_max_position_embeddings must be an integer in [1, {mpe:,}], "
                                      f"got {orig!r:.40}")
    return orig


def _num(x: float) -> str:
    """A factor as the config writes it, without a trailing .0."""
    return f"{x:g}"


def _scaled_note(rtype: str, mpe: int, base: int, factor: float, out: int, out_later: int) -> str:
    """The derivation of a RoPE-scaled max_model_len, YaRN's two rules included where they differ."""
    start = (f"original_max_position_embeddings {base:,}" if base != mpe else f"max_position_embeddings {mpe:,}")
    head = f"max_model_len {out:,} = {start} × rope_scaling factor {_num(factor)} ({rtype})"
    if out == out_later and rtype not in _AS_SCALED:
        return (f"{head}: {_RULE} multiplies the config's length by the RoPE factor of every rope type but su, "
                "longrope and llama3 (0.11–0.33)")
    later = ("the same" if out == out_later else f"{out_later:,} (a plan takes its version's rule: 0.26 and before "
             "scale, 0.33 does not; 0.27–0.32 not read)")
    return (f"{head}: {_RULE} (0.19) scales a YaRN config from its original length; vLLM 0.33 applies no YaRN factor, "
            f"taking max_position_embeddings {mpe:,} as already scaled, and derives {later}")


def _gemma3_note(per_type: list, mpe: int, notes: list[str]) -> None:
    """Gemma-3: the factor is not applied, as vLLM skips it for any gemma3 model_type."""
    factors = [rp.get("factor") for rp in per_type if isinstance(rp, dict)]
    f = next((x for x in factors if isinstance(x, (int, float)) and not isinstance(x, bool) and x != 1), None)
    if f is not None:
        notes.append(f"max_model_len {mpe:,} = max_position_embeddings, rope_scaling factor {_num(f)} not applied: "
                     f"{_RULE} takes a Gemma-3 length as already scaled (0.19–0.33)")


def sglang_context_len(c: Cfg) -> tuple[int, int]:
    """(context_len SGLang derives with transformers 4 (0.4.0–0.5.9), with transformers 5 (0.5.10–0.5.23)), tokens:
    the first of ``SGLANG_LEN_KEYS`` present (``n_positions`` through GPT-2-style configs' ``attribute_map``, else
    2048) × the rope_scaling factor ``get_context_length`` keeps (module doc)."""
    key = next((k for k in SGLANG_LEN_KEYS if c.get(k, None) is not None), None)
    key = key or ("n_positions" if c.get("n_positions", None) is not None else None)
    if key is None:
        return 2048, 2048
    val = c.int(key)
    v4 = c.get("rope_scaling", None)  # transformers 4: rope_parameters is not read into rope_scaling
    return int(_sglang_factor(c, v4, False) * val), int(_sglang_factor(c, v4 or c.get("rope_parameters", None), True)
                                                        * val)


def _sglang_factor(c: Cfg, rs: object, v5: bool) -> float:
    """The factor ``get_context_length`` multiplies by, for ``rs`` as ``config.rope_scaling`` holds it."""
    if not isinstance(rs, dict) or not rs or all(isinstance(v, dict) for v in rs.values()):
        return 1.0  # none, or one dict per layer type: no top-level factor
    if v5 and "gemma3" in str(c.get("model_type", "")):
        return 1.0  # transformers 5 moves Gemma-3's dict under rope_parameters["full_attention"]
    rtype = rs.get("rope_type", rs.get("type"))  # transformers copies a legacy "type" into "rope_type"
    if "original_max_position_embeddings" in rs or rtype == "llama3" or (v5 and rtype in _V5_ORIGINAL):
        return 1.0
    f = _factor(c, rs, 1.0)
    return 1.0 if f is None else f


def trtllm_max_seq_len(c: Cfg) -> tuple[int, int]:
    """(max_seq_len TensorRT-LLM's PyTorch backend infers, the one trtllm-build deduces), tokens, with no max_seq_len
    given. Both start from ``max_position_embeddings`` (2048 when absent; no other length key) and multiply by
    ``ceil(× factor)`` the rope_scaling factor of every rope type but su/longrope/llama3, and the PyTorch backend
    also leaves YaRN's factor out (NVIDIA/TensorRT-LLM ``tensorrt_llm/_torch/models/modeling_utils.py``
    ``DecoderModelForCausalLM.infer_max_seq_len`` and ``_torch/pyexecutor/model_engine.py``
    ``_infer_max_seq_len_from_config``; ``tensorrt_llm/builder.py`` ``_init_max_seq_len``, which reads the converted
    checkpoint's ``rotary_scaling``, taken here as the HF config's ``rope_scaling``)."""
    mpe = c.int("max_position_embeddings") if c.get("max_position_embeddings", None) is not None else 2048
    rs = c.get("rope_scaling", None)
    if not isinstance(rs, dict) or not rs or all(isinstance(v, dict) for v in rs.values()):
        return mpe, mpe
    rtype = rs.get("type", rs.get("rope_type"))
    f = _factor(c, rs, 1.0)
    pytorch, engine = (mpe if rtype in _TRT_UNSCALED[k] or f in (None, 1.0) else math.ceil(mpe * f)
                       for k in ("pytorch", "tensorrt"))
    return pytorch, engine
