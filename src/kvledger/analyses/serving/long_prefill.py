"""vLLM's long-prefill flags in a simulation: ``--long-prefill-token-threshold``, ``--max-num-partial-prefills`` and
``--max-long-partial-prefills`` (``config/scheduler.py : SchedulerConfig``), as the V1 engine of each release treats
them. Read in the 0.8.0, 0.8.5, 0.9.0, 0.11.0, 0.12.0, 0.19.0, 0.26.0, 0.28.0, 0.30.0, 0.31.0 and 0.33.0 wheels:

* the threshold caps one request's chunk per step in V1's scheduler (``v1/core/sched/scheduler.py : schedule``) from
  0.8.5 (0.8.0's V1 scheduler does not read it); from 0.31.0 not in a step with one request running or waiting;
  from 0.28.0 a threshold above max_model_len is refused (before, only with concurrent partial prefills);
* ``--long-prefill-token-threshold-adaptive`` (0.31.0 on; absent from 0.30.0's ``SchedulerConfig`` and
  ``engine/arg_utils.py``, so argparse refuses it there): each step the threshold is floored at
  ``max_num_batched_tokens // (running + waiting requests)`` (``schedule``: ``max(long_prefill_token_threshold,
  input_budget // num_eligible_reqs)``, read in 0.31.0, 0.32.0 and 0.33.0 alike), and only with a nonzero
  threshold. Requests waiting in a KV connector's load (``kv_holding_waiting``) count there too; the simulator's
  waiting queue holds them with the rest;
* the two partial-prefill limits are V0's: V1 never enforces them. Any value but their default 1 makes vLLM 0.8–0.10
  fall back to the V0 engine ("Concurrent Partial Prefill is not supported by the V1 Engine", ``engine/arg_utils.py
  : _is_v1_supported_oracle``; 0.11.0's oracle too, with V0 gone) and 0.12–0.26 refuse to start
  (``_check_feature_supported``); 0.28.0 has neither flag.
  V0's rule that a threshold of 0 becomes 4% of max_model_len applies only with ``max_num_partial_prefills`` > 1,
  so it never reaches a V1 engine.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting import vllm_rules as R
from kvledger.errors import InputError

__all__ = ["long_prefill_overrides"]

V1_READS_THRESHOLD = (0, 8, 5)  # absent from 0.8.0's v1/core/scheduler.py; present in 0.8.5's
CAP_LIFTED_ALONE = (0, 31, 0)  # absent in 0.30.0, present in 0.31.0 ("there is nobody to starve")
ADAPTIVE_FROM = (0, 31, 0)  # --long-prefill-token-threshold-adaptive: not in 0.30.0's arg_utils.py, in 0.31.0's
THRESHOLD_CHECKED = (0, 28, 0)  # threshold > max_model_len refused with or without partial prefills (0.28.0)
PARTIAL_REMOVED = (0, 28, 0)  # in 0.26.0's SchedulerConfig, not in 0.28.0's (0.27 not read)
V0_GONE, V1_REFUSES_PARTIAL = (0, 11, 0), (0, 12, 0)  # 0.11.0's oracle still falls back to V0; 0.12.0 raises
_ADAPTIVE = "--long-prefill-token-threshold-adaptive"
_FLAGS = {"long_prefill_token_threshold": "--long-prefill-token-threshold",
          "long_prefill_token_threshold_adaptive": _ADAPTIVE,
          "max_num_partial_prefills": "--max-num-partial-prefills",
          "max_long_partial_prefills": "--max-long-partial-prefills"}


def long_prefill_overrides(a: Any, plan: Any) -> tuple[dict[str, Any], list[str]]:
    """EngineConfig fields (``long_prefill_token_threshold``, ``long_prefill_cap_alone``) for the flags given, and a
    note for each. ``a``: the simulation's arguments (the three fields, ``batching``); ``plan``: its memory plan.

    Raises:
        InputError: a flag the engine or release does not have or does not run as a V1 engine (module doc).
    """
    given = [flag for name, flag in _FLAGS.items() if getattr(a, name, None) is not None]
    if not given:
        return {}, []
    m = plan.memory
    names = ", ".join(given)
    if m.engine != "vllm":
        raise InputError(f"{names} {'is a vLLM flag' if len(given) == 1 else 'are vLLM flags'}; SGLang sizes its "
                         "prefill chunks with --chunked-prefill-size (kvledger's SGLang plan sets it): drop "
                         f"{'it' if len(given) == 1 else 'them'}, or simulate vLLM (another --policy)")
    ver = R.parse_version(m.engine_version)
    it = "it" if len(given) == 1 else "them"
    if R.era(ver) == "v0":
        raise InputError(f"{names}: vLLM {m.engine_version} runs the V0 engine (V1 is the default from 0.8), whose "
                         f"chunked-prefill scheduler, the one that reads {it}, is not modelled: drop {it}, or use "
                         "--engine-version 0.8.5 or later")
    if a.batching not in (None, "continuous"):
        raise InputError(f"{names}: modelled in vLLM V1's scheduler only (--batching continuous, the default), not "
                         f"with --batching {a.batching}: drop {it}, or the --batching")
    notes = _partial_notes(a, m.engine_version, ver)
    adaptive, notes = _adaptive(a, m.engine_version, ver, notes)
    thr = a.long_prefill_token_threshold
    if thr is None or thr == 0:
        return {}, notes
    if thr < 0:
        raise InputError(f"--long-prefill-token-threshold {thr}: a token count ≥ 0 (0: no cap, vLLM's default)")
    if ver < V1_READS_THRESHOLD:
        return {}, notes + [f"--long-prefill-token-threshold {thr:,} has no effect in vLLM {m.engine_version}: its V1 "
                            "scheduler does not read it (v1/core/scheduler.py of 0.8.0 has no such cap; 0.8.5's has)"]
    if thr > m.max_model_len and ver >= THRESHOLD_CHECKED:
        raise InputError(f"--long-prefill-token-threshold {thr:,} is above max_model_len {m.max_model_len:,}: vLLM "
                         f"{m.engine_version} refuses to start (config/scheduler.py verify_max_model_len); give at "
                         f"most {m.max_model_len:,}")
    alone = ver < CAP_LIFTED_ALONE
    when = ("every step, a request alone too (vLLM ≤ 0.30)" if alone else
            "in steps with more than one request running or waiting (vLLM ≥ 0.31 lifts it for a request alone)")
    floor = f", floored at max_num_batched_tokens // (running + waiting requests) ({_ADAPTIVE})" if adaptive else ""
    return ({"long_prefill_token_threshold": thr, "long_prefill_cap_alone": alone, "long_prefill_adaptive": adaptive},
            notes + [f"long_prefill_token_threshold {thr:,} tokens (--long-prefill-token-threshold): one request's "
                     f"chunk per step capped at {thr:,} tokens{floor}, {when}; vLLM {m.engine_version} "
                     "v1/core/sched/scheduler.py schedule"])


def _adaptive(a: Any, version: str, ver: tuple[int, int, int], notes: list[str]) -> tuple[bool, list[str]]:
    """(whether the adaptive floor is on, ``notes`` with a note where it does nothing) for
    ``--long-prefill-token-threshold-adaptive`` (module doc).

    Raises:
        InputError: the flag (either spelling) for a release before 0.31, whose argparse does not know it.
    """
    on = getattr(a, "long_prefill_token_threshold_adaptive", None)
    if on is None:
        return False, notes
    spelt = _ADAPTIVE if on else "--no-" + _ADAPTIVE.removeprefix("--")
    if ver < ADAPTIVE_FROM:
        raise InputError(f"{spelt}: vLLM {version} refuses it at argument parsing (\"vllm serve: error: unrecognized "
                         f"arguments: {spelt}\"): the flag came in 0.31.0 (config/scheduler.py SchedulerConfig."
                         "long_prefill_token_threshold_adaptive, absent in 0.30.0); drop it, or use --engine-version "
                         "0.31.0 or later")
    if on and not a.long_prefill_token_threshold:
        return False, notes + [f"{_ADAPTIVE} has no effect without --long-prefill-token-threshold: vLLM {version} "
                               "floors only a nonzero threshold (v1/core/sched/scheduler.py schedule)"]
    return on, notes


def _partial_notes(a: Any, version: str, ver: tuple[int, int, int]) -> list[str]:
    """A note for partial-prefill limits given at their default 1; a refusal for any other value (module doc)."""
    given = {_FLAGS[n]: v for n in ("max_num_partial_prefills", "max_long_partial_prefills")
             if (v := getattr(a, n, None)) is not None}
    if not given:
        return []
    names = " and ".join(given)
    if ver >= PARTIAL_REMOVED:
        raise InputError(f"vLLM {version} has no {names} (in SchedulerConfig up to 0.26.0, gone in 0.28.0): its "
                         "V1 scheduler never ran concurrent partial prefills; --long-prefill-token-threshold alone "
                         "caps a long prompt's chunks")
    for flag, v in given.items():
        if v < 1:
            raise InputError(f"{flag} {v}: vLLM wants an integer ≥ 1 (default 1)")
    if any(v != 1 for v in given.values()):
        said = ", ".join(f"{f} {v}" for f, v in given.items())
        what = ("refuses to start ('Concurrent Partial Prefill is not supported', engine/arg_utils.py "
                "_check_feature_supported)" if ver >= V1_REFUSES_PARTIAL else
                "asks for the V0 engine (engine/arg_utils.py _is_v1_supported_oracle), which 0.11 no longer ships; "
                "what then runs is not modelled" if ver >= V0_GONE else
                "falls back to the V0 engine ('Concurrent Partial Prefill is not supported by the V1 Engine', "
                "engine/arg_utils.py), whose chunked-prefill scheduler is not modelled")
        raise InputError(f"{said}: concurrent partial prefills are V0's; vLLM {version}'s V1 engine {what}. Leave "
                         "them at 1 and cap long prompts' chunks with --long-prefill-token-threshold")
    return [f"{names} 1 as given: vLLM's default; its V1 scheduler does not read {'them' if len(given) > 1 else 'it'} "
            f"(vLLM {version})"]
