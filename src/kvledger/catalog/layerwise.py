"""Per-layer views of a config: transformers 5's ``per_layer_config`` overrides, layer-kind-specific head fields, looped
layers and Qwen4-Exp's sparse-attention indexer."""

from __future__ import annotations

from dataclasses import replace

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.layers import LayerSpec, StateLayer
from kvledger.catalog.weights import Weight, mat, norm

__all__ = ["layer_overrides", "mimo_v2_layer", "hybrid_kinds", "hybrid_layer", "loop_copies",
           "per_layer_embedding_weights", "qsa_layer",
           "qsa_indexer"]


def layer_overrides(c: Cfg, i: int) -> Cfg:
    """Layer ``i``'s view of the config: transformers 5's ``per_layer_config`` (``HeterogeneousConfigMixin``: a dict of
    field overrides keyed by layer index, e.g. Gemma-4's full layers ``{"head_dim": 512}``) laid over the shared
    fields."""
    plc = c.get("per_layer_config", None)
    if not isinstance(plc, dict):
        return c
    over = next((v for k, v in plc.items() if str(k).isdigit() and int(k) == i and isinstance(v, dict)), None)
    return Cfg({**c.raw, **over}, c.source, c.prefix) if over else c


def mimo_v2_layer(c: Cfg, kind: str, nkv: int, hd: int, notes: list[str]) -> tuple[Cfg, int, int]:
    """MiMo-V2-Flash: the sliding layers' ``swa_num_key_value_heads``/``swa_head_dim`` (else twice the KV heads, as
    transformers' MiMoV2FlashAttention builds them), and V kept at K's head size: vLLM 0.19's MiMoV2Attention pads V
    to ``head_dim`` and gives its Attention no ``head_size_v`` (models/mimo_v2_flash.py)."""
    notes.append("MiMo-V2-Flash: V is cached padded to head_dim, as vLLM 0.19 does (transformers caches it at "
                 "v_head_dim)")
    if kind == "sliding":
        kv, d = c.int("swa_num_key_value_heads", 2 * nkv), c.int("swa_head_dim", hd)
        window = c.int("sliding_window_size", None) or c.int("sliding_window")
        return Cfg({**c.raw, "v_head_dim": d, "sliding_window": window}, c.source, c.prefix), kv, d
    return Cfg({**c.raw, "v_head_dim": hd}, c.source, c.prefix), nkv, hd


def hybrid_kinds(c: Cfg) -> dict[str, str]:
    """What 'hybrid' / 'hybrid_sliding' layer types mean for this config: attention (full or sliding) plus a per-layer
    convolution state, in Inkling (``conv_kernel_size`` and ``swa_*`` fields: four short convolutions) and ZAYA
    (``cca_time0``/``cca_time1``: compressed convolutional attention); no meaning elsewhere (refused)."""
    if c.has("cca_time0") and c.has("cca_time1"):
        return {"hybrid": "full+cca", "hybrid_sliding": "sliding+cca"}
    if c.has("conv_kernel_size") and c.has("swa_num_key_value_heads"):
        return {"hybrid": "full+conv", "hybrid_sliding": "sliding+conv"}
    return {}


