"""The plan's verdict line, and the concurrency line's clause on what vLLM's start-up check counts while decoding:
the short plan says each once (``--verbose`` keeps every word)."""

from __future__ import annotations

import re

from kvledger.accounting.advice_len import null_block_clause
from kvledger.accounting.advice_sglang_len import SGLANG_INPUT_RULE, SGLANG_LEN_RULE, SGLANG_OUTPUT_CAP
from kvledger.accounting.notes import SGLANG_REQUESTED, SGLANG_REQUESTED_WDDM
from kvledger.accounting.plan import Plan
from kvledger.accounting.window_capacity import manager_words, window_words

__all__ = ["verdict_text", "decode_clause", "decode_capped", "decode_folded"]


def decode_capped(p: Plan) -> bool:
    """max_num_seqs caps what runs while decoding at some context (the decode clause says so, with where)."""
    return p.layout is not None and any(r.decode_requests is not None and r.within_max_model_len
                                        and r.decode_requests > r.running_cap for r in p.concurrency)


def decode_clause(p: Plan, verbose: bool = True) -> str:
    """With sliding windows: the × is vLLM's start-up check, and what "while decoding" counts (window_capacity.py); how
    the check counts the groups and which manager frees their blocks with ``verbose`` only (the short plan's length)."""
    dec = [r for r in p.concurrency if r.decode_requests is not None and r.within_max_model_len]
    if not dec or p.layout is None:
        return ""
    over = [r for r in dec if r.decode_requests > r.running_cap]
    at = (" and ".join(f"{r.context_tokens:,} tokens (≈{r.decode_requests:,} would fit)" for r in over) if verbose
          else " and ".join(f"{r.context_tokens:,}" for r in over) + " tokens")  # short: the ≈ figures said before
    cap = f"; max_num_seqs = {over[0].running_cap:,} still caps what runs while decoding at {at}" if over else ""
    counted, freed = manager_words(p.layout)
    if not verbose:  # the ≈ figures in one list, in the rows' order, where each row has one (``decode_folded``)
        figures = "/".join(f"{r.decode_requests:,}" for r in dec)
        while_decoding = (f"≈{figures} at once while decoding ({window_words(p.layout, True)})" if decode_folded(p)
                          else f"while decoding, {window_words(p.layout, True)}")
        return f" — the requests and × are vLLM's start-up check; {while_decoding}{cap}"
    return (f" — the requests and × are vLLM's start-up check (its printed \"Maximum concurrency\": {counted}); while "
            f"decoding, {window_words(p.layout)} ({freed}){cap}")


def decode_folded(p: Plan) -> bool:
    """The short plan says the "while decoding" figures as one list after the rows (each row within max_model_len has
    one, so the list reads in the rows' order), not one in each row."""
    within = [r for r in p.concurrency if r.within_max_model_len]
    return p.layout is not None and bool(within) and all(r.decode_requests is not None for r in within)


def verdict_text(p: Plan, verbose: bool = True) -> str:
    """The verdict's line; in the short plan (``verbose`` keeps every word), what the lines above it or the fixes below
    it already say is not said again: where the concurrency line says that the × is the engine's printed start-up
    figure and what the windowed layers hold while decoding, neither (``window_capacity.at_max_words``' words); of
    the null block (``advice_len.null_block_clause``), the pool's GiB and the file that keeps it; vLLM's estimated
    maximum model length where a fix below sets --max-model-len to it; an engine source file cited in parentheses;
    SGLang's rules for a lower length (``advice_sglang_len``: its figures stay) and how its free memory is had."""
    msg = p.advice.message
    if verbose:
        return msg
    if (null := null_block_clause(p.memory)) and p.advice.verdict != "fits":
        msg = msg.replace(null, f" ({p.memory.num_gpu_blocks:,} less vLLM's null block)", 1)
    msg = re.sub(r" \([^()]*\.py\b[^()]*\)", "", msg)  # an engine file cited in parentheses: --verbose's
    for rule in (SGLANG_LEN_RULE, SGLANG_INPUT_RULE, SGLANG_OUTPUT_CAP):  # SGLang's lower length: the figures stay
        msg = msg.replace(rule, "", 1)
    for requested in (SGLANG_REQUESTED, SGLANG_REQUESTED_WDDM):  # how SGLang's free memory is had: --verbose's
        msg = msg.replace(requested, "free before the weights load", 1)
    est = p.advice.estimated_max_model_len
    if est and any(o.action == f"--max-model-len {est}" for o in p.advice.options):
        msg = msg.replace(f" Based on the available memory the estimated maximum model length is {est:,}.", "", 1)
    said = f" at once while decoding ({window_words(p.layout)})" if p.layout is not None else ""
    if not said or not decode_clause(p, verbose=False):
        return msg
    return (msg.replace(said, " at once while decoding", 1)
            .replace("at vLLM's start-up check (the engine's printed ", "at start-up (", 1))
