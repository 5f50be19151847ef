"""Which vLLM worker prints "Available KV cache memory", and whose pool "GPU KV cache size" shows, by version.

With several GPUs every worker profiles its own memory and sizes its own pool; the engine then gives each worker the
smallest block count of all (``v1/core/kv_cache_utils.py::get_kv_cache_configs``, "Change the num_blocks of each rank
to the smallest among all ranks"; ``unify_kv_cache_configs`` in 0.10.1.1). What V1's log shows of it changed twice
(read in the wheels of 0.10.1.1, 0.11.0, 0.11.1, 0.11.2, 0.13.0, 0.14.1, 0.16.0, 0.18.0, 0.19.0 and 0.20.0):

* 0.8 up to 0.11.0 every worker logs its memory (``v1/worker/gpu_worker.py``, ``logger.info``) and the tokens of its
  own pool before the minimum is taken (``get_kv_cache_config``): each tokens line belongs to one worker's memory line;
* 0.11.1–0.19 only each node's first local rank logs its memory (``logger.info_once(..., scope="local")``) and the
  tokens are logged once, after the minimum (``_report_kv_cache_config``, called at the end of
  ``get_kv_cache_configs``, ``info_once(scope="local")``): the printed tokens are the smallest rank's pool, the
  printed memory is rank 0's;
* 0.20 logs the memory in every worker (``info_once`` with its default per-process scope) and the tokens once after
  the minimum: the tokens are the pool of the smallest of the printed lines, and a record that keeps one line keeps
  one worker's.

So from 0.11.1, on more than one GPU, a memory figure of one rank bounds the printed pool from above only: the
blocks equal that rank's (``printed_gib_block_range``) when the ranks profile alike, and fall short of it by the
memory the smallest rank lacks when they do not. The ranks' spread is not a rule of vLLM's code (it is what the
collectives and runtime allocate on each device during the profile) and no printed line gives it: on vLLM 0.19 H100
runs at TP 2 and 4 every rank's DEBUG "Total non KV cache memory" is equal to 0.01 GiB
(``shared/data/vllm-startups-0.19``, ``non_kv_total_gib_by_rank``); on MI300X and from 0.20 (each rank's own
CUDA-graph estimate is subtracted, ``gpu_worker.py::determine_available_memory``) the records here hold one rank's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvledger.units import GiB

__all__ = ["RankPrint", "rank_print", "PoolCheck", "check_printed_pool"]


@dataclass(frozen=True)
class RankPrint:
    """What one vLLM version prints of a multi-GPU pool. memory: the workers that log "Available KV cache memory"
    ("every worker" or "local rank 0"); tokens_are_minimum: "GPU KV cache size" is logged after the engine took the
    smallest rank's count (else each worker logs its own); source: the code it is read from."""

    memory: str
    tokens_are_minimum: bool
    source: str


def rank_print(ver: tuple[int, int, int]) -> RankPrint:
    """The version's rule (module docstring). Before 0.8 (the V0 engine) every worker logs its memory profile
    (``worker/worker.py``) and the executor logs "# GPU blocks" once, the smallest over the workers
    (``executor/executor_base.py::initialize_cache``), read in 0.10.1.1's V0 files, which earlier releases kept."""
    if ver < (0, 8, 0):
        return RankPrint("every worker", True, "vLLM V0 worker/worker.py logs each worker's profile; "
                         "executor/executor_base.py takes the minimum over workers before logging the blocks")
    if ver < (0, 11, 1):
        return RankPrint("every worker", False, "vLLM ≤0.11.0 v1/worker/gpu_worker.py logger.info per worker; "
                         "v1/core/kv_cache_utils.py logs each worker's tokens before the minimum over ranks")
    if ver < (0, 20, 0):
        return RankPrint("local rank 0", True, "vLLM 0.11.1–0.19 v1/worker/gpu_worker.py info_once(scope='local'); "
                         "v1/core/kv_cache_utils.py::get_kv_cache_configs logs the tokens after the minimum over "
                         "ranks")
    return RankPrint("every worker", True, "vLLM 0.20 v1/worker/gpu_worker.py info_once (per process); "
                     "v1/core/kv_cache_utils.py::get_kv_cache_configs logs the tokens after the minimum over ranks")


@dataclass(frozen=True)
class PoolCheck:
    """The printed block count against the range one printed memory figure allows (lo–hi blocks).

    verdict: "exact" (inside), "smallest rank" (below it, which the version's minimum over ranks allows: the smallest
    rank held between spread_low and spread_high bytes less than the printed figure's rank) or "miss"."""

    verdict: str
    spread_low: int = 0
    spread_high: int = 0
    why: str = ""


def check_printed_pool(ver: tuple[int, int, int], ranks: int, printed_gib: float, blocks: int, bytes_per_block: int,
                       lo: int, hi: int) -> PoolCheck:
    """``blocks`` (from the printed tokens) against ``lo``–``hi`` (the blocks ``printed_gib``, a 2-decimal figure,
    allows). Below the range on ``ranks`` > 1 GPUs of a version that prints the smallest rank's pool: the spread
    that smallest rank must have had, from the printed figure's ±0.005 GiB and the block's own width."""
    if lo <= blocks <= hi:
        return PoolCheck("exact")
    rule = rank_print(ver)
    if blocks < lo and ranks > 1 and rule.tokens_are_minimum:
        low = max(0, math.ceil((printed_gib - 0.005) * GiB) - (blocks + 1) * bytes_per_block + 1)
        high = math.ceil((printed_gib + 0.005) * GiB) - 1 - blocks * bytes_per_block
        who = ("the memory printed is local rank 0's" if rule.memory == "local rank 0" else
               "every worker prints its own memory and one line is one worker's")
        return PoolCheck("smallest rank", low, high, f"the pool is the smallest of {ranks} ranks' and {who} "
                         f"({rule.source})")
    return PoolCheck("miss")
