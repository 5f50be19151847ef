"""SGLang's own step overheads (0.5.23; older releases' capture sizes below): decode batches padded to the captured
CUDA-graph sizes, torch.compile's batch limit, and overlap scheduling's step timing.

* Captured sizes (``arg_groups/cuda_graph_hook.py :: generate_decode_cuda_graph_batch_sizes``, no speculative
  decoding): 1, 2, 4, 8, 12, then every 8 from 16 to 256, every 16 from 272 to 496, every 32 from 512 to
  ``cuda_graph_max_bs``, and ``cuda_graph_max_bs`` itself (``disable_cuda_graph_padding``: every size from 1;
  speculative decoding: 1–8, every 2 to 32, every 4 to 64, every 8 to 256, every 16 beyond). ``cuda_graph_max_bs``
  defaults by GPU memory and TP (``arg_groups/memory_hook.py``, ``sglang_rules.py``) and, left unset, is cut to
  ``--max-running-requests``; ``model_executor/runner/base_cuda_graph_runner.py :: get_batch_sizes_to_capture``
  drops sizes above the request pool and adds the pool's size when the list overshoots it. Older releases
  (``--engine-version``): 0.4.0–0.4.5 capture 1, 2, 4, then every 8 from 8 to 160, up to ``cuda_graph_max_bs`` (160
  by default from 25,000 MiB, ``server_args.py``) — ``model_executor/cuda_graph_runner.py`` of 0.4.0, 0.4.0.post1,
  0.4.1 and 0.4.3, ``cuda_graph_max_bs`` itself not added; from 0.4.0.post1 a pool smaller than the list adds its size
  and one less (0.4.3's extra sizes 168–256 on ROCm are not modelled). The lists of 0.4.6–0.5.22 (changed in 0.4.6,
  0.4.9 and 0.5.3) were not modelled: their decode steps are priced unpadded.
* Padding (``base_cuda_graph_runner.py :: _pad_to_bucket``; ``decode_cuda_graph_runner.py``): a decode batch of
  ``n ≤ max`` requests replays the smallest captured size ``≥ n``; the ``p − n`` padding rows run every GEMM and
  attend ``seq_len_fill_value`` (1) token each. Above the largest size the batch runs eagerly, unpadded.
* torch.compile (``--enable-torch-compile``): only captured sizes ≤ ``torch_compile_max_bs`` (default 32,
  ``arg_groups/fields/exec_.py``) are compiled (``get_batch_sizes_to_capture``'s ``compile_bs``); larger batches
  replay plain CUDA graphs. Its speed-up is not modelled.
* Overlap scheduling (on unless ``--disable-overlap-schedule``, in every release read from 0.4.0;
  ``managers/scheduler.py :: event_loop_overlap``):
  batch k is launched, then batch k − 1's results are processed and batch k + 1 scheduled while the GPU runs, so
  a step takes max(GPU time, CPU time) instead of their sum (the roofline's ``overlap_cpu``). The one-step lag in
  seeing results (a finished request frees its KV a step later) is not modelled by the SGLang scheduling rule.
"""

from __future__ import annotations

import bisect
from typing import Any

from kvledger.accounting.decode_prices import PLAIN_FLOAT_MAX_STEPS
from kvledger.accounting.sglang_rules import (
    SGLANG_LATEST,
    parse_sglang_version,
    sglang_version_defaults,
    sglang_version_text,
)
from kvledger.accounting.stepcost import StepShape, decode_steps_by_loop, step_pricer

__all__ = ["SGLANG_TORCH_COMPILE_MAX_BS", "SGLANG_SEQ_LEN_FILL", "capture_sizes_04", "decode_capture_sizes",
           "padded_decode_batch", "torch_compile_sizes", "GraphPaddedStepCost", "sglang_capture_sizes"]

SGLANG_TORCH_COMPILE_MAX_BS = 32
"""``--torch-compile-max-bs`` default, requests (SGLang 0.5.23 ``arg_groups/fields/exec_.py``)."""
SGLANG_SEQ_LEN_FILL = 1
"""KV tokens a padding row attends (``get_cuda_graph_seq_len_fill_value`` of the attention backends), tokens."""
SGLANG_04_SIZES = (1, 2, 4, *range(8, 161, 8))
"""The decode sizes SGLang 0.4.0–0.4.5.post2 lists before its filters (``model_executor/cuda_graph_runner.py``, read in
0.4.0, 0.4.0.post1, 0.4.1, 0.4.3 and 0.4.5.post2: ``[1, 2, 4] + [i * 8 for i in range(1, 21)]``; 0.4.5.post3 and
0.4.6 list other sizes), requests."""
SGLANG_LISTS_NOT_READ = ((0, 4, 5, 3), SGLANG_LATEST)
"""The releases, [from, to), whose capture list is not replayed: 0.4.5.post3 changed it (its wheel: by GPU memory, as
0.4.6), and 0.4.9 and 0.5.3 changed it again; the replay prices their decode steps unpadded."""
SGLANG_OVERLAP_NOTE = ("overlap scheduling (managers/scheduler.py, on unless --disable-overlap-schedule: "
                       "server_args.py disable_overlap_schedule False in 0.4.0, 0.4.0.post1, 0.4.1, 0.4.3, 0.4.6, "
                       "0.4.9, 0.5.3; 0.5.23 event_loop_overlap): a step takes max(GPU, CPU); "
                       + "its one-step lag in seeing results is not modelled")


