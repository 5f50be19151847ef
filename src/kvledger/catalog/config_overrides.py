"""Which bundled checkpoint a local config file is, but for keys an engine takes as overrides at launch.

A config that equals a bundled one in every key that shapes the weights, and differs only in the context-length keys
(a YaRN ``rope_scaling`` added, ``max_position_embeddings`` raised, the sliding window changed), is that checkpoint
served with those keys overridden: vLLM's ``--hf-overrides '<json>'`` (engine/arg_utils.py of 0.19 and 0.33 parse it
with ``json.loads`` into ``ModelConfig.hf_overrides``; config/model.py sets a dict value such as ``rope_scaling`` on the
loaded config, passes a flat one such as ``max_position_embeddings`` to the config's loader) and SGLang's
``--json-model-override-args '<json>'``. Any other difference (layers, heads, token ids, norms) is another checkpoint,
whose Hub id the file cannot tell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvledger.catalog.models import bundled_config, bundled_models

__all__ = ["OVERRIDE_KEYS", "BundledBase", "bundled_base_of_config", "overrides_json"]

OVERRIDE_KEYS = frozenset({"rope_scaling", "rope_parameters", "rope_theta", "max_position_embeddings",
                           "sliding_window", "use_sliding_window", "max_window_layers"})
"""Config keys that set the context the engine serves and leave every weight's shape and value as they are."""

_IGNORED = frozenset({"_name_or_path", "transformers_version"})
"""Keys a saved config carries that name no property of the checkpoint (the saving library's own)."""


@dataclass(frozen=True)
class BundledBase:
    """The bundled checkpoint ``hf_id`` a config is, with the ``overrides`` (key → the file's value; ``None`` for a key
    the file drops) that make the bundled config equal it."""

    hf_id: str
    overrides: dict[str, Any]


def _rest(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in OVERRIDE_KEYS and k not in _IGNORED}


def bundled_base_of_config(raw: object) -> BundledBase | None:
    """The bundled config ``raw`` equals outside ``OVERRIDE_KEYS``, with the fewest differing keys; None when no
    bundled config matches or two match with as few (the Hub id cannot be told apart)."""
    if not isinstance(raw, dict):
        return None
    found: list[BundledBase] = []
    for bm in bundled_models():
        bundled = bundled_config(bm)
        if not isinstance(bundled, dict) or _rest(bundled) != _rest(raw):
            continue
        found.append(BundledBase(bm.hf_id, {k: raw.get(k) for k in sorted(OVERRIDE_KEYS)
                                            if raw.get(k) != bundled.get(k)}))
    found.sort(key=lambda b: len(b.overrides))
    if not found or (len(found) > 1 and len(found[1].overrides) == len(found[0].overrides)):
        return None
    return found[0]


def overrides_json(overrides: dict[str, Any]) -> str:
    """The JSON object both engines' override flags take, keys sorted, no spaces (one shell word once quoted)."""
    return json.dumps(overrides, sort_keys=True, separators=(",", ":"))
