"""The context length a config derives, as vLLM derives it, with the note that shows the arithmetic.

Source: vLLM ``config/model.py::_get_and_verify_max_len`` (0.19; the same RoPE-factor rule through 0.33 for every
rope type but YaRN, see ``config_max_len``).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.hfread import MAX_LEN_KEYS

__all__ = ["config_max_len"]

_RULE = "vLLM config/model.py _get_and_verify_max_len"
_UNSCALED = ("su", "longrope", "llama3")  # vLLM leaves these lengths as the config gives them


def config_max_len(c: Cfg, notes: list[str]) -> tuple[int, int]:
    """(length key's value, vLLM-derived max_model_len); appends the derivation when a RoPE factor enters it.

    The smallest of vLLM's length keys (``max_position_embeddings``, ``n_positions``, ``max_seq_len``,
    ``seq_length``, ...), 2048 when none is present (vLLM warns and assumes 2048), then × the RoPE scaling
    factor of every rope type except llama3/longrope/su (YaRN starts from ``original_max_position_embeddings``,
    as vLLM 0.19 does; 0.33 no longer applies a YaRN factor, taking the length as already scaled, which this
    version-free spec does not model and the note says); Gemma-3's length is taken as already scaled.
    """
    found = [c.int(k) for k in MAX_LEN_KEYS if c.has(k)]
    if not found:
        notes.append("the config has none of vLLM's length keys (max_position_embeddings, n_positions, max_seq_len, "
                     "seq_length, ...): vLLM assumes 2048 tokens, and so does this plan")
        return 2048, 2048
    mpe = min(found)
    rs = c.get("rope_scaling", None) or c.get("rope_parameters", None) or {}
    if not isinstance(rs, dict):
        return mpe, mpe
    per_type = list(rs.values()) if rs and all(isinstance(v, dict) for v in rs.values()) else [rs]
    if "gemma3" in str(c.get("model_type", "")):  # Gemma-3's length is already scaled
        _gemma3_note(per_type, mpe, notes)
        return mpe, mpe
    derived, scaling, used = mpe, 1.0, None
    for rp in per_type:  # rope_parameters may hold one dict per layer type (transformers 5)
        rtype = rp.get("rope_type", rp.get("type", "default"))
        if rtype in _UNSCALED:
            continue
        f = rp.get("factor", scaling)
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1024):
            raise c.error("rope_scaling", f"factor must be a number in (0, 1024], got {f!r:.40}")
        scaling = 1.0 if f is None else float(f)  # vLLM falls back to 1.0 for a null factor
        used = rtype if "factor" in rp else used
        orig = rp.get("original_max_position_embeddings")
        if rtype == "yarn" and orig is not None:
            if isinstance(orig, bool) or not isinstance(orig, int) or not 0 < orig <= mpe:
                raise c.error("rope_scaling", f"original_max_position_embeddings must be an integer in [1, {mpe:,}], "
                                              f"got {orig!r:.40}")
            derived = orig
    out = int(derived * scaling)
    if used is not None and scaling != 1.0:
        notes.append(_scaled_note(used, mpe, derived, scaling, out))
    return mpe, out


def _num(x: float) -> str:
    """A factor as the config writes it, without a trailing .0."""
    return f"{x:g}"


def _scaled_note(rtype: str, mpe: int, base: int, factor: float, out: int) -> str:
    """The derivation of a RoPE-scaled max_model_len, YaRN's version difference included."""
    start = (f"original_max_position_embeddings {base:,}" if base != mpe else f"max_position_embeddings {mpe:,}")
    head = f"max_model_len {out:,} = {start} × rope_scaling factor {_num(factor)} ({rtype})"
    if rtype != "yarn":
        return (f"{head}: {_RULE} multiplies the config's length by the RoPE factor of every rope type but su, "
                "longrope and llama3 (0.19–0.33)")
    later = ("the same" if out == mpe else f"{mpe:,} (not modelled per version here: give --max-model-len for it)")
    return (f"{head}: {_RULE} (0.19) scales a YaRN config from its original length; vLLM 0.33 applies no YaRN factor, "
            f"taking max_position_embeddings {mpe:,} as already scaled, and derives {later}")


def _gemma3_note(per_type: list, mpe: int, notes: list[str]) -> None:
    """Gemma-3: the factor is not applied, as vLLM skips it for any gemma3 model_type."""
    factors = [rp.get("factor") for rp in per_type if isinstance(rp, dict)]
    f = next((x for x in factors if isinstance(x, (int, float)) and not isinstance(x, bool) and x != 1), None)
    if f is not None:
        notes.append(f"max_model_len {mpe:,} = max_position_embeddings, rope_scaling factor {_num(f)} not applied: "
                     f"{_RULE} takes a Gemma-3 length as already scaled (0.19–0.33)")
