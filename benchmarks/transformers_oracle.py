"""An independent oracle for the config reader: every causal-LM model type transformers ships, built on the meta device.

For each ``model_type`` in transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` this script builds the
default config of that type, instantiates the causal-LM model on PyTorch's meta device (no memory, no
weights), counts its parameters, and reads the KV cache one token adds in two independent ways:

* ``cache``: runs a one-token forward pass with ``use_cache=True`` on the meta device and sums, over the
  cache layers transformers returns, the K and V tensors' head count × head size (shapes only);
* ``proj``: 0 when the self-attention modules have a ``q_proj`` and no k/v projection at all (a draft model that
  reads its target's K/V); else sums the output features of every self-attention module's ``k_proj``/``v_proj`` (or
  ``key``/``value``,
  ``k_lin``/``v_lin``; Moshi's ``k_proj.linear``) Linear, JetMoE's fused ``kv_proj``, MLA's ``kv_a_proj_with_mqa`` (the
  latent and rope key
  transformers' DeepSeek cache holds), two thirds of GPT's fused ``c_attn`` when it is three hidden-wide parts and
  DBRX's fused ``Wqkv`` less its ``d_model``-wide query part;
  other fused QKV projections are not split, so the column stays empty for them; cross-attention modules
  are left out.

Where transformers' own default config leaves a field unset that its model needs (a ``None`` it then divides or
indexes by), ``FILL`` sets that field, and the row's ``cache_note`` says so; the written config carries the filled
value, so the plan reads the same config the oracle built. Where a config class's own defaults fail its own
validation (Gemma-4's assistant), ``CONSTRUCT`` passes the fields it asks for, and the row says so. Where the forward
pass fails on meta only because every
cache layer is a state layer (a pure-Mamba default layout), the cache reading is 0 elements per token.

It writes ``benchmarks/data/transformers_oracle.csv`` (one row per model type, with the reason when a
figure could not be read) and the default config it used as ``benchmarks/data/oracle_configs/<model_type>.json``.
The project's tests read these files (torch and transformers are not project dependencies):

    pip install torch transformers   # into a development environment only
    python benchmarks/transformers_oracle.py
"""

from __future__ import annotations

import csv
import json
import signal
import sys
import warnings
from pathlib import Path

OUT = Path(__file__).parent / "data"
FIELDS = ["model_type", "config_class", "model_class", "transformers_version", "num_params",
          "kv_elements_per_token_cache",
          "kv_elements_per_token_proj", "num_cache_layers", "cache_note", "error"]


# (field, value, why) set on a default config whose model cannot be built with the field unset; none changes the
# attention layout the cache depends on except where the why says so.
FILL: dict[str, list[tuple[str, object, str]]] = {
    "hunyuan_v1_dense": [("head_dim", "hidden_size // num_attention_heads", "the model reads config.head_dim, which "
                                                                            "defaults to None")],
    "hunyuan_v1_moe": [("head_dim", "hidden_size // num_attention_heads", "the model reads config.head_dim, which "
                                                                          "defaults to None")],
    "ministral": [("head_dim", "hidden_size // num_attention_heads", "the model reads config.head_dim, which defaults "
                                                                     "to None")],
    "nemotron": [("num_key_value_heads", "num_attention_heads", "None; transformers' convention for an absent KV-head "
                                                                "count is MHA")],
    "deepseek_v2": [("num_experts_per_tok", 6, "None makes topk fail; DeepSeek-V2's published top-k")],
    "dots1": [("n_routed_experts", 128, "None; dots.llm1's published value"), ("num_experts_per_tok", 6, "None; "
        "dots.llm1's published value"),
              ("n_shared_experts", 2, "None; dots.llm1's published value")],
    "lfm2_moe": [("layer_types", "all full_attention", "None; Lfm2Config's rule when full_attn_idxs is absent: every "
                                                       "layer attention")],
    "reformer": [("is_decoder", True, "ReformerModelWithLMHead requires it")],
    "dbrx": [("attn_config.rope_theta", "rope_parameters.rope_theta", "DbrxAttention reads attn_config.rope_theta, "
                                                                      "which transformers 5 moved to rope_parameters"),
             ("attn_config.clip_qkv", 8.0, "None makes its clamp fail; DBRX's published value")],
    # Qwen4ExpTextConfig leaves QSA's indexer unset, and Qwen4ExpTextAttention builds its indexer regardless (None //
    # None);
    # the values of a released Qwen4-Exp text config as public ports quote them (MoEspresso's MLX TextModelArgs).
    "qwen4_exp": [("indexer_n_heads", 4, "None; a released Qwen4-Exp config's value"),
                  ("indexer_kv_heads", 1, "None; Qwen4-Exp QSA requires 1"),
                  ("indexer_head_dim", 128, "None; a released Qwen4-Exp config's value"),
                  ("indexer_budget", 2048, "None; a released Qwen4-Exp config's value"),
                  ("indexer_compress_ratio", 4, "None; a released Qwen4-Exp config's value")],
    "cohere_compass_text": [("rope_parameters", "one default entry per layer type", "{} ; the rotary embedding indexes "
        "it by layer type")],
}