def hybrid_layer(c: Cfg, kind: str, nh: int, nkv: int, hd: int) -> tuple[Cfg, int, int, StateLayer]:
    """A hybrid layer's attention view and its convolution state (``kind`` "full+conv", "sliding+cca", ...).

    Inkling (transformers ``modeling_inkling.py``): sliding layers use ``swa_num_key_value_heads`` of ``swa_head_dim``
    over ``sliding_window_size``; the state is ``conv_kernel_size − 1`` columns (vLLM's short-conv convention,
    ``MambaStateShapeCalculator.short_conv_state_shape``; transformers keeps ``conv_kernel_size``) of the k and v inputs
    (KV heads × head size each) and of the attention and MLP inputs (hidden each).
    ZAYA (``modeling_zaya.py`` ZayaCCAProjection): K and V of ``num_key_value_heads`` × ``head_dim`` per token; the
    state
    is the q/k convolution's ``(cca_time0 − 1) + (cca_time1 − 1)`` columns of (heads + KV heads) × ``head_dim``
    channels and the previous token's delayed half of V (KV heads × ``head_dim`` / 2).
    """
    base, mixer = kind.split("+")
    if base == "sliding" and mixer == "conv":
        nkv, hd = c.int("swa_num_key_value_heads", nkv), c.int("swa_head_dim", hd)
        c = Cfg({**c.raw, "sliding_window": c.int("sliding_window_size", None) or c.int("sliding_window")}, c.source,
                c.prefix)
    if mixer == "cca":
        cols = c.int("cca_time0") - 1 + c.int("cca_time1") - 1
        return c, nkv, hd, StateLayer("cca_conv", (nh + nkv) * hd * cols, nkv * hd // 2)
    kern = c.int("conv_kernel_size")
    return c, nkv, hd, StateLayer("short_conv", (2 * nkv * hd + 2 * c.int("hidden_size")) * (kern - 1), 0)


def loop_copies(c: Cfg, layers: list, starts: list[int]) -> tuple[list, str | None]:
    """Cache copies of looped layers: a block of layers run several times keeps one cache per pass.

    Dory (``n_input_layers``, ``n_recurrent_layers``, ``n_recurrent_loops``; ``recurrent_kv_cache_mode`` 'per_loop':
    each later loop writes its own copy of the block's caches, 'last_loop': the loops share one) and Inkling-2-Loop
    (``loop_layer_index_start``/``_end``, ``loop_num_passes``: one cache per pass), as transformers' models do.
    ``starts[i]`` is where decoder layer ``i``'s cache entries begin in ``layers`` (a layer may hold two).
    """
    n = len(starts)
    if c.has("n_recurrent_loops") and c.get("recurrent_kv_cache_mode", "per_loop") == "per_loop":
        start, loops = c.int("n_input_layers", 0, minimum=0), c.int("n_recurrent_loops")
        end = start + c.int("n_recurrent_layers", n - start - c.int("n_output_layers", 0, minimum=0), minimum=0)
    elif c.has("loop_num_passes"):
        start, end, loops = c.int("loop_layer_index_start", 0,
                                  minimum=0), c.int("loop_layer_index_end"), c.int("loop_num_passes")
    else:
        return [], None
    if not 0 <= start <= end <= n:
        raise c.error("n_recurrent_layers" if c.has("n_recurrent_loops") else "loop_layer_index_end",
                      f"the looped layers [{start}, {end}) do not fit in {n} layers")
    extra = layers[starts[start] if start < n else len(layers):starts[end] if end < n else len(layers)] * (loops - 1)
    return (
        extra,
        f"layers {start}–{end - 1} run {loops} times, each pass with its own cache: {len(extra)} more cache layers",
    )


def per_layer_embedding_weights(c: Cfg, h: int, n: int) -> list:
    """Gemma-3n/Gemma-4 per-layer embeddings (``hidden_size_per_layer_input`` > 0): a second embedding table of
    ``vocab_size_per_layer_input`` rows × (layers × that width), its projection from the hidden state, and per layer an
    input gate, a projection back and a norm (transformers ``modeling_gemma4.py``; vLLM loads them as weights)."""
    hpl = c.int("hidden_size_per_layer_input", 0, minimum=0)
    if not hpl or not c.has("vocab_size_per_layer_input"):
        return []
    v = c.int("vocab_size_per_layer_input")
    w = [Weight("model.embed_tokens_per_layer.weight", v, n * hpl, 1, False, "shard")]
    w += mat("model.per_layer_model_projection", n * hpl, h, tp="replicate") + norm("model.per_layer_projection_norm",
                                                                                    hpl)
    for i in range(n):
        p = f"model.layers.{i}"
        w += mat(f"{p}.per_layer_input_gate", hpl, h, tp="replicate") + mat(f"{p}.per_layer_projection", h, hpl,
                                                                            tp="replicate")
        w += norm(f"{p}.post_per_layer_input_norm", h)
    return w


def qsa_layer(c: Cfg, mt: str, i: int) -> bool:
    """A Qwen4-Exp sparse-attention (QSA) layer: an indexed layer type (transformers' Qwen4ExpTextConfig reads a
    checkpoint's "full_attention" as "indexed_attention") when the config sets ``indexer_n_heads`` (vLLM 0.33
    ``models/qwen4_exp/nvidia/model.py``: without it the layer is plain Qwen3NextAttention)."""
    if not c.has("indexer_n_heads") or not c.has("layer_types"):
        return False
    t = c.list("layer_types")[i]
    return t in ("indexed_attention", "qwen_sparse_attention") or (mt.startswith("qwen4_exp") and t == "full_attention")


def qsa_indexer(c: Cfg, spec: LayerSpec, p: str, h: int, notes: list[str]) -> tuple[LayerSpec, list[Weight]]:
    """The QSA indexer of one layer: its compressed keys per token on the cache spec, and its tensors.

    vLLM 0.33 ``models/qwen4_exp/common/qsa_cache.py``: ``QSACompressedKeyCache`` keeps one ``indexer_head_dim``-wide
    key
    per ``indexer_compress_ratio`` tokens (an MLAAttentionSpec with ``tokens_per_state`` = the ratio) in the indexer's
    dtype (``attention_config.indexer_kv_dtype``, "auto" = BF16: 2 B); ``QSAKeyStateCache`` adds a ring of
    ``round_up(ratio + speculative tokens, ratio)`` raw keys per request (not counted here). Tensors
    (transformers ``Qwen4ExpTextQSAIndexer``): ``index_qk_proj`` ((indexer_n_heads + indexer_kv_heads) ×
    indexer_head_dim
    × hidden) and q/k RMSNorms of indexer_head_dim.
    """
    ihd, ratio = c.int("indexer_head_dim"), c.int("indexer_compress_ratio")
    per_tok = ihd * 2 / ratio
    notes.append(f"QSA layers: K/V plus the indexer's compressed keys, {ihd} × 2 B (BF16) per {ratio} tokens = "
                 f"{per_tok:g} B "
                 f"per token per layer (vLLM 0.33 QSACompressedKeyCache); its {ratio}-token raw-key ring per request "
                 f"is not counted")
    w = (mat(f"{p}.index_qk_proj", (c.int("indexer_n_heads") + c.int("indexer_kv_heads", 1)) * ihd, h, tp="replicate")
         + norm(f"{p}.q_layernorm", ihd) + norm(f"{p}.k_layernorm", ihd))
    return replace(spec, indexer_bytes_per_token=per_tok), w
