"""Vision towers vLLM loads beside the language model (SigLIP for Gemma-3, Llama-4's ViT, CLIP-style encoders).

A multimodal checkpoint served by vLLM loads its vision encoder and projector with the language
model, and their bytes are part of the logged weight memory. The tower is a ViT read from
``vision_config`` (patch embedding, positions, ``num_hidden_layers`` pre-norm blocks of biased q/k/v/o and
fc1/fc2 with two LayerNorms) plus the family's projector into the text hidden size. Shapes follow
transformers' ``SiglipVisionModel`` and ``Llama4VisionModel``; a meta-device build of each gives the counts
the tests assert (416,866,032 for Gemma-3-27B's SigLIP, 850,960,896 for Llama-4-Scout's ViT).
"""

from __future__ import annotations

from typing import Any

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import WARNING_NOTE
from kvledger.catalog.towers_qwen import QWEN25_VL_TYPES, qwen25_vl_tower
from kvledger.catalog.weights import Weight, mat, norm, vec

__all__ = ["vision_tower"]


def _mat(path: str, rows: int, cols: int, bias: bool) -> list[Weight]:
    return mat(path, rows, cols, bias=bias, linear=False)


def _projector(c: Cfg, mt: str, h: int, inter: int, text_hidden: int) -> list[Weight]:
    """The projector from the tower's width ``h`` to the text width: Llama-4's vision adapter and linear, else
    Gemma-3's matrix and RMSNorm after SigLIP's attention-pool head where the config has one."""
    pre = "vision_tower."
    w: list[Weight] = []
    if mt == "llama4_vision_model":
        ratio = c.float("pixel_shuffle_ratio", 0.5, minimum=0.01, maximum=1.0)
        shuffled = int(h / (ratio * ratio))
        out = c.int("vision_output_dim", 4096)
        w += _mat(f"{pre}vision_adapter.mlp.fc1", c.int("projector_input_dim", out), shuffled, False)
        w += _mat(f"{pre}vision_adapter.mlp.fc2", c.int("projector_output_dim", out), c.int("projector_input_dim", out),
                  False)
        w += _mat("multi_modal_projector.linear_1", text_hidden, out, False)
    else:  # Gemma-3 projector: one matrix from the vision width to the text width and an RMSNorm
        # SigLIP attention-pool head
        if c.get("vision_use_head", True if mt == "siglip_vision_model" else False) is True:
            hp = f"{pre}head"
            w += vec(f"{hp}.probe", h) + _mat(f"{hp}.attention.in_proj", 3 * h, h,
                                              True) + _mat(f"{hp}.attention.out_proj", h, h, True)
            w += norm(f"{hp}.layernorm", h, bias=True) + _mat(f"{hp}.mlp.fc1", inter, h, True) + _mat(f"{hp}.mlp.fc2",
                h, inter, True)
        w += [Weight("multi_modal_projector.mm_input_projection_weight", h, text_hidden, 1, False, "shard")]
        w += norm("multi_modal_projector.mm_soft_emb_norm", h)
    return w


def vision_tower(raw: dict[str, Any], source: str, text_hidden: int) -> tuple[list[Weight], str | None]:
    """The vision encoder and projector weights of a multimodal config, and a note; ([], None) when there is none."""
    vc = raw.get("vision_config")
    if not isinstance(vc, dict):
        return [], None
    c = Cfg(vc, source, "vision_config.")
    mt = c.get("model_type", "") if isinstance(c.get("model_type", ""), str) else ""
    if raw.get("model_type") in QWEN25_VL_TYPES and c.has("depth") and c.has("out_hidden_size"):
        w = qwen25_vl_tower(c)
        return w, (f"vision tower (Qwen2.5-VL, {c.int('depth')} blocks of width {c.int('hidden_size')}) and merger: "
                   f"{sum(x.numel for x in w):,} parameters, loaded by vLLM with the language model")
    if not (c.has("hidden_size") and c.has("num_hidden_layers")):
        return [], (f"{WARNING_NOTE}vision tower not counted: its vision_config ({mt or 'no model_type'}) is a "
                    "layout not read here, so the weights (and the memory left for KV) leave out a tower vLLM loads "
                    "with the language model")
    h, n = c.int("hidden_size"), c.int("num_hidden_layers")
    inter = c.int("intermediate_size", 4 * h)
    p, img, ch = c.int("patch_size", 14), c.int("image_size", 224), c.int("num_channels", 3)
    llama4 = mt == "llama4_vision_model"
    patches = (img // p) ** 2
    pre = "vision_tower."
    if llama4:
        w = [Weight(f"{pre}patch_embedding.linear.weight", h, ch * p * p, 1, False, "shard")]
        w += vec(f"{pre}class_embedding", h) + [Weight(f"{pre}positional_embedding_vlm", patches + 1, h, 1, False,
                                                       "replicate")]
        w += norm(f"{pre}layernorm_pre", h, bias=True) + norm(f"{pre}layernorm_post", h, bias=True)
    else:
        w = [Weight(f"{pre}embeddings.patch_embedding.weight", h, ch * p * p, 1, False,
                    "shard")] + vec(f"{pre}embeddings.patch_embedding.bias", h)
        w += [Weight(f"{pre}embeddings.position_embedding.weight", patches, h, 1, False, "replicate")]
        w += norm(f"{pre}post_layernorm", h, bias=True)
    for i in range(n):
        lp = f"{pre}encoder.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            w += _mat(f"{lp}.self_attn.{proj}", h, h, True)
        w += _mat(f"{lp}.mlp.fc1", inter, h, True) + _mat(f"{lp}.mlp.fc2", h, inter, True)
        w += norm(f"{lp}.layer_norm1", h, bias=True) + norm(f"{lp}.layer_norm2", h, bias=True)
    w += _projector(c, mt, h, inter, text_hidden)
    total = sum(x.numel for x in w)
    exact = mt in ("siglip_vision_model", "llama4_vision_model")
    how = "" if exact else (" (a generic ViT layout: this tower type's exact tensors are not laid out here, so the "
                            "count "
                            "is approximate)")
    return (
        w,
        f"vision tower ({mt or 'ViT'}, {n} layers of width {h}) and projector: {total:,} parameters{how}, loaded by "
        f"vLLM with the language model",
    )
