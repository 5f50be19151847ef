"""Writes the catalog's table of transformers config defaults: what each config class fills in when a key is absent.

vLLM reads a model's ``config.json`` through transformers' config classes, so a key missing from the
file takes the class default (google/gemma-3-27b-it's text part has no ``vocab_size``: Gemma3TextConfig
fills 262,208) and legacy names resolve through the class's ``attribute_map`` (GPT-BigCode's ``n_embd`` is
``hidden_size``). This script reads, for every config class transformers registers, the defaults of its
``__init__`` signature (keys whose default is ``None`` are computed from other keys by the class and are left
out), its ``attribute_map`` and its sub-config types, and writes them to
``src/kvledger/catalog/data/hf_config_defaults.json`` with the transformers version. Dropout rates, token
ids, initialisation and output switches are left out: they do not size anything.

    pip install transformers   # development environment only
    python benchmarks/hf_config_defaults.py
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

OUT = Path(__file__).parent.parent / "src" / "kvledger" / "catalog" / "data" / "hf_config_defaults.json"
_SKIP = re.compile(
    r"(dropout|_pdrop$|token_id|token_index|^initializer|_range$|^output_|^return_dict|^problem_type|^use_cache|"
    r"_eps$|epsilon|^id2label|^label2id|^chunk_size_feed_forward|^transformers_version|^architectures|"
    r"^is_encoder_decoder|^torchscript|^dtype$|^torch_dtype$|^pruned_heads|^tokenizer_class|_std$|^logits_|softcap)"
)


def _plain(v):
    if isinstance(v, (bool, int, str)) or v is None:
        return True
    if isinstance(v, float):
        return v == v and abs(v) != float("inf")
    if isinstance(v, (list, tuple)):
        return len(v) <= 256 and all(_plain(x) for x in v)
    return False


def main() -> None:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    table = {}
    for mt in sorted(CONFIG_MAPPING.keys()):
        try:
            cls = CONFIG_MAPPING[mt]
        except (KeyError, ImportError, AttributeError):
            continue
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            continue
        defaults = {k: (list(p.default) if isinstance(p.default, tuple) else p.default) for k, p in params.items()
                    if k not in ("self",
                                 "kwargs") and p.default is not inspect.Parameter.empty and p.default is not None
                    and not _SKIP.search(k) and _plain(p.default)}
        subs = {k: getattr(v, "model_type", "") or "" for k, v in (getattr(cls, "sub_configs", None) or {}).items()}
        amap = dict(getattr(cls, "attribute_map", None) or {})
        table[mt] = {"defaults": defaults, "attribute_map": amap, "sub_configs": subs}
    doc = {"source": f"transformers {transformers.__version__} config classes (Apache-2.0): __init__ defaults, "
                     f"attribute_map, "
                     "sub_configs; written by benchmarks/hf_config_defaults.py",
           "model_types": table}
    OUT.write_text(json.dumps(doc, indent=0, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(table)} config classes, {OUT.stat().st_size:,} B)")


if __name__ == "__main__":
    main()
