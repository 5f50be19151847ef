"""DeepSeek-V4: compressed attention layers, hyper-connections and hash-routed MoE (``DeepseekV4ForCausalLM``).

Layer layout and weight names follow vLLM 0.33 ``models/deepseek_v4/attention.py`` and
``models/deepseek_v4/nvidia/model.py``; per-layer compress ratios as vLLM reads them
(``transformers_utils/deepseek_v4_utils.get_compress_ratios``): the legacy ``compress_ratios`` list, else
``compress_rates[layer_types[i]]`` (0 or absent: a window-only layer, ratio 1).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.compressed_mla import CompressedMLAAttention
from kvledger.catalog.families_mlp import moe_counts
from kvledger.catalog.family_base import Family, embed
from kvledger.catalog.weights import Weight, gated_mlp, mat, moe_experts, norm, vec

__all__ = ["deepseek_v4", "compress_ratios"]

_RATIOS = (1, 4, 128)


def compress_ratios(c: Cfg, n: int, notes: list[str] | None = None) -> list[int]:
    """Each decoder layer's compress ratio (1 = window only); MTP layers, listed last in ``compress_ratios``, dropped.
    A layer type ``compress_rates`` does not name is window only, as vLLM reads it (``rates.get(type, 0)``): ``notes``
    gets a line naming such types."""
    if c.has("compress_ratios"):
        raw = c.list("compress_ratios")
        if len(raw) < n:
            raise c.error("compress_ratios", f"has {len(raw)} entries for {n} layers")
        vals = raw[:n]
        key = "compress_ratios"
    else:
        rates = c.get("compress_rates", None)
        if not isinstance(rates, dict):
            raise c.error("compress_rates", "is missing: DeepSeek-V4 names each layer type's compress ratio there")
        types = c.list("layer_types")
        if len(types) != n:
            raise c.error("layer_types", f"has {len(types)} entries for {n} layers")
        vals = [rates.get(t, 0) if isinstance(t, str) else None for t in types]
        key = "compress_rates"
        unnamed = sorted({t for t in types if isinstance(t, str) and t not in rates})
        if unnamed and notes is not None:
            notes.append(f"layer types {', '.join(unnamed)} are not in compress_rates: read as window-only layers "
                         "(ratio 0), as vLLM's get_compress_ratios reads them")
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or max(1, v) not in _RATIOS:
            raise c.error(key, f"gives a compress ratio of {v!r}; vLLM 0.33 builds compressors for 4 and 128 only "
                               "(0 or 1: window only)")
        out.append(max(1, v))
    return out


def _compressor_weights(a: str, r: int, h: int, hd: int, q_lora: int, index: tuple[int, int]) -> list[Weight]:
    """The compressor of a layer at compress ratio ``r`` > 1 and, at ratio 4, the indexer (``index``: its head dim and
    heads) with its own compressor, under attention prefix ``a``."""
    ihd, inh = index
    w: list[Weight] = []
    if r > 1:
        coff = 2 if r == 4 else 1
        w += mat(f"{a}.compressor.fused_wkv_wgate", 2 * coff * hd, h, tp="replicate")
        w += vec(f"{a}.compressor.ape", r * coff * hd) + norm(f"{a}.compressor.norm", hd)
    if r == 4:
        x = f"{a}.indexer"
        w += mat(f"{x}.wq_b", inh * ihd, q_lora, tp="replicate") + mat(f"{x}.weights_proj", inh, h, tp="replicate",
                                                                       linear=False)
        w += mat(f"{x}.compressor.fused_wkv_wgate", 2 * 2 * ihd, h, tp="replicate")
        w += vec(f"{x}.compressor.ape", 4 * 2 * ihd) + norm(f"{x}.compressor.norm", ihd)
    return w


def deepseek_v4(c: Cfg) -> Family:
    """Per layer: a ``CompressedMLAAttention`` and the weights vLLM loads (attention with grouped low-rank output,
    compressor and indexer where the ratio asks for them, hyper-connection mixers, MoE with shared experts)."""
    h, nh, n = c.int("hidden_size"), c.int("num_attention_heads"), c.int("num_hidden_layers")
    hd, rope, window = c.int("head_dim"), c.int("qk_rope_head_dim"), c.int("sliding_window")
    q_lora, o_lora, groups = c.int("q_lora_rank"), c.int("o_lora_rank"), c.int("o_groups")
    ihd, inh = c.int("index_head_dim"), c.int("index_n_heads")
    hc = c.int("hc_mult", 1)
    if rope >= hd:
        raise c.error("qk_rope_head_dim", f"= {rope} leaves no NoPE part of head_dim {hd}")
    if nh % groups:
        raise c.error("o_groups", f"= {groups} does not divide num_attention_heads {nh}")
    E, k = moe_counts(c, "deepseek_v4")
    fam = Family([], [], E, k)
    ratios = compress_ratios(c, n, fam.notes)
    w, _ = embed(c, h, tied_default=False)
    mix_hc, hc_dim = (2 + hc) * hc, hc * h
    mlp_types = c.list("mlp_layer_types", None) or []
    num_hash = sum(1 for t in mlp_types if t == "hash_moe") if mlp_types else c.int("num_hash_layers", 0)
    inter = c.int("moe_intermediate_size")
    shared = c.int("n_shared_experts", 0, minimum=0)
    for i, r in enumerate(ratios):
        fam.layers.append(CompressedMLAAttention(hd - rope, rope, nh, compress_ratio=r, swa_window_tokens=window,
                                                 index_head_dim=ihd if r == 4 else 0,
                                                     index_n_heads=inh if r == 4 else 0,
                                                 index_topk=c.int("index_topk") if r == 4 else 0))
        p = f"model.layers.{i}"
        a = f"{p}.attn"
        w += mat(f"{a}.fused_wqa_wkv", q_lora + hd, h, tp="replicate") + norm(f"{a}.q_norm", q_lora)
        w += mat(f"{a}.wq_b", nh * hd, q_lora) + norm(f"{a}.kv_norm", hd)
        w += mat(f"{a}.wo_a", groups * o_lora, nh * hd // groups) + mat(f"{a}.wo_b", h, groups * o_lora)
        w += vec(f"{a}.attn_sink", nh, tp="shard")
        w += _compressor_weights(a, r, h, hd, q_lora, (ihd, inh))
        w += norm(f"{p}.attn_norm", h) + norm(f"{p}.ffn_norm", h)
        for part in ("attn", "ffn"):
            w += [*mat(f"{p}.hc_{part}_fn", mix_hc, hc_dim, tp="replicate", linear=False),
                  *vec(f"{p}.hc_{part}_base", mix_hc), *vec(f"{p}.hc_{part}_scale", 3)]
        if E:
            w += mat(f"{p}.ffn.gate", E, h, tp="replicate", linear=False) + moe_experts(f"{p}.ffn", h, inter, E)
            if i < num_hash:  # hash routing: a (vocab × top-k) table of expert ids instead of a score bias
                w += vec(f"{p}.ffn.gate.tid2eid", c.int("vocab_size") * k)
            if shared:
                w += gated_mlp(f"{p}.ffn.shared_experts", h, inter * shared)
        else:
            w += gated_mlp(f"{p}.ffn", h, c.int("intermediate_size"))
    w += norm("model.norm", h) + mat("model.hc_head_fn", hc, hc_dim, tp="replicate", linear=False)
    w += vec("model.hc_head_base", hc) + vec("model.hc_head_scale", 1)
    fam.weights = w
    kinds = {r: ratios.count(r) for r in sorted(set(ratios))}
    fam.notes.append("DeepSeek-V4 compressed attention: " + ", ".join(
        f"{m} layers " + ("window only" if r == 1 else f"at compress ratio {r}") for r, m in kinds.items())
        + f"; every layer keeps its last {window} tokens raw (vLLM 0.33 layout, fp8_ds_mla entries)")
    return fam
