"""The model of a vLLM log, for doctor: ``--model`` when given (with a warning when it is not the model the log serves,
or lacks the quantization the log names); else the bundled config the log's model name answers to; else, for a
quantized checkpoint ``memory_accuracy.QUANTIZED_CHECKPOINTS`` maps (RedHatAI's w8a8, w4a16, fp8-dynamic), its base
release's bundled config with the checkpoint's quantization_config; else the bundled
config of the same name with or without a fine-tune suffix ("-Instruct", "-Chat", "-it"), which stands in for it
and is said so (a chat or instruction fine-tune is assumed to keep its base model's architecture, so the memory terms
the ledger computes are the same)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePath

from kvledger.analyses.doctor.memory_accuracy import QUANTIZED_CHECKPOINTS, quantized_model
from kvledger.catalog.models import load_model, resolve_bundled
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import KvLedgerError
from kvledger.evidence.vllm_log import VllmLog

__all__ = ["model_mismatch", "quantization_mismatch", "resolve_log_model", "stand_in_model"]

#: fine-tune suffixes whose model keeps the architecture of the name without them (the Hub's usual spellings)
FINE_TUNE_SUFFIXES = ("-Instruct", "-Chat", "-it")


def _same_model(given: str, spec: ModelSpec, named: str) -> bool | None:
    """Whether the log's model name and the --model spec are the same model (None: cannot tell, e.g. a local config)."""
    logged = resolve_bundled(named) or resolve_bundled(PurePath(named).name)
    if spec.catalog_id and logged is not None:
        return spec.catalog_id == logged.hf_id
    if PurePath(given).suffix == ".json" or given.startswith((".", "/", "~")):
        return None
    mine = _name_key(spec.catalog_id or spec.name)
    if logged is not None:
        return _same_key(mine, _name_key(logged.hf_id))
    parts = PurePath(named).parts
    if any(_same_key(mine, _name_key(p)) for p in parts[-2:] if p != parts[0] or len(parts) == 1):
        return True  # the file or folder names the model (an org such as "meta-llama" is not compared)
    # a hub id names its model; a local path (/models/x, ~/.cache/…) may name anything, so only a hub id can differ
    return None if named.startswith((".", "/", "~")) or len(parts) > 2 else False


def _same_key(a: str, b: str) -> bool:
    """Equal, or one a prefix of the other up to a separator ("qwen3-8b" and "qwen3-8b-q4_k_m.gguf")."""
    short, long = sorted((a, b), key=len)
    if long == short:
        return True
    return any(c.isdigit() for c in short) and long.startswith(short) and long[len(short)] in "-._"


_VARIANT = re.compile(r"(-(instruct|chat|hf|it|base|fp8|fp8-dynamic|awq|gptq|int4|int8|w8a8|w4a16|bnb-4bit))+$")


def _name_key(name: str) -> str:
    """A model name without org, ``Meta-`` prefix and variant suffixes (Instruct, FP8, AWQ, …): the same
    architecture."""
    base = PurePath(name.split(" (config of ")[0]).name.lower().removeprefix("meta-")
    return _VARIANT.sub("", base)


def model_mismatch(log: VllmLog, given: str, spec: ModelSpec) -> str | None:
    """The warning when ``--model`` names another model than the one the log serves (None when they agree or it cannot
    be told)."""
    st = log.startup
    named = st.model or st.served_model_name
    if not named or _same_model(given, spec, named) is not False:
        return None
    field_name = "model" if st.model else "served_model_name"
    return (f"--model {given} is not the model this log serves: the log names {named!r} (line "
            f"{st.lines.get(field_name)}). "
            f"The comparison below is the ledger for {given}, so it will not match the log's figures; drop --model to "
            f"use "
            "the log's model (when bundled) or pass its config.json")