FILL["qwen4_exp_text"] = FILL["qwen4_exp"]

# Keyword arguments for config classes whose own defaults fail their own validation: (kwargs, why).
CONSTRUCT: dict[str, tuple[dict, str]] = {
    "gemma4_assistant": ({"text_config": {"hidden_size_per_layer_input": 0, "enable_moe_block": False,
                                          "use_double_wide_mlp": False, "vocab_size_per_layer_input": 0}},
                         "Gemma4AssistantConfig.validate_architecture requires these of its text config, whose Gemma-4 "
                         "text defaults (256, None, None, 262144) fail it"),
}


def _fill(cfg, mt: str) -> str:
    """Apply FILL[mt] to the config (text part when nested); return the note for the row."""
    target = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    notes = []
    for field, value, why in FILL.get(mt, []):
        if value == "hidden_size // num_attention_heads":
            value = target.hidden_size // target.num_attention_heads
        elif value == "num_attention_heads":
            value = target.num_attention_heads
        elif value == "all full_attention":
            value = ["full_attention"] * target.num_hidden_layers
        elif value == "rope_parameters.rope_theta":
            value = target.rope_parameters["rope_theta"]
        elif value == "one default entry per layer type":
            value = {t: {"rope_type": "default", "rope_theta": 10000.0} for t in set(target.layer_types)}
        obj = target
        for part in field.split(".")[:-1]:
            obj = getattr(obj, part)
        setattr(obj, field.split(".")[-1], value)
        notes.append(f"config filled: {field}={value if not isinstance(value, list) else '[...]'} ({why})")
    return "; ".join(notes)


def _all_state_layers(model) -> bool:
    """True when every layer of the model's cache is a linear-attention (state) layer: no per-token K/V at all."""
    from transformers import DynamicCache

    layers = DynamicCache(config=model.config).layers
    return bool(layers) and all("LinearAttention" in type(layer).__name__ and "Full" not in type(layer).__name__
                                and "Sliding" not in type(layer).__name__ for layer in layers)


class _Timeout(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Timeout()


def _cache_elements(model, torch) -> tuple[int | None, int, str]:
    """K+V elements per token summed over the cache's layers after a one-token forward on the meta device."""
    ids = torch.zeros((1, 1), dtype=torch.long, device="meta")  # one token; shapes only
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    pkv = getattr(out, "past_key_values", None)
    if pkv is None:
        state = getattr(out, "state", None)
        if state is not None:  # RWKV returns its recurrent state instead of a K/V cache
            return 0, 0, f"recurrent state only ({len(state)} tensors of {tuple(state[0].shape)}): no per-token K/V"
        return None, 0, "no past_key_values returned"
    total, n, kinds = 0, 0, set()
    layers = getattr(pkv, "layers", None)
    if layers is None:
        layers = [type("L", (), {"keys": k, "values": v})() for k, v in pkv] if isinstance(pkv, (list, tuple)) else []
    for layer in layers:
        k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
        kinds.add(type(layer).__name__)
        if k is None or v is None or not hasattr(k, "shape") or k.dim() != 4:
            continue
        # [batch, kv_heads, tokens, head_dim]: one token's K and V elements
        total += k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3]
        n += 1
    return total, n, "+".join(sorted(kinds))