def decode_capture_sizes(max_bs: int, *, speculative: bool = False, disable_padding: bool = False,
                         pool_requests: int | None = None) -> tuple[int, ...]:
    """The decode batch sizes SGLang 0.5.23 captures as CUDA graphs, ascending (module docstring)."""
    if disable_padding:
        sizes = list(range(1, max_bs + 1))
    elif not speculative:
        sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1,
                                                                                                     32))
    else:
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                 + list(range(272, max_bs + 1, 16)))
    sizes = [b for b in sizes if b <= max_bs] + ([max_bs] if max_bs not in sizes else [])
    if pool_requests is not None:
        sizes = [b for b in sizes if b <= pool_requests] + ([pool_requests] if max(sizes) > pool_requests else [])
    return tuple(sorted(set(sizes)))


def padded_decode_batch(num_seqs: int, sizes: tuple[int, ...]) -> int:
    """The batch a decode step of ``num_seqs`` requests runs at: the smallest captured size ≥ it, or itself above the
    largest (eager, no graph), requests."""
    if not sizes or num_seqs > sizes[-1] or num_seqs <= 0:
        return num_seqs
    return sizes[bisect.bisect_left(sizes, num_seqs)]


def torch_compile_sizes(sizes: tuple[int, ...], max_bs: int = SGLANG_TORCH_COMPILE_MAX_BS) -> tuple[int, ...]:
    """The captured sizes torch.compile compiles under ``--enable-torch-compile``: those ≤ ``max_bs``."""
    return tuple(b for b in sizes if b <= max_bs)


class GraphPaddedStepCost:
    """A step-cost model whose pure-decode steps run at SGLang's padded CUDA-graph batch (``padded_decode_batch``): the
    padding rows add their GEMM rows and ``SGLANG_SEQ_LEN_FILL`` KV token each. Steps with a prefill chunk are priced
    by the wrapped model as they are. Any other attribute is the wrapped model's."""

    def __init__(self, inner: Any, sizes: tuple[int, ...], source: str = "") -> None:
        self.inner, self.capture_sizes, self.source = inner, sizes, source
        self.name = f"{inner.name}+cuda-graph padding"
        self.max_captured = sizes[-1] if sizes else 0
        self.padded_terms: dict[int, tuple] = {}
        self.price_of = step_pricer(inner)  # the wrapped model's own six-field price, else one through StepShape

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":  # not yet set (copy / pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def step_time_of(self, num_prefill_tokens: int, num_prefill_seqs: int, prefill_kv_tokens: int,
                     prefill_attn_pairs: float, num_decode_seqs: int, decode_kv_tokens: int) -> float:
        """The wrapped model's price of this step, a pure-decode step at its padded batch, s."""
        if num_prefill_tokens == 0 and 0 < num_decode_seqs <= self.max_captured:
            p = padded_decode_batch(num_decode_seqs, self.capture_sizes)
            decode_kv_tokens += (p - num_decode_seqs) * SGLANG_SEQ_LEN_FILL
            num_decode_seqs = p
        return self.price_of(num_prefill_tokens, num_prefill_seqs, prefill_kv_tokens, prefill_attn_pairs,
                             num_decode_seqs, decode_kv_tokens)

    def step_time_s(self, shape: StepShape) -> float:
        return self.step_time_of(shape.num_prefill_tokens, shape.num_prefill_seqs, shape.prefill_kv_tokens,
                                 shape.prefill_attn_pairs, shape.num_decode_seqs, shape.decode_kv_tokens)

    def decode_steps_list(self, num_seqs: int, kv_tokens: int, num_steps: int) -> list[float]:
        """``num_steps`` pure-decode steps of ``num_seqs`` requests, KV growing by ``num_seqs`` a step, s each: at the
        padded batch ``p`` the padding rows hold ``p − num_seqs`` tokens every step; in the wrapped model's plain form
        (``gemm + bytes per token · tokens / bandwidth``, bit for bit its own step price) where it has one."""
        c = self.padded_terms.get(num_seqs) or self._padded(num_seqs)
        start, plain = kv_tokens + c[0], c[1]
        if plain is not None:
            gemm, g, b = plain
            if num_steps <= PLAIN_FLOAT_MAX_STEPS:
                return [gemm + g * x / b for x in range(start, start + num_seqs * num_steps, num_seqs)]
            import numpy as np  # long runs: the same operations elementwise (numpy rounds each as Python does)

            return (gemm + g * np.arange(start, start + num_seqs * num_steps, num_seqs) / b).tolist()
        return [self.step_time_of(0, 0, 0, 0.0, num_seqs, kv_tokens + i * num_seqs) for i in range(num_steps)]

    def _padded(self, num_seqs: int) -> tuple:
        """(padding tokens, the wrapped model's plain form at the padded batch or None), cached."""
        p = padded_decode_batch(num_seqs, self.capture_sizes)
        fast = num_seqs and hasattr(self.inner, "decode_plain_terms")
        c = self.padded_terms[num_seqs] = ((p - num_seqs) * SGLANG_SEQ_LEN_FILL,
                                           self.inner.decode_plain_terms(p) if fast else None)
        return c

    def decode_padded_terms(self, num_seqs: int) -> tuple[float, float, float, int] | None:
        """``decode_steps_list``'s plain form: (gemm s, KV bytes per token, bandwidth B/s, padding tokens), a step
        reading ``kv`` tokens costing ``gemm + g · (kv + padding) / bw`` at the padded batch; None where the wrapped
        model has no plain form."""
        c = self.padded_terms.get(num_seqs) or self._padded(num_seqs)
        return (*c[1], c[0]) if c[1] is not None else None

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int):
        return decode_steps_by_loop(self, num_seqs, kv_tokens, num_steps)

    def decode_plain_terms(self, num_seqs: int) -> tuple[float, float, float] | None:
        """The wrapped model's plain form at a captured size or above the largest (no padding rows); None between
        sizes, where the padding rows' tokens break the form (then ``decode_steps_list``)."""
        if padded_decode_batch(num_seqs, self.capture_sizes) != num_seqs or not hasattr(self.inner,
                                                                                       "decode_plain_terms"):
            return None
        return self.inner.decode_plain_terms(num_seqs)


