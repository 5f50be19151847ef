"""What an inference-perf stage file's harness kept beside it, as the replay needs it: the launch record (read by
``kvledger.evidence.launch_record``: which model, at which TP, under which scheduler limits the measured engine ran,
so a stage is replayed on the engine that served it, not on defaults), the client's fixed output length and prompt
pool, and the client's cap on requests in flight.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kvledger.evidence.inference_perf_client import CLIENT_FILE, fixed_output_tokens
from kvledger.evidence.inference_perf_client import client_config as _client_config
from kvledger.evidence.launch_record import LAUNCH_FILE, StageLaunch, stage_launch

__all__ = ["LAUNCH_FILE", "CLIENT_FILE", "StageLaunch", "PromptPool", "stage_launch", "fixed_output_tokens",
           "client_prompt_pool", "pool_prefix", "ClientCap", "client_concurrency_cap",
           "client_loop", "BEHIND", "sent_at_inf"]

#: a stage whose client achieved less than this share of its requested rate fell behind (its cap bound the load)
BEHIND = 0.95
def sent_at_inf(stage: Any) -> bool:
    """Whether a stage (``sweep.Stage``) was a closed loop: sent at request_rate inf under a client cap
    (``client_users``), not at a rate (under a cap: paced)."""
    return bool(getattr(stage, "client_users", None)) and not math.isfinite(stage.requested_rate)


class PromptPool:
    """The fixed pool of whole prompts an inference-perf ``shared_prefix`` client re-sent: ``prompts`` (groups ×
    prompts per group), ``multi_turn`` (its sessions grow a context instead) and the config ``path`` read."""

    __slots__ = ("prompts", "multi_turn", "path")

    def __init__(self, prompts: int, multi_turn: bool, path: str) -> None:
        self.prompts, self.multi_turn, self.path = prompts, multi_turn, path


#: inference-perf's ``SharedPrefix`` config keys and their aliases (``config.py``: ``AliasChoices``)
_POOL_KEYS = (("num_groups", "num_unique_system_prompts"), ("num_prompts_per_group", "num_users_per_system_prompt"))


def client_prompt_pool(stage_path: str | Path) -> PromptPool | None:
    """The prompt pool the stage's client drew from (``PromptPool``), read from the nearest client config (as
    ``fixed_output_tokens``); None unless it states ``data.type: shared_prefix`` with positive integer group counts.

    The rule, from inference-perf's ``datagen/shared_prefix_datagen.py`` (the 2025 releases): the generator makes
    ``num_groups`` random system prompts of ``system_prompt_len`` tokens and, under each, ``num_prompts_per_group``
    random questions of ``question_len`` tokens; the whole prompts (system + question) are shuffled once and then sent
    in turn, ``i = (i + 1) % len(prompts)``, for the whole run. So every request re-sends one of a fixed pool of
    whole prompts (not only a shared system prompt), and an engine with prefix caching serves all of a repeated
    prompt but its last partial block. With ``enable_multi_turn_chat`` each prompt is a user session whose context
    grows by round instead (``multi_turn``)."""
    cfg = _client_config(stage_path)
    if cfg is None or not isinstance(cfg[1], dict):
        return None
    data = cfg[1].get("data")
    if not isinstance(data, dict) or str(data.get("type", "")).lower() != "shared_prefix":
        return None
    sp = data.get("shared_prefix")
    if not isinstance(sp, dict):
        return None
    counts = [next((sp[k] for k in keys if k in sp), 10) for keys in _POOL_KEYS]  # 10 × 10: inference-perf's defaults
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts):
        return None
    return PromptPool(counts[0] * counts[1], sp.get("enable_multi_turn_chat") is True, str(cfg[0]))


class ClientCap:
    """The most requests an inference-perf client kept in flight: ``users``, and ``source``, where it was read."""

    __slots__ = ("users", "source")

    def __init__(self, users: int, source: str) -> None:
        self.users, self.source = users, source


def _positive(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def client_concurrency_cap(stage_path: str | Path) -> ClientCap | None:
    """The client's cap on requests in flight, read from the nearest client config (as ``fixed_output_tokens``):
    ``load.num_workers × load.worker_max_concurrency``; None when the config states no ``num_workers``.

    The rule, from inference-perf's ``loadgen/load_generator.py`` and ``config/loadgen/config.py`` (the 2025–2026
    releases): the load generator starts ``num_workers`` worker processes, and each sends a request only after
    acquiring one of its own ``Semaphore(worker_max_concurrency)`` permits, released when the response ends. So at most
    their product is in flight (kubecon NA 2025: 44 × 10 = 440), and a stage whose rate needs more falls behind it.
    ``worker_max_concurrency`` defaults to 100; ``num_workers`` defaults to the client machine's CPU count, which no
    file records, so without it the cap is unknown (None), as it is for a non-positive or non-integer value."""
    cfg = _client_config(stage_path)
    load = cfg[1].get("load") if cfg is not None and isinstance(cfg[1], dict) else None
    if not isinstance(load, dict):
        return None
    workers, per = load.get("num_workers"), load.get("worker_max_concurrency", 100)
    if not (_positive(workers) and _positive(per)):
        return None
    said = "" if "worker_max_concurrency" in load else " (inference-perf's default)"
    return ClientCap(workers * per, f"{cfg[0]}: load.num_workers {workers} × load.worker_max_concurrency {per}{said} "
                                    "(inference-perf: each worker holds that many requests in flight at most)")


def client_loop(stage: Any, given: int | None, label: str) -> tuple[int | None, str | None]:
    """How a stage (``kvledger.calibration.sweep.Stage``) is replayed: the closed loop's users (None: open loop at the
    stage's own send times) and the note saying why (None when the client kept up with its rate). With a finite
    requested rate the loop is paced (``sweep.stage_run``): each request at its time on the requested schedule, or
    when one of the users' slots frees.

    A client that fell behind (achieved < ``BEHIND`` × requested) was bound by its cap on requests in flight: the
    stage is a loop of ``given`` users (``--client-concurrency``) or, without it, of the cap its client config
    states (``client_concurrency_cap``). With neither, the replay sends at the achieved rate, which hides the queue
    the measured stage built: its latencies and throughput are not comparable, and the note warns so. ``label``
    names the stage in the note. A run under a client cap the file states (``stage.client_users``: vLLM's or
    SGLang's ``--max-concurrency``, AIPerf's ``--concurrency``) is that loop, whatever ``given`` says."""
    users = getattr(stage, "client_users", None)
    if users:
        kept = stage.count - stage.num_failed
        if math.isfinite(stage.requested_rate):
            return users, (f"{label}: sent at {stage.requested_rate:.4g} req/s under a cap of {users:,} in "
                           f"flight ({stage.client_users_source}): replayed paced, each of the run's {kept:,} "
                           f"completed requests sent at its time at that rate or, with {users:,} in flight, as soon as "
                           "one finishes")
        return users, (f"{label}: sent at request_rate inf under a cap of {users:,} requests in flight "
                       f"({stage.client_users_source}): replayed as a closed loop of {users:,} clients, each sending "
                       f"its next request when its previous one finishes, through the run's {kept:,} completed "
                       "requests")
    if not stage.achieved_rate < BEHIND * stage.requested_rate:
        return None, None
    # the stage's own figures last, "(this stage: …)", so that a sweep says the note once (sweep_notes)
    own = (f" (this stage: {label}, achieved {stage.achieved_rate:.3g} of {stage.requested_rate:.3g} req/s "
           "requested)")
    paced = "each request sent at its time on the requested schedule or, with that many in flight, as one finishes"
    if given:
        return given, (f"the client fell behind its rate: replayed under a cap of {given:,} requests in flight "
                       f"(--client-concurrency), {paced}{own}")
    cap = client_concurrency_cap(stage.path) if Path(stage.path).is_file() else None
    if cap is not None:
        return cap.users, (f"the client fell behind its rate: replayed under a cap of {cap.users:,} requests in "
                           f"flight, from {cap.source}, {paced}{own}")
    return None, ("WARNING: the client fell behind its rate and no cap on its requests in flight is known (pass "
                  "--client-concurrency; inference-perf: load.num_workers × load.worker_max_concurrency): the replay "
                  f"sends at the achieved rate, so this saturated stage's latencies and throughput are not "
                  f"comparable{own}")


def pool_prefix(stage: Any, prefix_caching: bool | None = None) -> tuple[dict[str, int], str | None]:
    """The ``sweep.stage_workload`` prefix arguments the stage's (a ``sweep.Stage``: its ``path`` and
    ``prompt_quantiles``) client prompt pool implies, and a note saying so (none
    when its client config states no pool): every request re-sends one of the pool's whole prompts, shared up to the
    stage's shortest prompt (the tokens every request of it has). A multi-turn pool's growing sessions are not
    replayed (the note says so). ``prefix_caching``: whether the replayed engine caches prefixes (None: not known
    here); when False the note says the pool is not reused from cache."""
    pool = client_prompt_pool(stage.path) if Path(stage.path).is_file() else None
    if pool is None:
        return {}, None
    if pool.multi_turn:
        return {}, (f"{pool.path}: shared_prefix with enable_multi_turn_chat — each of {pool.prompts} user sessions "
                    "grows its context by round; the replay draws independent prompts (no reuse modelled)")
    tokens = int(min(v for _, v in stage.prompt_quantiles)) if stage.prompt_quantiles else 0
    if tokens < 1:
        return {}, None
    return {"prefix_groups": pool.prompts, "prefix_tokens": tokens}, (
        f"{pool.path}: shared_prefix pool of {pool.prompts} whole prompts re-sent in turn (inference-perf's "
        f"shared-prefix generator); each replayed request re-sends one, its first {tokens} tokens (the stage's "
        "shortest prompt) shared, " + ("but prefix caching is off in the replayed engine, so the pool is not reused "
                                       "from cache: each repeat is prefilled again" if prefix_caching is False
                                       else "so prefix caching serves a repeat"))