def _proj_elements(model, torch) -> int | None:
    total, found = 0, False
    for name, mod in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if last == "linear" and name.count(".") and name.rsplit(".", 2)[-2] in ("k_proj", "v_proj"):
            last = name.rsplit(".", 2)[-2]  # Moshi wraps each projection's Linear as <proj>.linear
        if any(x in name for x in ("encoder_attn", "cross_attn", "crossattention")):
            continue  # cross-attention keeps the encoder output's K/V, not a per-token cache of the decoder
        # k/v projections by their usual names (XLM: k_lin/v_lin), JetMoE's fused kv_proj (K and V of its KV heads), and
        # DeepSeek-style MLA's kv_a_proj_with_mqa (the latent + rope key, which transformers' cache holds: deepseek_v3)
        if last in ("k_proj", "v_proj", "key", "value", "k_lin", "v_lin", "kv_proj",
                    "kv_a_proj_with_mqa") and isinstance(mod, torch.nn.Linear):
            total += mod.out_features
            found = True
        elif last == "Wqkv" and isinstance(mod, torch.nn.Linear) and mod.out_features > mod.in_features:
            # DBRX's fused Wqkv: the query part is d_model wide, the rest K and V
            total += mod.out_features - mod.in_features
            found = True
        elif type(mod).__name__ == "XLNetRelativeAttention":  # XLNet: k and v are (d_model, n_head, d_head) Parameters
            total += sum(getattr(mod, x).shape[1] * getattr(mod, x).shape[2] for x in ("k", "v"))
            found = True
        elif last == "c_attn" and type(mod).__name__ == "Conv1D" and getattr(mod, "nf", 0) == 3 * getattr(mod, "nx",
            -1):
            # GPT-1/GPT-2's fused Conv1D of three equal hidden-wide parts: K and V are two of them
            total += 2 * mod.nf // 3
            found = True
    if not found and any(name.endswith("self_attn.q_proj") for name, _ in model.named_modules()):
        # query-only self-attention (Gemma-4's assistant): every layer reads another model's K/V, none of its own
        return 0
    return total if found else None


def main() -> int:
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    warnings.filterwarnings("ignore")
    torch.set_default_dtype(torch.bfloat16)  # as served; MoE grouped matmuls on meta require bf16 inputs
    transformers.logging.set_verbosity_error()
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    only = set(sys.argv[1:])
    for mt, cls_name in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()):
        if only and mt not in only:
            continue
        row = dict.fromkeys(FIELDS, "")
        row.update(model_type=mt, model_class=str(cls_name), transformers_version=transformers.__version__)
        try:
            cls = getattr(transformers, cls_name if isinstance(cls_name, str) else cls_name[0])
            # the model class's own config class (Llama4ForCausalLM takes Llama4TextConfig, not the composite
            # Llama4Config)
            ccls = getattr(cls, "config_class", None) or type(CONFIG_MAPPING[mt]())
            kwargs, why = CONSTRUCT.get(mt, ({}, ""))
            cfg = ccls(**kwargs)
            filled = "; ".join(x for x in (f"config built with {kwargs} ({why})" if kwargs else "", _fill(cfg,
                mt)) if x)
            row["config_class"] = type(cfg).__name__
            d = cfg.to_dict()
            d.setdefault("model_type", getattr(cfg, "model_type", mt))
            (OUT / "oracle_configs" / f"{mt}.json").write_text(json.dumps(d, indent=1, sort_keys=True,
                                                                          default=str) + "\n")
            signal.alarm(60)
            with torch.device("meta"):
                model = cls(cfg)
            model.eval()
            row["num_params"] = sum(p.numel() for p in model.parameters())
            proj = _proj_elements(model, torch)
            row["kv_elements_per_token_proj"] = "" if proj is None else proj
            try:
                kv, n, kinds = _cache_elements(model, torch)
                row["kv_elements_per_token_cache"] = "" if kv is None else kv
                row["num_cache_layers"], row["cache_note"] = n, kinds
            except _Timeout:
                raise
            # an oracle script: any failure of a third-party forward pass is recorded, not fatal
            except Exception as err:
                try:
                    state_only = _all_state_layers(model)
                # the config cannot describe its cache layers either (recorded below as the forward failure)
                except Exception:
                    state_only = False
                if state_only:
                    row["kv_elements_per_token_cache"], row["cache_note"] = (
                        0,
                        "every cache layer is a LinearAttentionLayer (state only; the forward pass fails on such a "
                        "cache)",
                    )
                else:
                    row["cache_note"] = (
                        f"forward on meta failed: {type(err).__name__}: "
                        f"{str(err).splitlines()[0][:150] if str(err) else ''}"
                    )
            if filled:
                row["cache_note"] = f"{row['cache_note']}; {filled}" if row["cache_note"] else filled
        except _Timeout:
            row["error"] = "timed out after 60 s"
        except Exception as err:  # recorded per model type, with the reason
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''}"
        finally:
            signal.alarm(0)
        print(mt, row["num_params"], row["kv_elements_per_token_cache"], row["kv_elements_per_token_proj"],
              row["error"] or row["cache_note"][:80], flush=True)
        rows.append(row)
    path = OUT / ("transformers_oracle.csv" if not only else "transformers_oracle_partial.csv")
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path} ({len(rows)} model types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
