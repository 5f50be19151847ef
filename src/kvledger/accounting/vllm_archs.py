"""Whether the engine serves the config's architecture as a decoder with a KV cache: plans refused for the ones it
does not, and a warning for a causal LM vLLM's registry does not list.

vLLM picks the model class by the config's ``architectures`` in its registry (``model_executor/models/registry.py``):
the architectures of 0.19 and 0.33, the releases that removed others (its previously-supported table) and the first
release that lists each (``added_in``, from the registries of every release 0.5.0–0.33.0) are in
``data/vllm_architectures.csv`` (sources in ``data/SOURCES.md``). Before its ``added_in`` an architecture is not
served; between 0.19 and 0.33 one in either list counts as served; after 0.33 the 0.33 list is taken. An architecture
the registry lacks can still run through vLLM's Transformers backend if it is a causal LM, from 0.7.2 (the registry's
fallback entry, ``TransformersModel``); before it, and anything else, is refused. Encoder-only models keep no KV cache,
and encoder-decoder models are not served by vLLM v1 (V0's encoder-decoder support went in 0.10.2), Whisper excepted,
whose cross-attention K/V this ledger does not model: those two kinds are refused under every engine.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from functools import cache
from importlib import resources

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.catalog.family_base import WARNING_NOTE
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import EngineRefusalError, InputError

__all__ = ["with_architecture_check"]

#: model_types of encoder-decoder transformers (transformers' ``is_encoder_decoder`` families and Mllama's
#: cross-attention text model)
_ENC_DEC = frozenset({"t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "pegasus", "pegasus_x",
                      "marian", "m2m_100", "nllb_moe", "led", "bigbird_pegasus", "prophetnet", "blenderbot",
                      "blenderbot-small", "fsmt", "whisper", "speech_to_text", "seamless_m4t", "florence2", "mllama",
                      "mllama_text_model", "vision-encoder-decoder"})
#: model_types of encoder-only (bidirectional) transformers
_ENCODER = frozenset({"bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "distilbert", "electra", "deberta",
                      "deberta-v2", "modernbert", "nomic_bert", "camembert", "albert", "mpnet", "ernie"})
_V19, _V33 = (0, 19, 0), (0, 33, 0)
_TRANSFORMERS_FALLBACK = (0, 7, 2)  # registry.py's _FALLBACK_MODEL {"TransformersModel": …} first appears in 0.7.2
# Mamba hybrids on the V1 engine: from 0.10.0 (0.9.2's EngineArgs._is_v1_supported_oracle sends a model with inner
# state to V0, "V1 mamba models are unoptimized"; 0.10.0's has no such test), and for an architecture its models/*.py
# marks SupportsV0Only in 0.10.0 from the release that drops the mark (JambaForCausalLM: 0.10.1)
_V1_STATE_FROM, _V1_STATE_FROM_ARCH = (0, 10, 0), {"JambaForCausalLM": (0, 10, 1)}


@cache
def _registry() -> dict[str, dict[str, str]]:
    """architecture → its row (runner, in_0_19, in_0_33, removed_in, added_in)."""
    text = resources.files("kvledger.accounting").joinpath("data/vllm_architectures.csv").read_text()
    return {r["architecture"]: r for r in csv.DictReader(text.splitlines())}


def _served(arch: str, ver: tuple[int, int, int]) -> bool:
    """In vLLM's registry at ``ver`` (see the module docstring for the releases between the two lists)."""
    r = _registry().get(arch)
    if r is None:
        return False
    old, new, gone = r["in_0_19"] == "1", r["in_0_33"] == "1", r["removed_in"]
    if (gone and ver >= parse_version(gone)) or (r["added_in"] and ver < parse_version(r["added_in"])):
        return False
    if ver >= _V33:
        return new
    return old or (new and ver > _V19) or bool(gone)


