"""The weight inventory of a model: every parameter tensor with its shape, TP rule and whether it is a routed expert.

Built per architecture family from ``config.json`` alone (module paths follow the
Hugging Face ``transformers`` modeling files, so ``quantization_config.modules_to_not_convert``
patterns can be matched against them). Counts reproduce ``transformers`` models built on the
meta device (``catalog/data/models/VERIFIED.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Weight", "mat", "vec", "norm", "gated_mlp", "plain_mlp", "std_attention", "moe_experts"]


@dataclass(frozen=True, slots=True)
class Weight:
    """One parameter tensor (or ``count`` identical ones, e.g. the experts of one layer).

    Attributes:
        path: module path, e.g. ``model.layers.3.self_attn.q_proj.weight``.
        rows: output features (1 for a vector), elements.
        cols: input features, elements.
        count: how many identical tensors (experts), ≥ 1.
        linear: True for a Linear weight matrix that weight quantization converts.
        tp: "shard" (split over TP ranks), "replicate" (whole on every rank) or "kv" (split by KV
            heads, replicated once there are fewer KV heads than ranks).
        expert: True for a routed expert's weight (only top-k of the layer's experts are active per token).
    """

    path: str
    rows: int
    cols: int
    count: int = 1
    linear: bool = True
    tp: str = "shard"
    expert: bool = False

    @property
    def numel(self) -> int:
        """Parameters in this entry, count."""
        return self.rows * self.cols * self.count


def mat(path: str, rows: int, cols: int, *, bias: bool = False, tp: str = "shard", bias_tp: str | None = None,
        count: int = 1, expert: bool = False, linear: bool = True) -> list[Weight]:
    """A Linear layer's weight (rows=out, cols=in) and optionally its bias."""
    out = [Weight(f"{path}.weight", rows, cols, count, linear, tp, expert)]
    if bias:
        out.append(Weight(f"{path}.bias", 1, rows, count, False, bias_tp or tp, expert))
    return out


def vec(path: str, n: int, *, tp: str = "replicate", count: int = 1, expert: bool = False) -> list[Weight]:
    """A parameter vector (norm weight, bias, gate bias, A_log, ...)."""
    return [Weight(path, 1, n, count, False, tp, expert)]


def norm(path: str, n: int, *, bias: bool = False) -> list[Weight]:
    """RMSNorm (weight only) or LayerNorm (weight + bias) of width ``n``."""
    return vec(f"{path}.weight", n) + (vec(f"{path}.bias", n) if bias else [])


def std_attention(p: str, h: int, nh: int, nkv: int, hd: int, *, qkv_bias: bool = False, o_bias: bool = False,
                  q_mult: int = 1, v_hd: int | None = None) -> list[Weight]:
    """q/k/v/o projections of softmax attention; ``q_mult=2`` for an output-gated query (Qwen3-Next)."""
    v_hd = v_hd or hd
    return (mat(f"{p}.q_proj", nh * hd * q_mult, h, bias=qkv_bias)
            + mat(f"{p}.k_proj", nkv * hd, h, bias=qkv_bias, tp="kv")
            + mat(f"{p}.v_proj", nkv * v_hd, h, bias=qkv_bias, tp="kv")
            + mat(f"{p}.o_proj", h, nh * v_hd, bias=o_bias, bias_tp="replicate"))


def gated_mlp(p: str, h: int, inter: int, *, bias: bool = False, names: tuple[str, str, str] = ("gate_proj", "up_proj",
    "down_proj"),
              count: int = 1, expert: bool = False) -> list[Weight]:
    """SwiGLU/GeGLU MLP: gate and up (inter × h), down (h × inter)."""
    g, u, d = names
    return (mat(f"{p}.{g}", inter, h, bias=bias, count=count, expert=expert)
            + mat(f"{p}.{u}", inter, h, bias=bias, count=count, expert=expert)
            + mat(f"{p}.{d}", h, inter, bias=bias, bias_tp="replicate", count=count, expert=expert))


def plain_mlp(p: str, h: int, inter: int, *, bias: bool = False, names: tuple[str, str] = ("up_proj",
    "down_proj")) -> list[Weight]:
    """Non-gated MLP (OPT fc1/fc2, Nemotron-H relu²): up (inter × h), down (h × inter)."""
    u, d = names
    return mat(f"{p}.{u}", inter, h, bias=bias) + mat(f"{p}.{d}", h, inter, bias=bias, bias_tp="replicate")


def moe_experts(p: str, h: int, inter: int, num_experts: int, *, names: tuple[str, str, str] = ("gate_proj", "up_proj",
    "down_proj")) -> list[Weight]:
    """``num_experts`` routed SwiGLU experts of one layer, stored as ``p.experts.*`` (Mixtral, Qwen-MoE, DeepSeek)."""
    return gated_mlp(f"{p}.experts.*", h, inter, names=names, count=num_experts, expert=True)