def capture_sizes_04(ver: tuple[int, ...], max_bs: int, pool_size: int | None = None) -> tuple[int, ...]:
    """The decode batch sizes SGLang 0.4.0–0.4.5 captures (``SGLANG_04_SIZES``), ascending: from 0.4.0.post1, when the
    list overshoots the request pool (``pool_size``, ``req_to_token_pool.size``), the pool's size and one less are
    added; then the sizes above the pool or above ``max_bs`` are dropped (``cuda_graph_runner.py``; 0.4.0.post1, 0.4.1
    and 0.4.3 read)."""
    sizes = list(SGLANG_04_SIZES)
    if pool_size is not None and ver >= (0, 4, 0, 1) and sizes[-1] > pool_size:
        sizes += [pool_size - 1, pool_size]
    return tuple(sorted({b for b in sizes if 0 < b <= max_bs and (pool_size is None or b <= pool_size)}))


def sglang_capture_sizes(gpu: Any, tp: int, pp: int, engine_version: str | None, max_running_given: int | None = None,
                         pool_requests: int | None = None) -> tuple[tuple[int, ...], str] | None:
    """(the decode sizes SGLang captures on ``gpu`` at TP ``tp`` × PP ``pp`` by default, where they come from); None
    for a release whose capture list is not replayed (0.4.5.post3–0.5.22: ``SGLANG_LISTS_NOT_READ``).
    ``max_running_given``: ``--max-running-requests`` when set (0.5.23: it caps the default ``cuda_graph_max_bs``,
    ``memory_hook.py``; 0.4.x: the request pool holds it + 1); ``pool_requests``: the request pool's size (the resolved
    ``max_running_requests``, ``get_batch_sizes_to_capture``)."""
    ver = parse_sglang_version(engine_version) if engine_version else SGLANG_LATEST
    if SGLANG_LISTS_NOT_READ[0] <= ver < SGLANG_LATEST:
        return None
    smi_mib = gpu.nvidia_smi_mib or gpu.memory_bytes / (1 << 20)
    max_bs = sglang_version_defaults(ver, smi_mib, tp, pp).cuda_graph_max_bs
    if ver < SGLANG_LISTS_NOT_READ[0]:
        # the default pool holds clamp(…, 2048, 4096) + 1 requests (model_runner.py init_memory_pool): above every size
        sizes = capture_sizes_04(ver, max_bs, max_running_given + 1 if max_running_given else None)
        return sizes, (
            f"SGLang {sglang_version_text(ver)} pads each decode batch to the next captured CUDA-graph size (1, 2, 4, "
            f"8–160 by 8, up to cuda_graph_max_bs {max_bs}, server_args.py; above it eager, unpadded) — "
            "model_executor/cuda_graph_runner.py, read in 0.4.0, 0.4.0.post1, 0.4.1 and 0.4.3; " + SGLANG_OVERLAP_NOTE)
    max_bs = min(max_bs, max_running_given) if max_running_given else max_bs
    return decode_capture_sizes(max_bs, pool_requests=pool_requests), (
        f"SGLang {sglang_version_text(ver)} pads each decode batch to the next captured CUDA-graph size (1, 2, 4, 8, "
        f"12, 16–256 by 8, 272–496 by 16, 512+ by 32, up to cuda_graph_max_bs {max_bs}; above it eager) — "
        "arg_groups/cuda_graph_hook.py, model_executor/runner/base_cuda_graph_runner.py; overlap scheduling "
        "(managers/scheduler.py event_loop_overlap, on unless --disable-overlap-schedule): a step takes max(GPU, CPU); "
        "its one-step lag in seeing results is not modelled")
