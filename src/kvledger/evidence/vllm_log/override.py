"""Which ``Overriding num_gpu_blocks=N with num_gpu_blocks_override=M`` lines are the user's
``--num-gpu-blocks-override`` and which are vLLM's own CUDA-graph memory profiling.

vLLM 0.18 and 0.19 measure CUDA-graph memory on a throw-away KV cache: ``profile_cudagraph_memory`` calls
``gpu_model_runner.py::_init_minimal_kv_cache_for_profiling``, which sets ``num_gpu_blocks_override`` to
``max_cudagraph_capture_size`` (or 1) for a moment and sizes the cache with ``available_memory=0``; the override
helper ``kv_cache_utils.py::may_override_num_blocks`` then logs ``Overriding num_gpu_blocks=0 with
num_gpu_blocks_override=<capture size>`` although the user set nothing. The real override goes through the same
helper from ``get_kv_cache_configs``, after ``_check_enough_kv_cache_memory`` has made sure one ``max_model_len``
request fits, so there it logs ``floor(available / page size / layers) >= 1``: in those versions a computed
count of 0 is the profiling pass and nothing else. vLLM 0.17 has no such pass; 0.20 passes ``suppress_log=True`` for
the profiling
pass; 0.24 and later (kv_cache_utils.py/kv_cache_planning.py ``get_kv_cache_configs``) log only the real override,
as ``available // bytes per block``, which can be 0 there; the V0 engine (``executor_base.py``) has no profiling
pass. A user's override also appears in the ``non-default args`` echo, which is read first and wins.

So a line is read as the pool only with a computed count of at least one block: a count of 0 outside 0.18–0.19 (a
0.19 log relabelled 0.20, V0, or 0.24+ with less than one block of memory) is not the profiling pass by version, but
nor is it a pool this log can be checked against — the user's setting, if any, is the args echo's.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.vllm_rules import parse_version
from kvledger.errors import InputError

__all__ = ["OverrideLine", "is_cudagraph_profiling", "split_overrides"]

#: The first and the first-after-last releases whose CUDA-graph profiling logs its temporary override (see above).
PROFILING_LOGGED_FROM, PROFILING_LOGGED_UNTIL = (0, 18, 0), (0, 20, 0)


@dataclass(frozen=True)
class OverrideLine:
    """One override line: its 1-based line, the block count vLLM computed and the override it applied."""

    line_no: int
    computed_blocks: int
    override_blocks: int


def is_cudagraph_profiling(o: OverrideLine, version: str | None, generation: str | None) -> bool:
    """True when the line is the CUDA-graph profiling pass of vLLM 0.18–0.19, not a user setting (rule above).

    A version the log does not give (printed or inferred) is taken as one that may log the profiling pass: the
    other cases with a computed count of 0 (V0; 0.24+ with less than one block of memory) need a version to tell.
    """
    if o.computed_blocks != 0 or generation == "v0":
        return False
    if version is None:
        return True
    try:
        v = parse_version(version)
    except InputError:
        return True
    return PROFILING_LOGGED_FROM <= v < PROFILING_LOGGED_UNTIL


def split_overrides(lines: list[OverrideLine], version: str | None, generation: str | None
                    ) -> tuple[OverrideLine | None, list[OverrideLine], list[OverrideLine]]:
    """(the first real override line or None, the profiling-pass lines, the other lines of a computed count of 0:
    never read as the pool, module docstring)."""
    profiling = [o for o in lines if is_cudagraph_profiling(o, version, generation)]
    real = [o for o in lines if o.computed_blocks >= 1]
    return (real[0] if real else None), profiling, [o for o in lines if o not in profiling and o not in real]