def _refusal(model: ModelSpec, s: PlanSettings, ver: tuple[int, int, int]) -> str | None:
    """Why no KV plan is made for this architecture (one paragraph), or None."""
    arch = "/".join(model.architectures) or model.model_type
    eng = f"{s.engine} {s.engine_version or (LATEST if s.engine == 'vllm' else '')}".strip()
    if model.model_type in _ENCODER or any(a.endswith("ForMaskedLM") for a in model.architectures):
        pooled = s.engine == "vllm" and any(_registry().get(a, {}).get("runner") == "pooling" and _served(a, ver)
                                            for a in model.architectures)
        return (f"{arch} is an encoder-only model (model_type {model.model_type!r}): its attention is bidirectional "
                "over the whole input, so it keeps no KV cache between steps and there is nothing for a KV plan to "
                "size. " + (f"{eng} serves it for pooling (embeddings, classification, scoring), not generation."
                            if pooled else "vLLM serves such models for pooling only, not generation."))
    if model.model_type in _ENC_DEC or "Whisper" in arch or "Mllama" in arch:
        if s.engine == "vllm" and any(_served(a, ver) for a in model.architectures):  # Whisper
            return (f"{arch} is an encoder-decoder model that {eng} serves, but its decoder's cross-attention K/V "
                    "(over the encoder's output, per request) is not modelled here: encoder-decoder cross-attention KV "
                    "not modelled, so no plan is given rather than a wrong one.")
        gone = next((r["removed_in"] for a in model.architectures if (r := _registry().get(a)) and r["removed_in"]),
                    None)
        why = (f"vLLM removed it in {gone} with V0's encoder-decoder support" if gone else
               "vLLM's v1 engine serves no encoder-decoder model but Whisper")
        why = why if s.engine == "vllm" else f"{eng} is planned here for decoder-only models ({why})"
        return (f"{arch} is an encoder-decoder model (model_type {model.model_type!r}): {why}, and its decoder's "
                f"cross-attention K/V is not modelled here, so {eng} gets no plan for it.")
    return None


def _unlisted(model: ModelSpec, ver: tuple[int, int, int], version: str) -> str | None:
    """vLLM only, for an architecture its registry lacks: a refusal paragraph when it is not a causal LM, a note
    starting with ``WARNING_NOTE`` when it is (the Transformers backend); None for a listed one."""
    archs = model.architectures
    if not archs or any(_served(a, ver) for a in archs):
        return None
    a = archs[0]
    row = _registry().get(a) or {}
    gone, added = row.get("removed_in"), row.get("added_in")
    missing = (f"{a} was removed from vLLM's model registry in {gone}" if gone and ver >= parse_version(gone) else
               f"{a} is not in vLLM {version}'s model registry"
               + (f" (vLLM lists it from {added}: --engine-version {added} or later serves it)" if added else ""))
    if a.endswith("ForCausalLM") and ver >= _TRANSFORMERS_FALLBACK:
        return (f"{WARNING_NOTE}{missing}: vLLM would run it through its Transformers backend, if at all; "
                "planned as a standard decoder read from its fields (layers, heads, KV heads), which that backend's "
                "own tensors and KV layout may not match")
    why = ("and vLLM has no Transformers fallback before 0.7.2" if a.endswith("ForCausalLM") else
           "and it is not a causal LM (*ForCausalLM) that vLLM's Transformers backend could serve in its place")
    return (f"{missing}, {why}: vLLM would refuse to load it ('Model architectures [...] are not supported for now'), "
            "so there is no plan to give. Plan a checkpoint whose architecture the release serves, or an engine "
            "version that has it.")


def with_architecture_check(model: ModelSpec, s: PlanSettings) -> ModelSpec:
    """The model, with a leading WARNING note where vLLM's registry lacks its causal-LM architecture.

    Raises:
        InputError: an encoder-only or encoder-decoder model (any engine), not modelled here (exit 2).
        EngineRefusalError: under vLLM, an architecture its registry lacks at the version that is not a causal LM (or
            any before 0.7.2's Transformers fallback): the release refuses it at start-up (exit 3).
    """
    ver = parse_version(s.engine_version or LATEST) if s.engine == "vllm" else _V33
    why = _refusal(model, s, ver)
    if why:
        raise InputError(why)
    if s.engine != "vllm":
        return model
    text = _unlisted(model, ver, s.engine_version or LATEST)
    if text and not text.startswith(WARNING_NOTE):
        raise EngineRefusalError(text)  # a real checkpoint this release does not load: nothing can start (exit 3)
    notes = tuple(t for t in (text, _v0_state(model, ver, s.engine_version or LATEST)) if t)
    return replace(model, notes=(*notes, *model.notes)) if notes else model


def _v0_state(model: ModelSpec, ver: tuple[int, int, int], version: str) -> str | None:
    """A WARNING note for a Mamba hybrid planned on a release that serves it on the V0 engine (see ``_V1_STATE_FROM``):
    the plan's hybrid layout (state pages in the block pool) is V1's; V0's Mamba cache is not modelled."""
    if not model.layer_counts().get("state"):
        return None
    v1 = max((_V1_STATE_FROM_ARCH.get(a, _V1_STATE_FROM) for a in model.architectures), default=_V1_STATE_FROM)
    if ver >= v1:
        return None
    return (f"{WARNING_NOTE}vLLM {version} serves this Mamba hybrid on its V0 engine (V1 takes it from "
            f"{'.'.join(map(str, v1))}), whose Mamba cache holds each of up to max_num_seqs sequences' state outside "
            "the KV blocks; that cache is not modelled here: the blocks and concurrency below are V1's hybrid layout")
