"""An independent oracle for the config reader: every causal-LM model type transformers ships, built on the meta device.

For each ``model_type`` in transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` this script builds the
default config of that type, instantiates the causal-LM model on PyTorch's meta device (no memory, no
weights), counts its parameters, and reads the KV cache one token adds in two independent ways:

* ``cache``: runs a one-token forward pass with ``use_cache=True`` on the meta device and sums, over the
  cache layers transformers returns, the K and V tensors' head count × head size (shapes only);
* ``proj``: sums the output features of every self-attention module's ``k_proj``/``v_proj`` (or ``key``/``value``)
  Linear (fused QKV projections are not split, so the column stays empty for them; cross-attention modules
  are left out).

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
FIELDS = ["model_type", "config_class", "model_class", "transformers_version", "num_params", "kv_elements_per_token_cache",
          "kv_elements_per_token_proj", "num_cache_layers", "cache_note", "error"]


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
        if any(x in name for x in ("encoder_attn", "cross_attn", "crossattention")):
            continue  # cross-attention keeps the encoder output's K/V, not a per-token cache of the decoder
        if last in ("k_proj", "v_proj", "key", "value") and isinstance(mod, torch.nn.Linear):
            total += mod.out_features
            found = True
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
            # the model class's own config class (Llama4ForCausalLM takes Llama4TextConfig, not the composite Llama4Config)
            ccls = getattr(cls, "config_class", None) or type(CONFIG_MAPPING[mt]())
            cfg = ccls()
            row["config_class"] = type(cfg).__name__
            d = cfg.to_dict()
            d.setdefault("model_type", getattr(cfg, "model_type", mt))
            (OUT / "oracle_configs" / f"{mt}.json").write_text(json.dumps(d, indent=1, sort_keys=True, default=str) + "\n")
            signal.alarm(60)
            with torch.device("meta"):
                model = cls(cfg)
            model.eval()
            row["num_params"] = sum(p.numel() for p in model.parameters())
            row["kv_elements_per_token_proj"] = _proj_elements(model, torch) or ""
            try:
                kv, n, kinds = _cache_elements(model, torch)
                row["kv_elements_per_token_cache"] = "" if kv is None else kv
                row["num_cache_layers"], row["cache_note"] = n, kinds
            except _Timeout:
                raise
            except Exception as err:  # an oracle script: any failure of a third-party forward pass is recorded, not fatal
                row["cache_note"] = f"forward on meta failed: {type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''}"
        except _Timeout:
            row["error"] = "timed out after 60 s"
        except Exception as err:  # recorded per model type, with the reason
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''}"
        finally:
            signal.alarm(0)
        print(mt, row["num_params"], row["kv_elements_per_token_cache"], row["kv_elements_per_token_proj"], row["error"] or row["cache_note"][:80], flush=True)
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
