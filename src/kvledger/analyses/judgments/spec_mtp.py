"""A target's own multi-token-prediction (MTP) module as the speculative draft (vLLM's ``method: mtp``), priced and
counted as vLLM builds it.

DeepSeek-V3/R1 ship ``num_nextn_predict_layers`` (1) MTP layers after their decoder layers. vLLM loads them as the
draft model ``DeepSeekMTP`` (``model_executor/models/deepseek_mtp.py``, read in 0.19.0 and 0.33.0): per MTP layer two
RMSNorms (``enorm``, ``hnorm``), ``eh_proj`` = ``nn.Linear(2 × hidden, hidden)`` — a plain torch Linear, so unsharded
and unquantized: the model dtype, whole on every GPU —, ``shared_head`` (an RMSNorm and a ``ParallelLMHead``, vocab ×
hidden split over TP) and ``mtp_block``, one ``DeepseekV2DecoderLayer`` at layer index ``num_hidden_layers`` (past
``first_k_dense_replace``: an MoE layer, split over TP as the target's are). Its ``embed_tokens`` is the target's
(``_maybe_share_embeddings``: "Detected MTP model. Sharing target model embedding weights", 0.19.0 and 0.33.0); its
head is the target's ``lm_head`` from 0.33.0 (``llm_base_proposer.py :: _maybe_share_lm_head`` replaces every MTP
layer's ``shared_head.head``) but its own copy in 0.19.0 (``eagle.py :: _maybe_share_lm_head`` sets ``lm_head`` only,
which DeepSeekMTP's logits do not read); releases between them were not read and are taken as 0.19.0.

Its attention layers join the engine's KV cache groups beside the target's (``load_model``: the draft's layers are
those of the forward context the target did not have), so each token holds one more MLA layer of KV per MTP layer,
and its weights load before the KV pool is sized: both come out of the pool (``SpecDecodeModel.pool_blocks``). A draft
step runs the MTP layer(s) and the head (``DeepSeekMultiTokenPredictor.forward``: layer ``spec_step_idx %
num_mtp_layers``), priced here by the roofline of that one-layer model.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.weights import Weight
from kvledger.errors import InputError

__all__ = ["MTP_NAME", "mtp_draft_model", "HEAD_SHARED_FROM", "mtp_weight_bytes_per_gpu"]

MTP_NAME = "mtp"
"""``--draft-model mtp``: the target's own MTP layers, vLLM's ``--speculative-config '{"method": "mtp"}'``."""
HEAD_SHARED_FROM = (0, 33, 0)
"""The first release read whose MTP draft shares the target's LM head (0.33.0; 0.19.0 keeps its own copy)."""


def mtp_draft_model(target: ModelSpec | None) -> ModelSpec:
    """The draft vLLM builds from ``target``'s MTP layers (module doc): ``num_nextn_predict_layers`` copies of its last
    decoder layer, each with its norms and ``eh_proj``, and the LM head; the embedding left out (the target's).

    Raises:
        InputError: the target has no MTP layers (``num_nextn_predict_layers`` 0 or absent in its config).
    """
    if target is None:
        raise InputError("--draft-model mtp drafts with the target's own MTP layers: give the target model")
    n = target.num_nextn_predict_layers
    if n < 1:
        raise InputError(f"--draft-model mtp: {target.name} has no MTP layers (its config's num_nextn_predict_layers "
                         "is absent or 0), so vLLM's mtp method has no draft; give a --draft-model or "
                         "--draft-cost-fraction")
    last, h, L = target.num_layers - 1, target.hidden_size, target.num_layers
    block = [w for w in target.weights if f".layers.{last}." in w.path]
    weights: list[Weight] = []
    for i in range(L, L + n):
        weights += [replace(w, path=re.sub(rf"\.layers\.{last}\.", f".layers.{i}.mtp_block.", w.path)) for w in block]
        weights += [Weight(f"model.layers.{i}.eh_proj.weight", h, 2 * h, linear=False, tp="replicate")]
        weights += [Weight(f"model.layers.{i}.{p}.weight", 1, h, linear=False, tp="replicate")
                    for p in ("enorm", "hnorm", "shared_head.norm")]
    head = next((w for w in target.weights if w.path == "lm_head.weight"), None)
    if head is None:  # a tied head is the embedding's matrix: the MTP head still reads vocab × hidden
        head = Weight("lm_head.weight", target.vocab_size, h, linear=False)
    return replace(target, name=f"{target.name} MTP ({n} layer{'s' if n > 1 else ''}, vLLM method mtp)",
                   num_layers=n, layers=(target.layers[-1],) * n, weights=(*weights, head), tie_word_embeddings=False,
                   notes=(), catalog_id=None, num_nextn_predict_layers=0)


def mtp_weight_bytes_per_gpu(draft: ModelSpec, tp: int, engine_version: str | None) -> float:
    """Per-GPU bytes the MTP draft adds, B: its layers as split over ``tp`` (``weight_bytes_per_gpu``, no RoPE cache:
    vLLM's ``get_rope`` hands the draft the target's), less its LM head where the release shares the target's
    (``HEAD_SHARED_FROM``; ``engine_version``: the plan's vLLM release, None: the newest read)."""
    from kvledger.accounting.vllm_rules import parse_version
    from kvledger.accounting.weightmem import weight_bytes_per_gpu

    shared = engine_version is None or parse_version(engine_version) >= HEAD_SHARED_FROM
    own = replace(draft, weights=tuple(w for w in draft.weights if not (shared and w.path == "lm_head.weight")))
    return weight_bytes_per_gpu(own, tp, include_rope_cache=False)[0]
