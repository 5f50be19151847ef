"""``--max-model-len -1`` / ``auto`` (vLLM from 0.14.0, ``kvledger.token_counts.AUTO_MAX_MODEL_LEN_FROM``): the length
vLLM serves, which the plan can work out, since it is the KV pool's.

vLLM's rule, read in 0.19.0: ``config/model.py::_get_and_verify_max_len`` takes -1 as "not given" (the length the
config derives), so the memory profile and every default that hangs on max_model_len are worked at that length; then
``v1/core/kv_cache_utils.py::get_kv_cache_configs`` calls ``_auto_fit_max_model_len``, which keeps it where one
request at it fits the memory left for the KV cache ("full model context length … fits") and otherwise lowers it to
the largest length that fits (``_estimate_max_model_len_from_groups``: a binary search over 1 … the derived length,
the same estimate as the start-up check's error), raising "Cannot auto-fit max_model_len" where not one token fits.
The pool itself is not resized: only max_model_len moves, so the capacity lines vLLM prints after it (and the plan's)
are at the fitted length. The pool the estimate is held to is the start-up check's (``advice_len.check_blocks``'s
rule: the null block kept back from 0.29.0, the profiled memory where --num-gpu-blocks-override is ignored), and the
demand is the check's (``vllm_check_demand``: in 0.14.0–0.18.0 the first KV cache group's blocks alone, so gpt-oss,
Gemma and the Mamba hybrids, whose first group is a window or a state, keep the derived length there)."""

from __future__ import annotations

from typing import Any

from kvledger.accounting.settings import engine_name
from kvledger.accounting.vllm_check_demand import check_demand_blocks, check_estimate_len, first_group_only
from kvledger.accounting.vllm_override_check import NULL_BLOCK_CHECK_FROM, check_ignores_override
from kvledger.accounting.vllm_rules import LATEST, version_tuple
from kvledger.errors import DoesNotFitError, InputError
from kvledger.token_counts import AUTO_MAX_MODEL_LEN, parse_max_model_len, parse_tokens

__all__ = ["auto_max_model_len", "engine_release", "read_max_model_len", "read_engine_tokens", "engine_token_flags",
           "search_max_model_len"]


def auto_max_model_len(s: Any, ver: tuple[int, int, int], layout: Any, blocks: tuple[int, int], inflight: int,
                       derived: int, notes: list[str]) -> int:
    """max_model_len, tokens: ``derived`` unless ``s.auto_max_model_len``, else vLLM's auto-fit of it to the pool
    (module docstring) with a note in ``notes`` saying what it chose and why. ``blocks``: (the pool's blocks, the
    blocks the profiled memory holds); ``inflight``: the sliding-window in-flight tokens of the layout's demand.

    Raises:
        DoesNotFitError: not one token fits (vLLM's "Cannot auto-fit max_model_len" ValueError; exit 3).
    """
    if not s.auto_max_model_len or not layout.groups:  # vLLM: an attention-free model keeps the derived length
        return derived
    n, profiled = blocks
    pool = profiled if s.num_gpu_blocks_override and check_ignores_override(ver) else n
    check = pool - 1 if ver >= NULL_BLOCK_CHECK_FROM else pool
    fit = check_estimate_len(layout, check, inflight, derived, ver) if check > 0 else 0
    release = ".".join(map(str, ver))
    if fit <= 0:
        raise DoesNotFitError(f"--max-model-len auto: vLLM {release} refuses to start (\"Cannot auto-fit "
                              "max_model_len: not enough GPU memory available to serve even a single token\"): the "
                              f"KV pool holds {max(check, 0):,} blocks, fewer than one token needs; raise "
                              "--gpu-memory-utilization or use more GPUs")
    need = check_demand_blocks(layout, derived, inflight, ver)
    one = _first_group_clause(layout, derived, inflight, ver)
    if fit >= derived:
        never = _null_block_clause(layout.blocks_per_request(derived, inflight), n)
        notes.append(f"max_model_len auto (-1): the model's {derived:,} tokens kept, as vLLM {release} keeps them "
                     f"where one request at that length fits the KV pool: it takes {need:,} of the {check:,} blocks "
                     f"the start-up check counts (kv_cache_utils._auto_fit_max_model_len){one}{never}")
        return derived
    took = check_demand_blocks(layout, fit, inflight, ver)
    notes.append(f"max_model_len auto (-1): {fit:,} tokens, lowered from the model's {derived:,} as vLLM {release} "
                 f"lowers it: one request at {derived:,} takes {need:,} blocks, more than the {check:,} the start-up "
                 f"check counts, and {fit:,} is the longest whose request fits ({took:,} blocks;"
                 " kv_cache_utils._auto_fit_max_model_len, the binary search of "
                 "_estimate_max_model_len_from_groups); the memory profile and the defaults stay at the derived length"
                 f"{one}{_null_block_clause(layout.blocks_per_request(fit, inflight), n)}")
    return fit


