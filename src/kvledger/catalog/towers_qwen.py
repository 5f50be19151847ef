"""Qwen2.5-VL's vision transformer, as vLLM builds it beside the language model (``models/qwen2_5_vl.py``).

Its ``vision_config`` names the block count ``depth`` (not ``num_hidden_layers``) and the width ``hidden_size``; the
merger maps 2 × 2 merged patches to ``out_hidden_size``, the text width. Shapes (0.19, 0.33): a bias-free Conv3d patch
embedding (in_channels × temporal_patch_size × patch_size², to the width); per block two RMSNorms, a biased fused qkv
and proj, a gated MLP (gate_up and down, biased); the merger's RMSNorm ``ln_q`` and two biased linears.
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.weights import Weight, mat, norm

__all__ = ["QWEN25_VL_TYPES", "qwen25_vl_tower"]

#: the top-level model_types whose vision_config is Qwen2.5-VL's vision transformer
QWEN25_VL_TYPES = ("qwen2_5_vl",)


def _lin(path: str, rows: int, cols: int) -> list[Weight]:
    """A biased linear of the tower (not one of the language model's matmuls)."""
    return mat(path, rows, cols, bias=True, linear=False)


def qwen25_vl_tower(c: Cfg) -> list[Weight]:
    """The Qwen2.5-VL vision transformer's weights from its ``vision_config`` (``c``)."""
    h, n, inter = c.int("hidden_size"), c.int("depth"), c.int("intermediate_size")
    out = c.int("out_hidden_size")
    p, t = c.int("patch_size", 14), c.int("temporal_patch_size", 2)
    ch = c.int("in_channels", None) or c.int("in_chans", 3)
    merged = h * c.int("spatial_merge_size", 2) ** 2
    pre = "visual."
    w = [Weight(f"{pre}patch_embed.proj.weight", h, ch * t * p * p, 1, False, "shard")]
    for i in range(n):
        bp = f"{pre}blocks.{i}"
        w += norm(f"{bp}.norm1", h) + norm(f"{bp}.norm2", h)
        w += _lin(f"{bp}.attn.qkv", 3 * h, h) + _lin(f"{bp}.attn.proj", h, h)
        w += _lin(f"{bp}.mlp.gate_up_proj", 2 * inter, h) + _lin(f"{bp}.mlp.down_proj", h, inter)
    w += norm(f"{pre}merger.ln_q", h)
    w += _lin(f"{pre}merger.mlp.0", merged, merged) + _lin(f"{pre}merger.mlp.2", out, merged)
    return w
