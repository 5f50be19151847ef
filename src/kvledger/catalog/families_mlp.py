"""The MLP of a decoder layer as each family lays it out: dense (gated or plain) or MoE, with the expert counts.

Sources: transformers ``models/<family>/modeling_<family>.py`` (Mixtral's w1/w2/w3, gpt-oss's fused experts with
biases, Llama-4's interleaved MoE with a shared expert, Qwen-MoE's shared expert gate) and vLLM's
``get_num_experts`` names for the expert count.
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.mlp_kind import plain_mlp_file, plain_mlp_width
from kvledger.catalog.weights import Weight, gated_mlp, mat, moe_experts, plain_mlp

__all__ = ["decoder_mlp", "moe_counts", "VERIFIED_DECODERS"]

VERIFIED_DECODERS = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "gemma",
                     "gemma2",
                          "gemma3", "gemma3_text", "gpt_oss", "llama4_text", "starcoder2", "lfm2")
"""The decoders whose layout was checked tensor by tensor against transformers; every other model_type gets the Llama
layout with its config's biases and MLP kind (families.decoder)."""


def moe_counts(c: Cfg, mt: str) -> tuple[int, int]:
    """(routed experts, top-k): vLLM's ``get_num_experts`` names (num_experts, moe_num_experts, n_routed_experts,
    num_local_experts)."""
    if c.get("is_moe", True) is False:  # Doge's class default carries num_experts=16384 with is_moe false: dense
        return 0, 0
    key = next((k for k in ("num_local_experts", "num_experts", "moe_num_experts", "n_routed_experts") if c.has(k)),
               None)
    E = c.int(key, minimum=0) if key and not isinstance(c.get(key), list) else 0
    if not E or E == 1 and mt != "llama4_text":
        return 0, 0
    kkey = next((k for k in ("num_experts_per_tok", "experts_per_token", "moe_top_k", "moe_topk",
                             "num_experts_per_token", "top_k") if c.has(k)), None)
    if kkey is None:
        raise c.error("num_experts_per_tok", f"is missing: {E} experts but no top-k (num_experts_per_tok)")
    return E, c.int(kkey, maximum=E)


_PLAIN_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "relu", "relu2", "gelu_10")


def decoder_mlp(c: Cfg, mt: str, p: str, h: int, i: int, E: int) -> list[Weight]:
    """The MLP of layer ``i``: gated (SwiGLU/GeGLU) or plain, dense or MoE, as the family lays it out."""
    if not E:
        per_layer = c.get("intermediate_size", None)
        if isinstance(per_layer, list):  # Gemma-3n: one width per layer
            inter = Cfg({"intermediate_size": per_layer[i] if i < len(per_layer) else None}, c.source,
                        c.prefix).int("intermediate_size")
        else:
            inter = c.int("intermediate_size", None) or 4 * h
        if mt in ("lfm2",) and c.get("block_auto_adjust_ff_dim", False) is True:  # vLLM models/lfm2.py Lfm2MLP
            inter = int(2 * inter / 3)
            mult = c.float("block_ffn_dim_multiplier", None, minimum=0.0, maximum=64.0)
            if mult is not None:
                inter = int(mult * inter)
            step = c.int("block_multiple_of", 256)
            inter = step * -(-inter // step)
        act = c.get("hidden_act", None) or c.get("activation_function", None)
        bias = c.get("mlp_bias", False) is True or (mt == "starcoder2" and c.get("use_bias", True) is True)
        # BLOOM and MPT configs carry no hidden_act: the architecture decides, as vLLM's registry does (mlp_kind)
        src = plain_mlp_file(c.get("architectures", None), mt)
        if src in ("bloom.py", "mpt.py"):
            inter = plain_mlp_width(c, src, h)
            bias = src == "bloom.py" or c.get("no_bias", True) is False  # BloomMLP always; MPTMLP: not no_bias
        if src or mt == "starcoder2" or (mt not in VERIFIED_DECODERS and act in _PLAIN_ACTS and "gemma" not in mt):
            return plain_mlp(f"{p}.mlp", h, inter, bias=bias, names=("c_fc", "c_proj"))
        return gated_mlp(f"{p}.mlp", h, inter, bias=bias)
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
    # DeepSeek-style fields on a GQA decoder (GLM-4.5/4.6/4.7 glm4_moe, dots.llm1): vLLM glm4_moe.py / dots1.py run
    # a dense MLP below first_k_dense_replace, and n_shared_experts shared experts of moe_intermediate_size beside the
    # routed ones
    if not sparse or i < c.int("first_k_dense_replace", 0, minimum=0):
        return gated_mlp(f"{p}.mlp", h, c.int("intermediate_size"))
    inter = c.int("moe_intermediate_size", None) or c.int("intermediate_size")
    w = mat(f"{p}.mlp.gate", E, h, tp="replicate", linear=False) + moe_experts(f"{p}.mlp", h, inter, E)
    if c.get("n_shared_experts", None):
        w += gated_mlp(f"{p}.mlp.shared_experts", h, inter * c.int("n_shared_experts", minimum=0))
    if c.has("shared_expert_intermediate_size"):  # Qwen2-MoE / Qwen3-Next shared expert with a sigmoid gate
        w += gated_mlp(f"{p}.mlp.shared_expert", h, c.int("shared_expert_intermediate_size"))
        w += mat(f"{p}.mlp.shared_expert_gate", 1, h, tp="replicate", linear=False)
    if c.int("shared_intermediate_size", 0, minimum=0):  # GraniteMoeShared / GraniteMoeHybrid: an ungated shared MLP
        w += gated_mlp(f"{p}.shared_mlp", h, c.int("shared_intermediate_size"))  # input_linear 2·inter×h, output_linear
    return w
