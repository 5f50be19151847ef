"""Per-sequence state layers inside a decoder stack, read from ``layer_types`` and the family's fields.

A layer listed as ``linear_attention`` (or ``conv``/``mamba``) keeps a fixed state per sequence instead
of K/V per token. Its size comes from the fields that name it, after vLLM's state-shape helpers
(``model_executor/layers/mamba/mamba_utils.py``: the convolution keeps ``kernel − 1`` columns):

* Gated DeltaNet (``linear_num_key_heads``/``linear_key_head_dim``/``linear_num_value_heads``/
  ``linear_value_head_dim``/``linear_conv_kernel_dim``: Qwen3.5, OLMo-hybrid): conv over q, k, v channels
  and a ``value heads × d_k × d_v`` recurrent state;
* Mamba-2 (``mamba_n_heads``/``mamba_d_head``/``mamba_d_state``/``mamba_n_groups``/``mamba_d_conv``: Granite
  4 hybrids): conv over x, B, C and a ``heads × d_head × d_state`` SSM state;
* Kimi Delta Attention (``linear_num_heads``/``linear_head_dim``): short convolutions on q, k, v and a
  ``heads × d × d`` state;
* MiniMax lightning attention: a ``heads × head_dim × head_dim`` state;
* LFM2 short convolutions (``conv_L_cache``): ``hidden × (L − 1)``;
* ``mlp`` layers keep nothing.
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.layers import StateLayer
from kvledger.catalog.weights import Weight, mat, norm, vec

__all__ = ["state_layer"]


def state_layer(c: Cfg, kind: str, mt: str, p: str, h: int, nh: int, hd: int) -> tuple[StateLayer | None, list[Weight]]:
    """The state spec and mixer weights of one non-attention layer at module path ``p``."""
    if kind == "mlp":
        return None, []
    if kind == "conv":
        L = c.int("conv_L_cache", 3)
        b = c.get("conv_bias", False) is True
        w = [Weight(f"{p}.conv.conv.weight", h, L, 1, False, "shard")] + mat(f"{p}.conv.in_proj", 3 * h, h,
                                                                             bias=b) + mat(f"{p}.conv.out_proj", h, h,
                                                                                 bias=b)
        return StateLayer("short_conv", h * (L - 1), 0), w
    la = f"{p}.linear_attn"
    if c.has("linear_num_key_heads"):
        nk, nv = c.int("linear_num_key_heads"), c.int("linear_num_value_heads")
        dk, dv, kern = c.int("linear_key_head_dim"), c.int("linear_value_head_dim"), c.int("linear_conv_kernel_dim", 4)
        conv_dim = 2 * nk * dk + nv * dv
        w = mat(f"{la}.in_proj_qkvz", 2 * nk * dk + 2 * nv * dv, h) + mat(f"{la}.in_proj_ba", 2 * nv, h)
        w += [Weight(f"{la}.conv1d.weight", conv_dim, kern, 1, False, "shard")] + vec(f"{la}.dt_bias", nv, tp="shard")
        w += vec(f"{la}.A_log", nv, tp="shard") + norm(f"{la}.norm", dv) + mat(f"{la}.out_proj", h, nv * dv)
        return StateLayer("gated_deltanet", conv_dim * (kern - 1), nv * dk * dv), w
    if c.has("mamba_n_heads") or c.has("mamba_d_state"):
        return _mamba2_mixer(c, mt, f"{p}.mamba", h)
    if c.has("linear_num_heads"):
        heads, d, kern = c.int("linear_num_heads"), c.int("linear_head_dim"), c.int("linear_conv_kernel_dim", 4)
        w = mat(f"{la}.q_proj", heads * d, h) + mat(f"{la}.k_proj", heads * d, h) + mat(f"{la}.v_proj", heads * d, h)
        w += [Weight(f"{la}.conv.weight", 3 * heads * d, kern, 1, False)] + mat(f"{la}.o_proj", h, heads * d)
        return StateLayer("kda", 3 * heads * d * (kern - 1), heads * d * d), w
    if mt.startswith("minimax"):
        w = mat(f"{la}.qkv_proj", 3 * nh * hd, h) + mat(f"{la}.output_gate", nh * hd, h) + mat(f"{la}.out_proj", h,
            nh * hd)
        return StateLayer("lightning", 0, nh * hd * hd), w
    raise c.error("layer_types", f"layer type {kind!r}: no field says how large its state is (linear_num_key_heads, "
                  "mamba_n_heads, linear_num_heads, conv_L_cache)")


def _mamba2_mixer(c: Cfg, mt: str, m: str, h: int) -> tuple[StateLayer, list[Weight]]:
    """A Bamba / Falcon-H1 / GraniteMoeHybrid Mamba-2 mixer at ``m`` (vLLM ``layers/mamba/mamba_mixer2.py``, 0.19 and
    0.33): conv1d bias when ``mamba_conv_bias`` (transformers' default true), in/out_proj biases when
    ``mamba_proj_bias``, and the gated norm's weight unless Falcon-H1's ``mamba_rms_norm`` is false (its model file
    passes ``use_rms_norm``, the others keep the mixer's default true)."""
    heads, d_head = c.int("mamba_n_heads"), c.int("mamba_d_head")
    d_state, groups, kern = c.int("mamba_d_state"), c.int("mamba_n_groups", 1), c.int("mamba_d_conv", 4)
    d_inner = heads * d_head
    conv_dim = d_inner + 2 * groups * d_state
    pb = c.get("mamba_proj_bias", False) is True
    w = mat(f"{m}.in_proj", 2 * d_inner + 2 * groups * d_state + heads, h, bias=pb)
    w += [Weight(f"{m}.conv1d.weight", conv_dim, kern, 1, False)]
    w += vec(f"{m}.conv1d.bias", conv_dim, tp="shard") if c.get("mamba_conv_bias", True) is True else []
    w += vec(f"{m}.dt_bias", heads, tp="shard") + vec(f"{m}.A_log", heads, tp="shard") + vec(f"{m}.D", heads,
                                                                                             tp="shard")
    w += norm(f"{m}.norm", d_inner) if mt != "falcon_h1" or c.get("mamba_rms_norm", False) is True else []
    w += mat(f"{m}.out_proj", h, d_inner, bias=pb)
    return StateLayer("mamba2", conv_dim * (kern - 1), heads * d_head * d_state), w
