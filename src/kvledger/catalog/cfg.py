"""Typed, located access to fields of a raw ``config.json`` dict (every failure names the field and the allowed
range)."""

from __future__ import annotations

import math
from typing import Any

from kvledger.errors import ConfigError

_MISSING = object()

# Physically meaningful upper bounds for a config's integer fields. They keep the work bounded (a
# 32-million-layer config is refused at once instead of building 32 million layers) while leaving
# room far beyond any released model: the largest released configs have 126 layers (Llama-3.1-405B),
# hidden 16,384 (405B), 128 attention heads (DeepSeek-V3), 384 routed experts (Kimi-K2), vocabularies
# of 262,208 tokens (Gemma-3) and 10,485,760 positions (Llama-4-Scout).
LIMITS: dict[str, int] = {
    "num_hidden_layers": 4096,
    "hidden_size": 1 << 20,
    "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16,
    "head_dim": 1 << 16,
    "intermediate_size": 1 << 24,
    "vocab_size": 1 << 26,
    "max_position_embeddings": 1 << 34,
    "num_experts": 1 << 16,
}
DEFAULT_LIMIT = 1 << 40
"""Bound for any other integer field (sizes, counts, ranks), elements."""

_LIMIT_ALIASES = {"moe_intermediate_size": "intermediate_size", "shared_expert_intermediate_size": "intermediate_size",
                  "ffn_dim": "intermediate_size", "intermediate_size_mlp": "intermediate_size",
                      "num_local_experts": "num_experts",
                  "n_routed_experts": "num_experts", "num_kv_heads": "num_key_value_heads",
                      "attention_head_dim": "head_dim",
                  "kv_lora_rank": "head_dim", "qk_rope_head_dim": "head_dim", "qk_nope_head_dim": "head_dim",
                      "v_head_dim": "head_dim"}


def limit_of(key: str) -> int:
    """The largest value a config integer field may take."""
    return LIMITS.get(_LIMIT_ALIASES.get(key, key), DEFAULT_LIMIT)


class Cfg:
    """A view on a config dict that reads fields with type and range checks and ConfigErrors naming the field.

    Attributes:
        raw: the dict (the text config when the file nests one under ``text_config``).
        source: where the config came from (file path or hub id), for messages.
        prefix: the path of ``raw`` inside the file ("" or "text_config.").
    """

    def __init__(self, raw: dict[str, Any], source: str, prefix: str = "") -> None:
        self.raw, self.source, self.prefix = raw, source, prefix

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(self.source, message, field=self.prefix + key)

    def get(self, key: str, default: Any = _MISSING) -> Any:
        v = self.raw.get(key)
        if v is None:
            if default is _MISSING:
                raise self.error(key, "is missing (needed to size this model)")
            return default
        return v

    def int(self, key: str, default: Any = _MISSING, *, minimum: int = 1, maximum: int | None = None) -> int:
        """An integer field in [minimum, maximum] (maximum from LIMITS unless given)."""
        v = self.get(key, default)
        if v is None:
            return v
        hi = limit_of(key) if maximum is None else maximum
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            raise self.error(key, f"must be an integer in [{minimum:,}, {hi:,}], got {_show(v)}")
        if not minimum <= v <= hi:
            raise self.error(key, f"must be an integer in [{minimum:,}, {hi:,}], got {_show(v)}")
        return int(v)

    def float(self, key: str, default: Any = _MISSING, *, minimum: float = -math.inf,
              maximum: float = math.inf) -> float:
        v = self.get(key, default)
        if v is None:
            return v
        if isinstance(v, bool) or not isinstance(v, (int,
                                                     float)) or not math.isfinite(v) or not minimum <= v <= maximum:
            rng = "" if (minimum, maximum) == (-math.inf, math.inf) else f" in [{minimum:g}, {maximum:g}]"
            raise self.error(key, f"must be a finite number{rng}, got {_show(v)}")
        return float(v)

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise self.error(key, f"must be true or false, got {_show(v)}")
        return v

    def str(self, key: str, default: Any = _MISSING) -> str:
        v = self.get(key, default)
        if v is not None and not isinstance(v, str):
            raise self.error(key, f"must be a string, got {_show(v)}")
        return v

    def list(self, key: str, default: Any = _MISSING) -> list[Any]:
        v = self.get(key, default)
        if v is not None and not isinstance(v, list):
            raise self.error(key, f"must be a list, got {type(v).__name__}")
        return v

    def dict(self, key: str, default: Any = _MISSING) -> dict[str, Any]:
        v = self.get(key, default)
        if v is not None and not isinstance(v, dict):
            raise self.error(key, f"must be a JSON object, got {type(v).__name__}")
        return v


def _show(v: Any) -> str:
    """A value for an error message, shortened (a 10,000-digit integer or a huge list is not echoed whole)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**15:
        return f"an integer of {len(str(abs(v))) if abs(v) < 10**4000 else 'more than 4,000'} digits"
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."
