"""ModelSpec: a model as the ledger needs it, parsed from a real ``config.json``.

``parse_config`` reads the config (nested ``text_config`` included), dispatches on
``model_type`` to an architecture family, and returns per-layer KV specs, the weight
inventory, MoE counts and the weight quantization. Anything it cannot interpret raises a
ConfigError naming the field — it never guesses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.cross_attention import refuse_cross_attention
from kvledger.catalog.families import build_family, family_of
from kvledger.catalog.hfread import read_text_config
from kvledger.catalog.layers import FullAttention, LayerSpec, MLAAttention, StateLayer
from kvledger.catalog.max_len import config_max_len, sglang_context_len, trtllm_max_seq_len
from kvledger.catalog.mlp_kind import plain_mlp_file, plain_mlp_width
from kvledger.catalog.quant import QuantScheme, parse_quant
from kvledger.catalog.weights import Weight
from kvledger.errors import ConfigError
from kvledger.jsonable import to_jsonable

__all__ = ["ModelSpec", "parse_config", "DTYPE_BYTES"]

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


@dataclass(frozen=True)
class ModelSpec:
    """A model's architecture facts, all derived from its config.

    Attributes:
        name: display name (HF id when known).
        source: where the config came from (bundled file, local path or hub id).
        model_type, architectures: as in the config.
        hidden_size, num_layers, num_attention_heads, num_kv_heads, head_dim, vocab_size: as parsed
            (num_kv_heads/head_dim of the softmax-attention layers; MLA models report their latent instead).
        dtype: weight/activation dtype name ("bfloat16", ...); dtype_bytes its size, B.
        layers: one KV spec per decoder layer (None: a layer that keeps no cache, e.g. a Nemotron-H MLP layer).
        weights: every parameter tensor (see catalog/weights.py).
        num_experts, experts_per_token: routed experts per MoE layer and top-k (0 for dense).
        quant: weight quantization scheme.
        tie_word_embeddings: lm_head shares the embedding matrix.
        max_position_embeddings: the config's value; derived_max_model_len: what vLLM up to 0.26 derives (a YaRN
            length from original_max_position_embeddings × factor; callers take their engine's and version's through
            ``accounting/max_model_len.py : engine_config_len``);
            yarn_as_scaled_max_model_len: what vLLM 0.33 derives (no YaRN factor; ``catalog/max_len.py``);
            sglang_context_len: what SGLang derives, (0.4.0–0.5.9, 0.5.10–0.5.23) (``max_len.sglang_context_len``);
            max_model_len_by_engine: the three rules side by side, keyed by engine and the releases that apply each.
        rope_cache_bytes: vLLM's rotary cos/sin buffer, B (counted in its "weights" memory).
        notes: remarks the ledger shows.
        catalog_id: the bundled config's HF id when loaded from the catalog, else None.
        mamba_chunk_tokens: vLLM's ``ModelConfig.get_mamba_chunk_size`` (``mamba_chunk_size``, else ``chunk_size``,
            else 2048), tokens; used only by Mamba models' prefix-caching block alignment.
        ssm_dtype_hint: the recurrent-state dtype the config.json itself names (``mamba_ssm_cache_dtype``, Nemotron-H;
            ``mamba_ssm_dtype``, Qwen3.5), else None; the engine decides whether it reads it (vllm_ssm_dtype).
    """

    __json__ = ("name", "source", "model_type", "architectures", "hidden_size", "num_layers", "num_attention_heads",
                "num_kv_heads", "head_dim", "vocab_size", "dtype", "num_params", "num_active_params", "num_experts",
                "experts_per_token", ("quantization", "quant.description"), "layer_counts", "max_position_embeddings",
                "derived_max_model_len", "max_model_len_by_engine", "notes")

    name: str
    source: str
    model_type: str
    architectures: tuple[str, ...]
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    dtype: str
    dtype_bytes: int
    layers: tuple[LayerSpec | None, ...]
    weights: tuple[Weight, ...]
    num_experts: int
    experts_per_token: int
    quant: QuantScheme
    tie_word_embeddings: bool
    max_position_embeddings: int
    derived_max_model_len: int
    rope_cache_bytes: int
    intermediate_size: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    catalog_id: str | None = None
    mamba_chunk_tokens: int = 2048
    ssm_dtype_hint: str | None = None
    yarn_as_scaled_max_model_len: int | None = None
    sglang_context_len: tuple[int, int] | None = None
    num_nextn_predict_layers: int = 0  # multi-token-prediction layers after the decoder (DeepSeek-V3: 1), not planned
    trtllm_max_seq_len: tuple[int, int] | None = None
    """(TensorRT-LLM's PyTorch backend, trtllm-build) default max_seq_len, tokens (``catalog/max_len.py``)."""

    @property
    def max_model_len_by_engine(self) -> dict[str, int]:
        """The default max_model_len each engine's rule derives from this config, tokens, keyed by the releases."""
        later = self.yarn_as_scaled_max_model_len or self.derived_max_model_len
        sg = self.sglang_context_len or (self.derived_max_model_len,) * 2
        return {"vllm up to 0.26": self.derived_max_model_len, "vllm 0.33": later, "sglang 0.4.0-0.5.9": sg[0],
                "sglang 0.5.10-0.5.23": sg[1]}

    @property
    def num_params(self) -> int:
        """Total parameters, count (every tensor in the inventory)."""
        return sum(w.numel for w in self.weights)

    @property
    def num_active_params(self) -> int:
        """Parameters used per token, count: routed experts scaled by top-k / experts; embeddings included."""
        if not self.num_experts:
            return self.num_params
        frac = self.experts_per_token / self.num_experts
        return sum(round(w.numel * frac) if w.expert else w.numel for w in self.weights)

    @property
    def num_embedding_params(self) -> int:
        """Input-embedding parameters, count (excluded by some publishers' active counts, e.g. gpt-oss)."""
        return sum(w.numel for w in self.weights if "embed" in w.path.split(".")[-2])

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def layer_counts(self) -> Counter:
        """Layers per KV kind ("full", "sliding_window", "chunked_local", "mla", "state", "none")."""
        return Counter("none" if layer is None else layer.kind for layer in self.layers)

    def weight_bytes(self) -> float:
        """Weight bytes of the whole model as stored (quantization and its scales included), B."""
        return sum(self.quant.bytes_of(w, self.dtype_bytes) for w in self.weights)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _dtype(c: Cfg, notes: list[str]) -> tuple[str, int]:
    name = c.get("torch_dtype", None) or c.get("dtype", None)
    if name is None:
        notes.append("config has no torch_dtype; assuming bfloat16 as vLLM does for float32/absent dtypes")
        return "bfloat16", 2
    if not isinstance(name, str) or name.removeprefix("torch.") not in DTYPE_BYTES:
        raise c.error("torch_dtype", f"unsupported dtype {name!r} (bfloat16, float16, float32)")
    name = name.removeprefix("torch.")
    if DTYPE_BYTES[name] == 4:
        notes.append("float32 checkpoint: vLLM's dtype 'auto' serves it in bfloat16; sized as bfloat16")
        return "bfloat16", 2
    return ("float16" if name == "half" else name), 2


def _rope_cache_bytes(c: Cfg, mt: str, spec_layers: list, hd: int, derived: int, dtype_bytes: int) -> int:
    """vLLM rotary cos/sin cache: positions × rotary_dim × dtype bytes
    (``rotary_embedding.py::_compute_cos_sin_cache``).

    MLA models rotate ``qk_rope_head_dim`` dims over ``original_max_position_embeddings × factor`` positions
    (``DeepseekScalingRotaryEmbedding``). Its cache stays float32 only when FlashInfer's rope kernel is used, which
    needs the ``rotary_embedding`` custom op enabled (``use_flashinfer = self.enabled() and ...``, 0.15–0.33); vLLM's
    default compiled mode runs with ``custom_ops=['none']``, so ``rotary_embedding/base.py`` casts it to the model
    dtype (DeepSeek-V2-Lite: 163,840 × 64 × 2 B = 20 MiB; ``--enforce-eager`` would keep 40 MiB, not modelled).
    """
    if mt == "opt":  # learned absolute positions, no rotary buffer
        return 0
    if mt in ("gpt_bigcode", "gpt2", "bloom", "mpt"):  # learned or ALiBi positions, no rotary buffer
        return 0
    if any(isinstance(layer, MLAAttention) for layer in spec_layers):
        rot = c.int("qk_rope_head_dim")
    else:
        rot = int(hd * c.float("partial_rotary_factor", 1.0, minimum=0.0, maximum=1.0))
    return derived * rot * dtype_bytes


def _draft_only(c: Any, raw: dict, fam: Any, notes: list[str]) -> None:
    """A config none of whose layers keeps a KV cache or a state: a draft reading its target's K/V (its projections
    added to ``fam.weights``, a note), else a ConfigError."""
    n_shared = c.int("num_kv_shared_layers", 0, minimum=0) if c.has("num_kv_shared_layers") else 0
    if not fam.layers or n_shared != len(fam.layers):
        key = "num_kv_shared_layers" if c.has("num_kv_shared_layers") else "layer_types"
        raise c.error(key, "leaves no layer that keeps a KV cache or a state of its own: nothing to plan")
    bb = raw.get("backbone_hidden_size")
    if isinstance(bb, int) and 0 < bb <= 1 << 20:  # the assistant's projections from and to its target's width
        h = c.int("hidden_size")
        fam.weights += [Weight("pre_projection.weight", h, 2 * bb), Weight("post_projection.weight", bb, h)]
    notes.append(f"KV per token 0 B (a draft model): all {n_shared} layers read the target model's K/V "
                 f"(num_kv_shared_layers = "
                 "num_hidden_layers) and keep no cache of their own; vLLM serves it only "
                 "as a speculative draft, wiring each layer to the target's last cache layer of the same type "
                 "(v1/spec_decode/gemma4.py _setup_gemma4_kv_sharing): plan the target model for the KV memory")


def _mlp_width(c: Cfg, archs: list, mt: str, hidden: int) -> int:
    """The dense MLP's width: the config's (the widest of a per-layer list), or what a plain MLP's vLLM file builds
    when the config leaves it absent, or always for MPT (``expansion_ratio``; ``mlp_kind``); 0 when unknown."""
    inter_raw = c.get("intermediate_size", None)
    inter = (max((x for x in inter_raw if isinstance(x, int)), default=0) if isinstance(inter_raw, list)
             else c.int("intermediate_size", None) or c.int("ffn_dim", None) or 0)
    plain = plain_mlp_file(archs, mt)
    return plain_mlp_width(c, plain, hidden) if plain and (not inter or plain == "mpt.py") else inter


def parse_config(raw: Any, *, source: str, name: str | None = None, catalog_id: str | None = None) -> ModelSpec:
    """Parse a ``config.json`` dict into a ModelSpec.

    Raises:
        ConfigError: not a JSON object, unsupported ``model_type``, or a missing/invalid field (named).
    """
    if not isinstance(raw, dict):
        raise ConfigError(source, f"expected a JSON object at the top level, got {type(raw).__name__}")
    refuse_cross_attention(raw, source)
    c, notes = read_text_config(raw, source)
    mt = c.get("model_type", None)
    if mt is None:
        raise c.error("model_type", "is missing; cannot tell the architecture")
    if not isinstance(mt, str) or not 0 < len(mt) <= 128:
        raise c.error("model_type", f"must be a name of 1 to 128 characters, got {mt!r:.80}")
    if family_of(c, mt) == "decoder" and not c.has("num_attention_heads"):
        archs = raw.get("architectures")
        raise c.error("num_attention_heads", f"is missing: model_type {mt!r} (architectures: {archs!s:.120}) has no "
                                             f"standard "
                      "decoder fields (hidden_size, num_hidden_layers, num_attention_heads) and no family reader here")
    archs = raw.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) and len(a) <= 255 for a in archs) or len(archs) > 64:
        raise ConfigError(source, "must be a list of class names (strings of at most 255 characters)",
                          field="architectures")
    shown = raw.get("_name_or_path")
    display = name or (shown if isinstance(shown, str) and 0 < len(shown) <= 255 else source)
    fam = build_family(c, mt)
    notes += fam.notes
    if not any(layer is not None for layer in fam.layers):
        _draft_only(c, raw, fam, notes)
    hidden = fam.hidden_size or c.int("hidden_size")
    tower, tower_note = [], None
    if c.prefix or isinstance(raw.get("vision_config"), dict):  # multimodal; its towers are imported only then
        from kvledger.catalog.towers import vision_tower

        tower, tower_note = vision_tower(raw, source, hidden)
    if tower_note:
        notes.append(tower_note)
    dtype, dbytes = _dtype(c, notes)
    quant = parse_quant(c)
    mpe, derived, as_scaled = config_max_len(c, notes)
    attn = next((layer for layer in fam.layers if isinstance(layer, FullAttention)), None)
    mla = next((layer for layer in fam.layers if isinstance(layer, MLAAttention)), None)
    nh = c.int("num_attention_heads", 0, minimum=0)
    nkv = attn.num_kv_heads if attn else (1 if mla else 0)
    hd = attn.head_dim if attn else (mla.kv_lora_rank + mla.qk_rope_head_dim if mla else 0)
    tied = not any(w.path == "lm_head.weight" for w in fam.weights)
    inter = _mlp_width(c, archs, mt, hidden)
    return ModelSpec(
        name=display, source=source, model_type=mt, architectures=tuple(archs), hidden_size=hidden,
        num_layers=len(fam.layers), num_attention_heads=nh, num_kv_heads=nkv, head_dim=hd,
        vocab_size=c.int("vocab_size"), dtype=dtype, dtype_bytes=dbytes, layers=tuple(fam.layers),
        weights=tuple(fam.weights) + tuple(tower), num_experts=fam.num_experts, experts_per_token=fam.experts_per_token,
        quant=quant, tie_word_embeddings=tied, max_position_embeddings=mpe, derived_max_model_len=derived,
        rope_cache_bytes=_rope_cache_bytes(c, mt, fam.layers, hd, derived, dbytes), intermediate_size=inter,
        notes=tuple(notes), catalog_id=catalog_id,
        mamba_chunk_tokens=c.int("mamba_chunk_size", None) or c.int("chunk_size", None) or 2048,
        ssm_dtype_hint=_ssm_dtype_hint(raw, c), yarn_as_scaled_max_model_len=as_scaled,
        sglang_context_len=sglang_context_len(c), num_nextn_predict_layers=_mtp_layers(c),
        trtllm_max_seq_len=trtllm_max_seq_len(c))


def _mtp_layers(c: Cfg) -> int:
    """``num_nextn_predict_layers``: the MTP layers after the decoder (DeepSeek-V3: 1), 0 when absent or null."""
    return c.int("num_nextn_predict_layers", 0, minimum=0) or 0


def _ssm_dtype_hint(raw: dict, c: Cfg) -> str | None:
    """The state dtype named in the file itself (not a transformers default), checked against the names vLLM takes."""
    own = raw.get("text_config") if c.prefix and isinstance(raw.get("text_config"), dict) else raw
    key = next((k for k in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype") if own.get(k) is not None), None)
    if key is None or own[key] == "auto":
        return None
    if own[key] not in ("float32", "bfloat16", "float16"):
        raise c.error(key, f"must be auto, float32, bfloat16 or float16, got {own[key]!r:.40}")
    return own[key]


def state_layers(spec: ModelSpec) -> list[StateLayer]:
    """The model's linear-attention / Mamba layers."""
    return [layer for layer in spec.layers if isinstance(layer, StateLayer)]

