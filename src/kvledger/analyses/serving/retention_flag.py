"""vLLM's ``--prefix-cache-retention-interval`` in a simulation, as each release takes it.

* The flag came in 0.29.0 (``config/cache.py : CacheConfig.prefix_cache_retention_interval``, default 0,
  ``engine/arg_utils.py`` adds ``--prefix-cache-retention-interval``; read in 0.29.0 and 0.33.0). Before, argparse
  refuses it; 0.23–0.28 read ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` from the environment instead (``envs.py``,
  unset: None, dense, the default simulated; read in 0.23–0.28, absent in 0.22). There the flag stands for that variable
  set to N > 0 (``swa_retention.ENV_BY_RELEASE``: 0.23–0.25 keep no junction; Mamba states: ``mamba_prefix_rules``,
  0.23 dense beside the sliding-window group it needs, 0.24–0.25 no junction). Set to 0, 0.26–0.28 keep what 0.29's
  default 0 keeps: ``SlidingWindowManager.reachable_block_mask`` and ``MambaManager.reachable_block_mask`` (read in
  0.28.0 and 0.29.0: the same bodies) lay no segment tails for 0 and keep the ``reachable_boundaries``' tails, the
  replay boundary and the shared-prefix junction, so the simulator runs the variable's row with no segments. 0.23–0.25
  are refused (``check_release``): their mask takes ``num_prompt_tokens`` only (0.23.0's
  ``reachable_block_mask(..., num_prompt_tokens)``), no junction, not 0.29's rule. Unlike 0.29, 0.23–0.28's
  ``_validate_prefix_cache_retention_interval`` refuses the variable set, 0 too (``is None`` is its only pass), on a
  model with no group its retention takes ("Unset it").
* ``v1/core/kv_cache_coordinator.py : _validate_prefix_cache_retention_interval`` (every coordinator, prefix caching
  on or off) refuses a positive interval for a model with no sliding-window or Mamba group (0.23.0: no sliding-window
  group, a Mamba group not counted; Mamba from 0.24.0), and any interval that is not a multiple of
  ``scheduler_block_size`` (``kv_cache_utils.py``: the lcm of the groups' block sizes); 0.23–0.28 name the variable.
* What a positive interval keeps: ``swa_retention.py`` (sliding-window blocks) and ``mamba_prefix_rules.py`` (Mamba
  states); 0 is the default, as a run without the flag.
"""

from __future__ import annotations

import math
from typing import Any

from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.dynamics.engine.swa_retention import ENV_FROM
from kvledger.errors import InputError

__all__ = ["RETENTION_FLAG_FROM", "retention_interval_override", "check_release", "check_model_groups",
           "launch_words"]

RETENTION_FLAG_FROM = (0, 29, 0)  # in 0.29.0's engine/arg_utils.py; 0.23–0.28 have the environment variable only
ENV_ZERO_FROM = (0, 26, 0)  # the variable set to 0 keeps 0.29's default rule from here (module doc)


def retention_interval_override(a: Any, plan: Any) -> tuple[int | None, list[str]]:
    """(the interval to simulate, tokens (None: the release's default; 0 before 0.29: the variable set to 0), notes)
    for ``a.prefix_cache_retention_interval``.

    Raises:
        InputError: not vLLM, a release before 0.29, or an interval vLLM refuses to start with (module doc).
    """
    interval = getattr(a, "prefix_cache_retention_interval", None)
    if interval is None:
        return None, []
    m, flag = plan.memory, f"--prefix-cache-retention-interval {interval}"
    if m.engine != "vllm":
        raise InputError(f"{flag} is a vLLM flag (which sliding-window and Mamba checkpoints its prefix cache keeps); "
                         "SGLang has no such setting: drop it, or simulate vLLM (another --policy)")
    check_release(interval, m.engine_version)
    groups = plan.layout.groups if plan.layout is not None else ()
    env = _env_note(interval, m.engine_version)
    ver = parse_version(m.engine_version or LATEST)
    if interval == 0 and ver >= RETENTION_FLAG_FROM:
        return None, [f"{flag}: vLLM {m.engine_version}'s default (config/cache.py), as a run without the flag"]
    where = (f"vLLM {m.engine_version} refuses to start (v1/core/kv_cache_coordinator.py "
             "_validate_prefix_cache_retention_interval)")
    if not any(g.kind in _kinds_taken(ver) for g in groups):
        raise InputError(_no_group(flag, where, ver))
    scheduler_block = math.lcm(*(g.block_size for g in groups))
    if interval % scheduler_block:
        lo = interval // scheduler_block * scheduler_block
        near = f"{lo:,} or {lo + scheduler_block:,}" if lo else f"{scheduler_block:,}"
        raise InputError(f"{flag}: {where}: \"{_name(ver)} ({interval}) must be non-negative and a multiple of "
                         f"scheduler_block_size ({scheduler_block}).\" (the lcm of the KV cache groups' block sizes, "
                         f"tokens); give a multiple, e.g. {near}")
    if getattr(a, "enable_prefix_caching", None) is False:  # checked at start-up as above, but nothing is cached
        return interval, [f"{flag} with --no-enable-prefix-caching: vLLM {m.engine_version} checks it at start-up "
                          "but caches no block, so it changes nothing here"]
    return interval, env


