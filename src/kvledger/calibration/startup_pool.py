"""``validate`` and ``calibrate --startup-log FILE``: the KV pool of the replay from the vLLM start-up log of the
server that was measured, as ``doctor`` reads it.

The block count is doctor's (``analyses.doctor.context.log_blocks``, with the log's own settings: its model, block
size, max_model_len and release): printed ("# GPU blocks: N", V0 and early V1), a ``num_gpu_blocks_override``, or
inverted from the printed "GPU KV cache size: T tokens" under that release's print rule (T = n × block_size, the
printed concurrency narrowing n where several counts print T). The replay takes it as ``--num-gpu-blocks-override``
would; ``source`` is the words its KV pool note cites.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvledger.errors import FormatError, InputError

__all__ = ["StartupPool", "read_startup_pool", "check_log_block_size", "startup_log_words"]


@dataclass(frozen=True)
class StartupPool:
    """The pool a start-up log states. num_gpu_blocks: the block count the replay takes; block_size: tokens per block
    under the log's settings; line: the log line it was read from; source: where it came from, in words (the file,
    the figure and its line, and how the count follows from it)."""

    num_gpu_blocks: int
    block_size: int
    line: int | None
    source: str


def _vllm_log(path: str):
    """The parsed log, or a clear refusal naming --startup-log: another engine's log (named, with the line that
    identifies it), a file with no vLLM line, an empty or unreadable file."""
    from kvledger.evidence.vllm_log import read_vllm_log

    try:
        return read_vllm_log(path)  # require_vllm's checks included
    except FormatError as err:
        raise InputError("--startup-log " + str(err).replace(
            "kvledger doctor reads vLLM server logs only", "--startup-log reads the KV pool of a vLLM start-up "
            "log")) from None
    except InputError as err:  # no such file, empty, compressed
        raise InputError(f"--startup-log {err}") from None


def read_startup_pool(path: str, model: str | None = None, gpu: str | None = None) -> StartupPool:
    """The KV pool the vLLM start-up log at ``path`` states (module docstring); ``model`` and ``gpu`` as the command
    was given them (default: the log's own, as ``doctor`` reads it).

    Raises:
        InputError: not a vLLM log (an SGLang one named), an empty file, or a log with no line stating the pool.
    """
    from kvledger.analyses.doctor.context import build_context

    log = _vllm_log(path)
    ctx = build_context(log, model=model, gpu=gpu)
    lo, hi, how = ctx.log_blocks
    st, name = log.startup, Path(path).name
    if lo is None and st.kv_cache_tokens is not None:  # printed, but not invertible without the model's layout
        raise InputError(f"--startup-log {path}: line {st.lines.get('kv_cache_tokens')} prints 'GPU KV cache size: "
                         f"{st.kv_cache_tokens:,} tokens', but the block count follows from it only with the model's "
                         f"KV layout: {how if ctx.model is not None else ctx.model_source}")
    if lo is None:
        raise InputError(f"--startup-log {path}: no line states the KV pool: vLLM prints '# GPU blocks: N' or "
                         "'GPU KV cache size: T tokens' once the pool is sized; a log cut before it, or one of a "
                         "server that did not start, has neither")
    plan = ctx.log_blocks_plan or ctx.log_memory_plan or ctx.model_plan
    block_size = plan.memory.block_size if plan is not None else int(ctx.settings.get("block_size") or 16)
    field = ("num_gpu_blocks_override" if st.num_gpu_blocks_override else
             "num_gpu_blocks" if st.num_gpu_blocks else "kv_cache_tokens")
    line = st.lines.get(field)
    figure = (f"'GPU KV cache size: {st.kv_cache_tokens:,} tokens', " if field == "kv_cache_tokens" else "")
    several = f"; the printed figures allow {lo:,}–{hi:,}, the fewest taken" if hi != lo else ""
    return StartupPool(lo, block_size, line, f"the start-up log {name} ({figure}{how}; blocks of {block_size} tokens "
                                             f"under the log's settings{several})")


def _replay_block_size(args: Any, taken: dict[str, Any]) -> tuple[int | None, str]:
    """(tokens per block the replay plans its pool in, where that came from): --block-size, the run's record, else the
    plan's default for the replay's settings (its plan without the log's pool; None where that plan is refused: the
    replay then says why)."""
    if args.block_size is not None:
        return args.block_size, ("the run's record's block_size" if "block_size" in taken else "--block-size")
    from kvledger.analyses.serving.sim_setup import load_plan
    from kvledger.errors import KvLedgerError

    try:
        plan, _ = load_plan(replace(args, num_gpu_blocks_override=None, kv_pool_source=None, kv_pool_block_size=None))
    except KvLedgerError:
        return None, ""
    return plan.memory.block_size, f"vLLM {plan.memory.engine_version}'s default for this model"


def check_log_block_size(args: Any, taken: dict[str, Any]) -> None:
    """Refuse a replay whose blocks are not the start-up log's: the log's pool is n blocks of its block size, and n
    blocks of another size would replay another pool (n × 16 tokens is half of n × 32). ``taken``: the settings the
    replay took from the run's record.

    Raises:
        InputError: the two block sizes, where each came from, and the fix.
    """
    from kvledger.errors import InputError

    log_size, n = args.kv_pool_block_size, args.num_gpu_blocks_override
    if log_size is None or n is None:
        return
    size, whence = _replay_block_size(args, taken)
    if size is None or size == log_size:
        return
    raise InputError(f"--startup-log: the log states a pool of {n:,} blocks of {log_size} tokens ({n * log_size:,} "
                     f"token slots; {args.kv_pool_source}), but the replay's blocks are {size} tokens ({whence}), so "
                     f"{n:,} of them would be {n * size:,} token slots, another pool than the server's; give "
                     f"--block-size {log_size}, the size the logged server ran with, or drop --startup-log")


def startup_log_words(message: str, args: Any) -> str:
    """A refusal of the replay's pool in --startup-log's words where the pool came from the log (``args``'s
    ``kv_pool_source``): the plan names the block count as --num-gpu-blocks-override, which the user did not give,
    so a log of another GPU (or another memory setting) read as "--num-gpu-blocks-override 31,250 asks …"."""
    if not args.kv_pool_source:
        return message
    said = re.sub(r"At most --num-gpu-blocks-override ([\d,]+) can be allocated", r"At most \1 blocks can be allocated",
                  message)
    said = re.sub(r"--num-gpu-blocks-override ([\d,]+)( asks)?", lambda m: f"--startup-log's {m[1]} blocks"
                  + (" ask" if m[2] else ""), said)
    return (f"{said} — --startup-log's pool is {args.kv_pool_source}; is the log that of the server that was measured, "
            "on this GPU with these settings? A log of another GPU states another pool: give the measured server's, "
            "or drop --startup-log to replay the planned pool")
