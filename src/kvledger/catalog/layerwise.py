"""Per-layer views of a config: transformers 5's ``per_layer_config`` overrides and layer-kind-specific head fields."""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg

__all__ = ["layer_overrides", "mimo_v2_layer"]


def layer_overrides(c: Cfg, i: int) -> Cfg:
    """Layer ``i``'s view of the config: transformers 5's ``per_layer_config`` (``HeterogeneousConfigMixin``: a dict of
    field overrides keyed by layer index, e.g. Gemma-4's full layers ``{"head_dim": 512}``) laid over the shared fields."""
    plc = c.get("per_layer_config", None)
    if not isinstance(plc, dict):
        return c
    over = next((v for k, v in plc.items() if str(k).isdigit() and int(k) == i and isinstance(v, dict)), None)
    return Cfg({**c.raw, **over}, c.source, c.prefix) if over else c


def mimo_v2_layer(c: Cfg, kind: str, nkv: int, hd: int, notes: list[str]) -> tuple[Cfg, int, int]:
    """MiMo-V2-Flash: the sliding layers' ``swa_num_key_value_heads``/``swa_head_dim`` (else twice the KV heads, as
    transformers' MiMoV2FlashAttention builds them), and V kept at K's head size: vLLM 0.19's MiMoV2Attention pads V
    to ``head_dim`` and gives its Attention no ``head_size_v`` (models/mimo_v2_flash.py)."""
    notes.append("MiMo-V2-Flash: V is cached padded to head_dim, as vLLM 0.19 does (transformers caches it at v_head_dim)")
    if kind == "sliding":
        kv, d = c.int("swa_num_key_value_heads", 2 * nkv), c.int("swa_head_dim", hd)
        window = c.int("sliding_window_size", None) or c.int("sliding_window")
        return Cfg({**c.raw, "v_head_dim": d, "sliding_window": window}, c.source, c.prefix), kv, d
    return Cfg({**c.raw, "v_head_dim": hd}, c.source, c.prefix), nkv, hd
