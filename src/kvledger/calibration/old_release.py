"""A run recorded on a vLLM release older than the rules kvledger models (0.5 onwards): how it is replayed.

The memory plan's rules were read from 0.5.0 on (``accounting/vllm_rules.py :: parse_version``); a measured run of an
older release (DistServe's OPT-13B runs on 0.2.3) is replayed under the oldest rules read, 0.5.0's, with what that
release was: the V0 engine (every release before 0.8), and no CUDA graphs before 0.2.4 (vllm-project/vllm PR #1926),
so every step eager (``accounting/host_overhead.py`` prices the launches). What differs — its memory plan
(0.2.3's ``worker/worker.py :: profile_num_available_blocks`` subtracts only torch's peak, where 0.5.0's rules also
take the non-torch memory) and its host time — is said in a WARNING, never assumed away.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.vllm_predates import GRAPHS_FROM, OLDEST_RULES
from kvledger.accounting.vllm_rules import version_tuple
from kvledger.calibration.run_evidence import SAME_STEP_S, prompt_steps

__all__ = ["OLDEST_MODELLED", "OLD_RELEASE", "older_release", "recorded_max_paddings", "padding_notes"]

OLDEST_MODELLED = OLDEST_RULES
"""The oldest vLLM release whose rules kvledger read (``vllm_rules.parse_version`` refuses any before it)."""


OLD_RELEASE = "WARNING: the run's record names vLLM"
"""How ``older_release``'s note begins (``engine_assumptions.engine_notes`` carries it into a profile's notes)."""


def older_release(version: str, args: Any) -> tuple[dict[str, Any], str] | None:
    """(settings, note) to replay a run recorded on ``version`` when it predates the rules modelled; None when it does
    not (or is no version). ``args``: the user's flags (a flag given wins over what the release implies)."""
    ver = version_tuple(version)
    if ver is None or ver >= (0, 5, 0):
        return None
    out: dict[str, Any] = {"engine_version": OLDEST_MODELLED}  # a V0 release: its defaults pick V0's scheduler
    eager = ver < GRAPHS_FROM
    if eager and getattr(args, "enforce_eager", None) is None:
        out["enforce_eager"] = True
    given = getattr(args, "batching", None)
    v0 = given in (None, "vllm_v0")
    how = (["prefill-first steps, recompute preemption"] if v0 else [])
    how += ["every step eager: CUDA graphs came in 0.2.4"] if "enforce_eager" in out else []
    engine = ("replayed as the V0 engine it ran" if v0 else
              f"replayed by --batching {given}'s scheduler, as given, not the V0 engine it ran")
    note = (f"{OLD_RELEASE} {version}, older than the rules kvledger read (from {OLDEST_MODELLED}): {engine}"
            + (f" ({', '.join(how)})" if how else "")
            + f" under {OLDEST_MODELLED}'s memory plan and defaults, which may size its KV pool otherwise than "
            f"{version} did; pass --num-gpu-blocks-override with the block count its log printed, if you have it")
    return out, note


def recorded_max_paddings(run: Any) -> int | None:
    """The ``--max-paddings`` a measured run's launch record gives (a V0 flag of vLLM 0.2.2 to 0.3: the padding a
    prompt batch may add, ``core/scheduler.py``), or None. ``calibration.api.engine_for`` replays it where no flag
    gives one, and drops it, with a note, where the run's own prompt batches padded past it (``padding_notes``)."""
    extra = run.measured.metadata.extra if run.measured is not None else {}
    value = (extra.get("engine_kwargs") or {}).get("max_paddings")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def padding_notes(run: Any, max_paddings: int) -> list[str]:
    """A note when the run's own prompt steps (``run_evidence.prompt_steps``) padded more than ``max_paddings``
    tokens: the engine that served it had no padding cap, and ``engine_for`` replays it without one.

    vLLM 0.2.2 brought the cap; before it (read in 0.1.7 and 0.2.1: ``core/scheduler.py`` admits prompts while their
    tokens' sum fits ``max_num_batched_tokens``, ``worker/worker.py :: _prepare_inputs`` concatenates them unpadded)
    a V0 prompt batch is the simulator's V0 rule with ``max_paddings`` unset. On DistServe's runs the two rules
    reproduce the records: replayed uncapped, the 2 req/s runs batch prompts past 256 tokens of padding as measured,
    and the 3 and 4 req/s runs, capped, never do (validation.md §2.2)."""
    if run.measured is None:
        return []
    over = [s.padding_tokens for s in prompt_steps(run.measured.records) if s.padding_tokens > max_paddings]
    if not over:
        return []
    return [f"{len(over)} prompt step(s) of the measured run batched prompts with more than max_paddings = "
            f"{max_paddings} tokens of padding (largest {max(over)}, read off first tokens < {SAME_STEP_S * 1e3:g} ms "
            "apart): the engine that served it had no padding cap (vLLM before 0.2.2: prompts batched while their sum "
            "fits max_num_batched_tokens, unpadded), so this run is replayed so (max_paddings unset)"]
