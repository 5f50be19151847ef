"""SGLang's own spellings of the engine flags kvledger names as vLLM does: a group field per SGLang flag, read into
its vLLM-named field under ``--engine sglang`` (``--policy sglang``) and refused under another engine with the name
that engine takes.

SGLang 0.5.23's names (``sglang.launch_server --help``, ``srt/arg_groups/fields/``): ``--tp-size`` (kvledger's
``--tp``), ``--context-length`` (``--max-model-len``), ``--max-running-requests`` (``--max-num-seqs``),
``--chunked-prefill-size`` (``--max-num-batched-tokens``), ``--page-size`` (``--block-size``). ``--mem-fraction-static``
and ``--nnodes`` are spelled alike in both tools.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SGLANG_NAMES", "SEARCH_WORDS", "SglangNames", "sglang_flag", "resolve_sglang_names"]

#: SGLang field → (SGLang's flag, the vLLM-named field it fills, that field's flag)
SGLANG_NAMES = {
    "tp_size": ("--tp-size", "tp", "--tp"),
    "context_length": ("--context-length", "max_model_len", "--max-model-len"),
    "max_running_requests": ("--max-running-requests", "max_num_seqs", "--max-num-seqs"),
    "chunked_prefill_size": ("--chunked-prefill-size", "max_num_batched_tokens", "--max-num-batched-tokens"),
    "page_size": ("--page-size", "block_size", "--block-size"),
}
_ENGINES = {"vllm": "vLLM", "trtllm": "TensorRT-LLM", "tensorrt-llm": "TensorRT-LLM", "trt-llm": "TensorRT-LLM"}


SEARCH_WORDS = ("the same axis: search writes each candidate's SGLang launch line with either engine, and with "
                "--engine sglang plans and simulates SGLang")
"""``search``'s words for its SGLang spellings: either engine takes them (its vLLM and SGLang lines name the same
axes)."""


def sglang_flag(name: str, words: str = "with --engine sglang") -> Any:
    """A group field for SGLang's spelling ``name`` (a key of ``SGLANG_NAMES``), default None, with its help: when it
    is taken in ``words`` (``SEARCH_WORDS`` for search)."""
    sg, _, vflag = SGLANG_NAMES[name]
    return field(default=None, metadata={"decls": (sg,), "help": f"SGLang's name for {vflag} ({words})."})


def resolve_sglang_names(group: Any, engine: str | None) -> None:
    """Move each SGLang-named value of ``group`` into its vLLM-named field when ``engine`` is "sglang", or "" where
    the command writes both engines' lines (``search``); None means vLLM, the default engine.

    Raises:
        InputError: an SGLang name under another engine (naming that engine's flag), or both spellings with two
            values.
    """
    from kvledger.errors import InputError

    defaults = {f.name: f.default for f in dataclasses.fields(group)}
    for name, (sg, target, vflag) in SGLANG_NAMES.items():
        value = getattr(group, name, None)
        if value is None:
            continue
        kind = str(engine or "vllm").lower()
        if engine != "" and kind != "sglang":
            words = _ENGINES.get(kind, "kvledger")  # simulate's static and contiguous policies: kvledger's own
            raise InputError(f"{sg} is SGLang's flag; {words}'s is {vflag}: pass {vflag} {value}, or --engine sglang "
                             f"to plan SGLang")
        if name == "context_length" and str(value).strip().lower() == "auto":  # vllm_auto_len's refusal, by this name
            raise InputError(f"{sg} {str(value).strip()}: auto is vLLM's auto-fit (--max-model-len auto: the longest "
                             "length its KV pool holds), which SGLang does not read; SGLang's --context-length takes "
                             "a token count: give one (e.g. 32768 or 32K), or --max-model-len auto on vLLM, the "
                             "default engine")
        given = getattr(group, target)
        if given is not None and given != defaults[target] and str(given) != str(value):
            raise InputError(f"{sg} {value} and {vflag} {given} name the same setting (SGLang's and vLLM's "
                             f"spelling): give one")
        object.__setattr__(group, target, _count(sg, value) if name in _TOKEN_COUNTS else value)
        object.__setattr__(group, name, None)


#: the SGLang names that take a token count: read here, by the name typed, before their vLLM-named field gets the count
_TOKEN_COUNTS = ("context_length", "chunked_prefill_size")


def _count(flag: str, value: Any) -> str:
    """A token count given by its SGLang name, read (``parse_tokens``: 8K = 8,192) and bounded as its vLLM-named
    setting is (``settings.BOUNDS``), so that an error names ``flag``, the one typed, not the field it fills; the
    count as digits.

    Raises:
        InputError: unreadable, not whole and positive, or out of range, naming ``flag``.
    """
    from kvledger.accounting.settings import BOUNDS
    from kvledger.ranges import Range
    from kvledger.units import parse_tokens

    n = parse_tokens(str(value), what=flag)
    lo, _, hi = BOUNDS["max_model_len" if flag == "--context-length" else "max_num_batched_tokens"]
    Range(lo, hi, unit="tokens").check(flag, n, str(value).strip())
    return str(n)


@dataclass(frozen=True, slots=True)
class SglangNames:
    """A flag group's SGLang spellings (the base of ``plan``'s ``PlanFlags`` and the shared ``EngineFlags``), read
    into the subclass's vLLM-named fields under its ``engine`` or ``policy`` once the group is built."""

    tp_size: int | None = sglang_flag("tp_size")
    context_length: str | None = sglang_flag("context_length")
    max_running_requests: int | None = sglang_flag("max_running_requests")
    chunked_prefill_size: str | None = sglang_flag("chunked_prefill_size")
    page_size: int | None = sglang_flag("page_size")

    def __post_init__(self) -> None:
        engine = next((getattr(self, a) for a in ("engine", "policy") if hasattr(self, a)), "")
        resolve_sglang_names(self, engine)
