"""Architecture families: from a config, each layer's KV spec and the full weight inventory.

One function per family whose layout genuinely differs (decoder-only softmax attention
with dense or MoE MLP; DeepSeek MLA; Qwen3-Next; Jamba; Nemotron-H; OPT). Layer layouts
follow the Hugging Face modeling files named in each docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.layers import ChunkedLocalAttention, FullAttention, LayerSpec, SlidingWindowAttention
from kvledger.catalog.weights import Weight, gated_mlp, mat, moe_experts, norm, std_attention, vec

__all__ = ["Family", "FAMILY_OF", "build_family"]


@dataclass
class Family:
    """What a family parser found.

    Attributes:
        layers: one KV spec per decoder layer; None for layers without attention or state (Nemotron-H MLP layers).
        weights: every parameter tensor.
        num_experts / experts_per_token: routed experts per MoE layer and top-k (0 for dense models).
        notes: remarks the ledger shows (e.g. which field decided the layout).
    """

    layers: list[LayerSpec | None]
    weights: list[Weight]
    num_experts: int = 0
    experts_per_token: int = 0
    notes: list[str] = field(default_factory=list)


def heads(c: Cfg) -> tuple[int, int, int, int]:
    """(hidden, attention heads, KV heads, head_dim) with the MHA/MQA/explicit-head_dim rules."""
    h, nh = c.int("hidden_size"), c.int("num_attention_heads")
    if c.has("num_key_value_heads"):
        nkv = c.int("num_key_value_heads")
    elif c.get("multi_query", False) is True:
        nkv = 1  # MQA (Falcon-7B, StarCoder): one shared KV head
    elif c.has("num_kv_heads"):
        nkv = c.int("num_kv_heads")
    else:
        nkv = nh  # MHA: no num_key_value_heads means every head has its own K/V
    if c.has("head_dim"):
        hd = c.int("head_dim")
    elif c.has("attention_head_dim"):
        hd = c.int("attention_head_dim")  # Nemotron-H spells it this way
    else:
        if h % nh:
            raise c.error("num_attention_heads", f"hidden_size {h} is not divisible by {nh} heads and no head_dim is given")
        hd = h // nh
    if nkv > nh or nh % nkv:
        raise c.error("num_key_value_heads", f"{nkv} KV heads cannot serve {nh} attention heads (must divide it)")
    return h, nh, nkv, hd


def _attn_kinds(c: Cfg, mt: str, n: int) -> list[str]:
    """Per-layer attention kind ("full", "sliding", "chunked") for softmax-attention families."""
    if c.has("layer_types"):
        lt = c.list("layer_types")
        if len(lt) != n:
            raise c.error("layer_types", f"has {len(lt)} entries for {n} layers")
        kinds = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked"}
        bad = [t for t in lt if t not in kinds]
        if bad:
            raise c.error("layer_types", f"unsupported layer type {bad[0]!r} (known: {', '.join(kinds)})")
        return [kinds[t] for t in lt]
    if c.has("attention_chunk_size"):
        nrl = c.list("no_rope_layers", [])
        if nrl:  # Llama-4: RoPE layers are chunked-local, NoPE layers (0) are global
            return ["chunked" if x else "full" for x in nrl]
        return ["chunked"] * n
    window = c.get("sliding_window", None)
    if not window:
        return ["full"] * n
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not c.get("use_sliding_window", False):
            return ["full"] * n  # Qwen2.5 ships sliding_window=131072 with use_sliding_window=false: inert
        mwl = c.int("max_window_layers", n, minimum=0)
        return ["sliding" if i >= mwl else "full" for i in range(n)]
    if mt == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]  # HF Gemma2: even layers local
    if mt in ("gemma3", "gemma3_text"):
        pat = c.int("sliding_window_pattern", 6)
        return ["full" if (i + 1) % pat == 0 else "sliding" for i in range(n)]
    if mt in ("mistral", "mixtral", "phi3"):
        return ["sliding"] * n  # the window applies to every layer (rolling buffer)
    raise c.error("sliding_window", f"is set but model_type {mt!r} does not say which layers use it; add a 'layer_types' list")


def _attn_spec(c: Cfg, kind: str, nh: int, nkv: int, hd: int) -> LayerSpec:
    if kind == "sliding":
        return SlidingWindowAttention(nkv, hd, hd, nh, window_tokens=c.int("sliding_window"))
    if kind == "chunked":
        return ChunkedLocalAttention(nkv, hd, hd, nh, chunk_tokens=c.int("attention_chunk_size"))
    return FullAttention(nkv, hd, hd, nh)


def embed(c: Cfg, h: int, tied_default: bool) -> tuple[list[Weight], bool]:
    v = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", tied_default)
    w = [Weight("model.embed_tokens.weight", v, h, 1, False, "shard")]
    if not tied:
        w.append(Weight("lm_head.weight", v, h, 1, False, "shard"))
    return w, tied


def decoder(c: Cfg, mt: str) -> Family:
    """Llama, Mistral, Mixtral, Qwen2/2.5/3 (dense and MoE), Phi-3, Gemma-2/3, gpt-oss, Llama-4 text.

    Sources: transformers ``models/<family>/modeling_<family>.py`` (attention biases, q/k norms,
    Gemma's four norms per layer, gpt-oss sinks and expert biases).
    """
    h, nh, nkv, hd = heads(c)
    n = c.int("num_hidden_layers")
    kinds = _attn_kinds(c, mt, n)
    qkv_bias = mt in ("qwen2", "qwen2_moe") or c.get("attention_bias", False) is True
    o_bias = c.get("attention_bias", False) is True and mt not in ("qwen2", "qwen2_moe")
    gemma = mt in ("gemma", "gemma2", "gemma3", "gemma3_text")
    w, _ = embed(c, h, tied_default=gemma)
    fam = Family([], w)
    E, k = moe_counts(c, mt)
    fam.num_experts, fam.experts_per_token = E, k
    for i in range(n):
        p = f"model.layers.{i}"
        fam.layers.append(_attn_spec(c, kinds[i], nh, nkv, hd))
        w += std_attention(f"{p}.self_attn", h, nh, nkv, hd, qkv_bias=qkv_bias, o_bias=o_bias)
        if mt in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
            w += norm(f"{p}.self_attn.q_norm", hd) + norm(f"{p}.self_attn.k_norm", hd)
        if mt == "gpt_oss":
            w += vec(f"{p}.self_attn.sinks", nh, tp="shard")
        norms = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm") if gemma and mt != "gemma" else ("input_layernorm", "post_attention_layernorm")
        for nm in norms:
            w += norm(f"{p}.{nm}", h)
        w += decoder_mlp(c, mt, p, h, i, E)
    w += norm("model.norm", h)
    return fam


def moe_counts(c: Cfg, mt: str) -> tuple[int, int]:
    E = c.int("num_local_experts", None) or c.int("num_experts", None) or 0
    if not E:
        return 0, 0
    return E, c.int("num_experts_per_tok", None) or c.int("experts_per_token")


def decoder_mlp(c: Cfg, mt: str, p: str, h: int, i: int, E: int) -> list[Weight]:
    if not E:
        return gated_mlp(f"{p}.mlp", h, c.int("intermediate_size"), bias=c.get("mlp_bias", False) is True)
    if mt == "mixtral":
        return (mat(f"{p}.block_sparse_moe.gate", E, h, tp="replicate", linear=False)
                + moe_experts(f"{p}.block_sparse_moe", h, c.int("intermediate_size"), E, names=("w1", "w3", "w2")))
    if mt == "gpt_oss":
        inter = c.int("intermediate_size")
        return (mat(f"{p}.mlp.router", E, h, bias=True, tp="replicate", linear=False)
                + [Weight(f"{p}.mlp.experts.gate_up_proj", 2 * inter, h, E, True, "shard", True),
                   Weight(f"{p}.mlp.experts.gate_up_proj_bias", 1, 2 * inter, E, False, "shard", True),
                   Weight(f"{p}.mlp.experts.down_proj", h, inter, E, True, "shard", True),
                   Weight(f"{p}.mlp.experts.down_proj_bias", 1, h, E, False, "replicate", True)])
    if mt == "llama4_text":  # Llama-4: MoE every interleave_moe_layer_step-th layer, routed + one shared expert
        if (i + 1) % c.int("interleave_moe_layer_step", 1) != 0:
            return gated_mlp(f"{p}.feed_forward", h, c.int("intermediate_size_mlp"))
        inter = c.int("intermediate_size")
        return (mat(f"{p}.feed_forward.router", E, h, tp="replicate", linear=False)
                + [Weight(f"{p}.feed_forward.experts.gate_up_proj", 2 * inter, h, E, True, "shard", True),
                   Weight(f"{p}.feed_forward.experts.down_proj", h, inter, E, True, "shard", True)]
                + gated_mlp(f"{p}.feed_forward.shared_expert", h, inter))
    sparse = i not in (c.list("mlp_only_layers", []) or []) and (i + 1) % c.int("decoder_sparse_step", 1) == 0
    if not sparse:
        return gated_mlp(f"{p}.mlp", h, c.int("intermediate_size"))
    w = mat(f"{p}.mlp.gate", E, h, tp="replicate", linear=False) + moe_experts(f"{p}.mlp", h, c.int("moe_intermediate_size"), E)
    if c.has("shared_expert_intermediate_size"):  # Qwen2-MoE / Qwen3-Next shared expert with a sigmoid gate
        w += gated_mlp(f"{p}.mlp.shared_expert", h, c.int("shared_expert_intermediate_size"))
        w += mat(f"{p}.mlp.shared_expert_gate", 1, h, tp="replicate", linear=False)
    return w


FAMILY_OF: dict[str, str] = {mt: "decoder" for mt in (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "gemma", "gemma2",
    "gemma3", "gemma3_text", "gpt_oss", "llama4_text")}
FAMILY_OF.update({"deepseek_v2": "mla", "deepseek_v3": "mla", "kimi_k2": "mla", "qwen3_next": "qwen3_next",
                  "jamba": "jamba", "nemotron_h": "nemotron_h", "opt": "opt", "falcon": "falcon"})


def build_family(c: Cfg, mt: str) -> Family:
    """Dispatch on ``model_type``; the caller has checked that ``mt`` is in FAMILY_OF."""
    from kvledger.catalog import families_hybrid as fh

    kind = FAMILY_OF[mt]
    if kind == "decoder":
        return decoder(c, mt)
    return {"mla": fh.mla, "qwen3_next": fh.qwen3_next, "jamba": fh.jamba, "nemotron_h": fh.nemotron_h, "opt": fh.opt,
            "falcon": fh.falcon}[kind](c)