def resolve_log_model(log: VllmLog, name: str | None) -> tuple[ModelSpec | None, str, str | None]:
    """(the model doctor plans with, where it came from, the note saying which bundled config stood in for the log's
    model or None): ``--model``; else the bundled config the log names; else ``stand_in_model``'s; else None."""
    if name:
        spec = load_model(name)
        named = log.startup.model or log.startup.served_model_name
        return spec, f"--model {name}" + (f" (the log names {named!r})" if named and model_mismatch(log, name,
            spec) else ""), None
    st = log.startup
    for field_name in ("model", "served_model_name"):
        text = getattr(st, field_name)
        if not text:
            continue
        where = f"from the log, line {st.lines.get(field_name)}: {text}"
        for candidate in dict.fromkeys((text, PurePath(text).name)):
            try:
                return load_model(candidate, allow_hub=False), where, None
            except KvLedgerError:
                continue
        if (quantized := quantized_model(text)) is not None:  # a corpus checkpoint: its base config + scheme
            return quantized, (f"{where}; the bundled {QUANTIZED_CHECKPOINTS[text][0]} config with the checkpoint's "
                               "quantization_config reconstructed from its name and model card"), None
        if (stood := stand_in_model(text)) is not None:
            spec, hf_id = stood
            note = (f"model: {text!r} (log line {st.lines.get(field_name)}) is not bundled; the bundled {hf_id} stands "
                    "in for it (the same name with or without a fine-tune suffix, assumed to share its architecture); "
                    "--model a config.json of the model served if it differs")
            return spec, f"{where}; the bundled {hf_id} stands in (same name but for a fine-tune suffix)", note
    named = st.model or st.served_model_name
    return None, (f"the log's model {named!r} is not a bundled model or a local config" if named else "the log names "
        "no model") + \
        "; pass --model (a bundled name or a config.json) for the ledger comparison", None


def stand_in_model(text: str) -> tuple[ModelSpec, str] | None:
    """The bundled config of ``text`` (a Hub id or its last part) with a fine-tune suffix (``FINE_TUNE_SUFFIXES``,
    case-insensitive) taken off, another put in its place, or one added; its spec named "<text> (config of <id>)"
    and its HF id. None when no such name is bundled."""
    for base_text in dict.fromkeys((text, PurePath(text).name)):
        low = base_text.lower()
        cut = next((s for s in FINE_TUNE_SUFFIXES if low.endswith(s.lower())), None)
        base = base_text[: len(base_text) - len(cut)] if cut else base_text
        for alt in [base] * bool(cut) + [base + s for s in FINE_TUNE_SUFFIXES if s != cut]:
            bm = resolve_bundled(alt)
            if bm is not None:
                spec = load_model(bm.hf_id, allow_hub=False)
                return replace(spec, name=f"{text} (config of {bm.hf_id})"), bm.hf_id
    return None


#: vLLM's names of "no quantization"
_NONE = ("", "none")


def quantization_mismatch(log: VllmLog, given: str | None, spec: ModelSpec | None) -> str | None:
    """The warning when the log names a weight quantization (``quantization=…`` in its engine echo or arguments) and the
    model doctor plans, ``--model``'s, is an unquantized config: the ledger then prices every weight in the model
    dtype (a fresh-user trial: ``--model meta-llama/Llama-3.1-8B`` on a w4a16 start-up, weights 14.99 against the log's
    5.38 GiB, unsaid). None otherwise, and for ``fp8``: vLLM quantizes an unquantized checkpoint's linear weights to
    FP8 on load, and doctor plans the log's ``quantization=fp8`` so (``context.py``, as ``kvledger plan -q fp8``)."""
    st = log.startup
    q = (st.quantization or "").strip()
    if spec is None or q.lower() in _NONE or spec.quant.method != "none":
        return None
    if q.lower() == "fp8":  # vLLM quantizes an unquantized checkpoint to FP8 on load; doctor plans it so (context.py)
        return None
    src = f"--model {given}" if given else spec.name
    return (f"the log names the weight quantization {q!r} (line {st.lines.get('quantization')}) but {src}'s config is "
            "unquantized: the ledger prices every weight in the model dtype, so its weights and KV memory will not "
            "match the log's; pass --model the served checkpoint's config.json (its quantization_config)")