def check_release(interval: int | None, engine_version: str | None) -> None:
    """Refuse ``--prefix-cache-retention-interval`` for a vLLM release before 0.23, or 0 before 0.26 (None: the
    newest, which has it; 0.23–0.28: ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``, module doc).

    Raises:
        InputError: in vLLM's argparse words (module doc).
    """
    if interval is None or not engine_version or parse_version(engine_version) >= RETENTION_FLAG_FROM:
        return
    said = (f"--prefix-cache-retention-interval {interval}: vLLM {engine_version} refuses it at argument parsing "
            f"(\"vllm serve: error: unrecognized arguments: --prefix-cache-retention-interval {interval}\"): the flag "
            "came in 0.29.0 (config/cache.py CacheConfig.prefix_cache_retention_interval)")
    if parse_version(engine_version) < ENV_FROM:
        raise InputError(f"{said}; drop it, or use --engine-version 0.29.0 or later")
    if interval == 0 and parse_version(engine_version) < ENV_ZERO_FROM:  # module doc: no junction, not 0.29's rule
        raise InputError(f"{said}; 0.23–0.25 read the environment variable VLLM_PREFIX_CACHE_RETENTION_INTERVAL "
                         "instead (unset: every block kept, the default simulated); set to 0 is not modelled there "
                         "(its mask keeps the replay boundary's blocks only, no shared-prefix junction): drop the "
                         "flag, give a positive interval to simulate the variable set to it, or use 0.26 or later")


def _env_note(interval: int, engine_version: str) -> list[str]:
    """The note that a positive interval before 0.29 stands for ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``."""
    if parse_version(engine_version) >= RETENTION_FLAG_FROM:
        return []
    var = f"VLLM_PREFIX_CACHE_RETENTION_INTERVAL={interval}"
    return [f"--prefix-cache-retention-interval {interval}: vLLM {engine_version} has no such flag (it came in "
            f"0.29.0); simulated as {var} in the server's environment (envs.py; unset by default: every block kept)"]


MAMBA_RETENTION_FROM = (0, 24, 0)
"""The first release whose ``_validate_prefix_cache_retention_interval`` counts a Mamba group (0.23.0's takes only a
sliding-window group: "this model has no sliding-window KV cache group"; 0.24.0–0.29.0 "no sliding-window or Mamba KV
cache group"; read in each)."""


def _kinds_taken(ver: tuple[int, int, int]) -> tuple[str, ...]:
    """The KV cache group kinds a release's retention check takes (``MAMBA_RETENTION_FROM``)."""
    return ("sliding_window",) if ver < MAMBA_RETENTION_FROM else ("sliding_window", "state")


def _name(ver: tuple[int, int, int]) -> str:
    """What vLLM's messages call the setting: the environment variable before 0.29, the config field from 0.29."""
    return "prefix_cache_retention_interval" if ver >= RETENTION_FLAG_FROM else "VLLM_PREFIX_CACHE_RETENTION_INTERVAL"


def _no_group(flag: str, where: str, ver: tuple[int, int, int]) -> str:
    """vLLM ``ver``'s refusal of a model with no group its retention takes, in its words (kv_cache_coordinator.py
    ``_validate_prefix_cache_retention_interval``: 0.23.0 sliding-window only, "Unset it" to 0.28, "Set it to 0" from
    0.29, which takes 0 for such a model; 0 is not simulated before 0.29: ``check_release``)."""
    if ver < MAMBA_RETENTION_FROM:
        said = ("no sliding-window KV cache group, so retention has no effect. Unset it (the feature only applies to "
                "sliding-window attention).")
    else:
        said = ("no sliding-window or Mamba KV cache group, so retention has no effect. "
                f"{'Set it to 0' if ver >= RETENTION_FLAG_FROM else 'Unset it'} (it only applies to sliding-window and "
                "Mamba attention).")
    return (f"{flag}: {where}: \"{_name(ver)} is set but this model has {said}\" "
            f"{'Drop it, or give 0' if ver >= RETENTION_FLAG_FROM else 'Drop it'}")


def check_model_groups(interval: int | None, model: Any, engine_version: str | None) -> None:
    """Refuse a positive ``--prefix-cache-retention-interval`` (or one vLLM's release cannot take) for ``model`` (a
    ``ModelSpec``) before any plan: a model with no sliding-window or Mamba (state) layer has no such KV cache group at
    any GPU or TP, so every candidate of a search would fail alike (vLLM's words, as ``retention_interval_override``).

    Raises:
        InputError: the release or the model refuses it (module doc).
    """
    check_release(interval, engine_version)
    kinds, ver = model.layer_counts(), parse_version(engine_version or LATEST)
    is_set = interval is not None and (interval > 0 or ver < RETENTION_FLAG_FROM)  # 0.23–0.28 refuse 0 too
    if is_set and not any(kinds.get(k) for k in _kinds_taken(ver)):
        raise InputError(_no_group(f"--prefix-cache-retention-interval {interval}", f"vLLM {engine_version or LATEST} "
                                   "refuses to start (v1/core/kv_cache_coordinator.py "
                                   "_validate_prefix_cache_retention_interval)", ver))


def launch_words(interval: int | None, engine_version: str | None) -> tuple[list[str], list[str]]:
    """(environment words, flag words) that launch vLLM ``engine_version`` with ``interval``: the flag from 0.29 (and
    with no version named) when positive (0 is its default), ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL=N`` before it, 0
    included (module doc)."""
    if interval is None:
        return [], []
    if engine_version and parse_version(engine_version) < RETENTION_FLAG_FROM:
        return [f"VLLM_PREFIX_CACHE_RETENTION_INTERVAL={interval}"], []
    if not interval:
        return [], []
    return [], ["--prefix-cache-retention-interval", str(interval)]
