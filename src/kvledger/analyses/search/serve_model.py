"""The model a launch command serves for the model the user gave kvledger (a bundled name, a Hub id or a config file),
with the config keys the engines must override at launch and a note where it differs from what was given.

Both engines load a checkpoint (a Hub id or a folder with config.json, tokenizer and weights), never a bare config
file; ``catalog.config_overrides`` tells a config file that is a bundled checkpoint with its context-length keys
changed (vLLM's ``--hf-overrides``, SGLang's ``--json-model-override-args``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ServeTarget", "serve_target", "serve_model", "serve_model_id"]

#: the files a checkpoint keeps its weights in (Hugging Face safetensors or PyTorch bins, sharded or not; GGUF)
_WEIGHT_GLOBS = ("*.safetensors", "*.safetensors.index.json", "*.bin", "*.bin.index.json", "*.pt", "*.gguf")


@dataclass(frozen=True)
class ServeTarget:
    """What the engine commands name: ``model`` (Hub id, folder or a ``<checkpoint of …>`` placeholder), ``note``
    when that differs from what the user gave, and ``overrides`` (config key → value) to pass at launch."""

    model: str
    note: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


def serve_model_id(model: str) -> str:
    """The id to put in a launch command: the Hub id the user gave (as published), the bundled config's Hub
    repository for a bare alias, else the name as given."""
    return serve_target(model).model


def serve_model(model: str) -> tuple[str, str | None]:
    """(the model to put in ``vllm serve`` / ``--model-path``, a note when that differs from what the user gave)."""
    t = serve_target(model)
    return t.model, t.note


def _holds_weights(folder: Path) -> bool:
    """Whether ``folder`` holds a checkpoint's weights, so an engine can load it (``_WEIGHT_GLOBS``)."""
    return any(next(folder.glob(pattern), None) is not None for pattern in _WEIGHT_GLOBS)


def serve_target(model: str) -> ServeTarget:
    """The ``ServeTarget`` of ``model``.

    A file named config.json is a checkpoint's own: its folder when that holds weights (a fine-tune keeps its base's
    config and often its ``_name_or_path``: serving those would serve the base), else a placeholder. Another config
    file: its ``_name_or_path`` when it names one, else the bundled checkpoint it equals but for context-length keys
    (those keys as overrides), else a placeholder: its Hub id cannot be known, and its folder holds no weights an
    engine could load. The ``kvledger plan`` check line keeps the file itself.
    """
    from kvledger.catalog.models import load_model, published_hub_id

    spec = load_model(model)
    if spec.catalog_id:  # the Hub id typed (an Instruct twin is another checkpoint); a bare alias: the catalog's
        return ServeTarget(published_hub_id(model) or spec.catalog_id)
    path = Path(model).expanduser()
    if not path.is_file():
        return ServeTarget(model)
    folder = str(path.parent)
    holder = f"<checkpoint of {model}>"
    if path.name == "config.json" and not _holds_weights(path.parent):  # a config alone: no folder to serve
        return ServeTarget(holder, (
            f"{model} is a config.json alone (its folder {folder} holds no weights): in the engine commands put the "
            f"checkpoint's path or Hub id in place of {holder}; the check line plans the file itself"))
    if path.name == "config.json":  # a checkpoint's own config: its folder, even where it copies a bundled config or
        # names a base model in _name_or_path (a fine-tune keeps both from its base: serving those serves the base)
        return ServeTarget(folder, f"{model} is a checkpoint's config.json: the engine commands name its folder "
                                   f"{folder}, which must also hold the tokenizer and weights; the check line plans "
                                   "the file itself")
    return _config_file(model, holder)


def _config_file(model: str, holder: str) -> ServeTarget:
    """``serve_target`` of a config file not named config.json (``_name_or_path``, a bundled base, or neither)."""
    from kvledger.catalog.config_overrides import bundled_base_of_config
    from kvledger.catalog.jsonload import load_json_file
    from kvledger.catalog.models import resolve_bundled

    raw = load_json_file(Path(model).expanduser())
    shown = raw.get("_name_or_path")
    base = bundled_base_of_config(raw)
    if isinstance(shown, str) and 0 < len(shown) <= 255:
        named = resolve_bundled(shown)
        keep = base.overrides if base and named and named.hf_id == base.hf_id else {}  # the keys it changes there
        return ServeTarget(shown, f"{model} is a config file standing in for a checkpoint: the engine commands serve "
                                  f"its _name_or_path {shown!r}{_with(keep)}; the check line plans the file itself",
                           keep)
    if base is not None:
        what = f"the bundled config of {base.hf_id}" + (" with " + ", ".join(base.overrides) + " changed"
                                                         if base.overrides else "")
        return ServeTarget(base.hf_id, f"{model} is a config file standing in for a checkpoint: it is {what}, which "
                                       f"the engine commands serve{_with(base.overrides)}; the check line plans the "
                                       "file itself", base.overrides)
    return ServeTarget(holder, (
        f"{model} is a config file standing in for a checkpoint, and its Hub id cannot be known: it names no "
        "_name_or_path and equals no bundled config outside its context-length keys (rope_scaling, "
        "max_position_embeddings, sliding window), and an engine loads a checkpoint, not a lone config file; in the "
        f"engine commands put the "
        f"checkpoint's Hub id or folder in place of {holder} (with the keys the file changes as vLLM's --hf-overrides "
        "JSON); the check line plans the file itself"))


def _with(overrides: dict[str, Any]) -> str:
    return (" with the file's " + ", ".join(overrides) + " as vLLM's --hf-overrides and SGLang's "
            "--json-model-override-args") if overrides else ""