def _null_block_clause(took: int, pool: int) -> str:
    """Where the chosen length's request takes more blocks than one request can get — the ``pool``'s less its null
    block, which ``block_pool.py`` hands to none; the fit counts it before 0.29 (from 0.29 it fits to pool − 1, so
    never): "; but …, never scheduled"; "" otherwise."""
    if took <= pool - 1:
        return ""
    return (f"; but one request that long takes {took:,} blocks, more than the {pool - 1:,} a request can get (the "
            f"{pool:,}-block pool less its null block, which no request gets; the fit counts it before 0.29): it is "
            "never scheduled — the verdict gives the --max-model-len that runs")


def _first_group_clause(layout: Any, length: int, inflight: int, ver: tuple[int, int, int]) -> str:
    """In vLLM 0.14–0.18 with several KV cache groups: "; those are the first group's alone …, a request takes R",
    "" otherwise (``vllm_check_demand``)."""
    if not first_group_only(ver, layout):
        return ""
    return (f"; those blocks are the first of its {len(layout.groups)} KV cache groups' alone "
            "(kv_cache_utils._max_memory_usage_bytes_from_groups in 0.14–0.18; 0.19 sums every group): one "
            f"{length:,}-token request takes {layout.blocks_per_request(length, inflight):,} blocks of the pool")


def engine_release(engine: str | None, engine_version: str | None) -> tuple[int, int, int] | None:
    """The vLLM release that reads the engine's token flags (``--max-model-len``, ``--max-num-batched-tokens``): the one
    given, else the newest modelled (the release the plan assumes, ``vllm_rules.LATEST``); None for another engine
    (kvledger's own vocabulary, every suffix) or a version that reads as none (refused where the plan reads it)."""
    if engine_name(engine or "vllm") != "vllm":
        return None
    return version_tuple(engine_version or LATEST)


def read_max_model_len(text: str | None, engine: str | None, engine_version: str | None) -> tuple[int | None, bool]:
    """(``--max-model-len`` in tokens, None where not given or auto; whether it is vLLM's -1/auto), as the release
    (``engine_release``) reads it: ``token_counts.parse_max_model_len`` for vLLM, ``parse_tokens`` for the others."""
    if not text:
        return None, False
    rel = engine_release(engine, engine_version)
    if rel is None:
        word = str(text).strip()  # a count may come as an int (the Python API, a run record)
        if word.lower() == "auto":  # vLLM's auto-fit word (config/model.py), which no other engine reads
            raise InputError(f"--max-model-len {word}: auto (-1) is vLLM's auto-fit, the longest length its KV pool "
                             f"holds; {engine} reads a token count: give one (e.g. 32768 or 32K), or --engine vllm")
        return parse_tokens(text, what="--max-model-len"), False
    n = parse_max_model_len(text, what="--max-model-len", vllm_version=rel)
    return (None, True) if n == AUTO_MAX_MODEL_LEN else (n, False)


def read_engine_tokens(text: str | None, what: str, engine: str | None, engine_version: str | None) -> int | None:
    """An engine's token count other than --max-model-len (``--max-num-batched-tokens``) as its release reads it."""
    return parse_tokens(text, what=what, vllm_version=engine_release(engine, engine_version)) if text else None


def engine_token_flags(max_model_len: str | None, max_num_batched_tokens: str | None, engine: str | None,
                       engine_version: str | None) -> tuple[int | None, bool | None, int | None]:
    """(max_model_len or None, True where it is auto else None: the settings leave the key out, max_num_batched_tokens
    or None) as the engine's release reads them (``read_max_model_len``, ``read_engine_tokens``)."""
    mml, auto = read_max_model_len(max_model_len, engine, engine_version)
    return mml, auto or None, read_engine_tokens(max_num_batched_tokens, "--max-num-batched-tokens", engine,
                                                 engine_version)


def search_max_model_len(text: str | None, engine_version: str | None, engine: str = "vllm") -> int | None:
    """``search``'s --max-model-len as vLLM ``engine_version`` reads it (``read_max_model_len``); -1/auto refused: each
    candidate is planned and its workload checked at one length, and auto's differs by GPU and TP.

    Raises:
        InputError: as ``read_max_model_len``; auto on a release that reads it.
    """
    n, auto = read_max_model_len(text, engine, engine_version)  # engine: search --engine's (sglang's own reader)
    if auto:
        raise InputError(f"--max-model-len {str(text).strip()}: search checks every candidate's workload against one "
                         "length, and vLLM's auto-fit gives each GPU and TP its own; give a length (`kvledger plan "
                         "--max-model-len auto` says the one vLLM fits for a candidate)")
    return n
