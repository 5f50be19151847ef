"""Host time of a vLLM step the roofline does not see: eager kernel launches and V0's synchronous CPU work.

A step of a synchronous engine (vLLM V0: ``worker/model_runner.py :: execute_model`` prepares the inputs, runs the
model, then the sampler copies the sampled tokens to the host — ``.cpu()`` / ``.tolist()`` in
``model_executor/layers/sampler.py`` of 0.2.3 and 0.9.0 — and ``llm_engine.py`` processes the outputs before the next
step is scheduled) takes

    step = max(GPU work, eager launch time) + CPU time in series

* **eager launch time** ``L = (layers × ops per layer + ops outside the layers) × per-op host time``. Without a CUDA
  graph the Python model issues every torch op from the host; the GPU runs behind the host's launches until the
  sampler's sync, so the launches hide under the GPU work when they are shorter (max, not sum). A step runs eager:
  - every step before vLLM 0.2.4 (CUDA graphs came with vllm-project/vllm PR #1926, merged 2023-12-17), and every
    step with ``--enforce-eager``;
  - V0 from 0.2.4 (0.9.0 ``worker/model_runner.py :: _use_captured_graph``): steps with a prompt, and decode steps
    above the largest captured batch or with a context above ``max_seq_len_to_capture`` (8,192 by default; not
    modelled). The largest captured batch: 256 in 0.5.0 (``worker/model_runner.py :: _BATCH_SIZES_TO_CAPTURE``,
    1, 2, 4, 8 … 256), and the smallest of 1, 2, 4, 8, 16, … at or above ``max_num_seqs`` in 0.9.0
    (``config.py :: _set_cudagraph_sizes``, so no decode batch of the run); 0.6–0.8 were not read and take 0.5's;
  - V1 (piecewise CUDA graphs over torch.compile'd code): only with ``--enforce-eager`` here (its compiled, fused ops
    are fewer; the dense count below is then an upper bound).
  Ops per decoder layer: **20** dispatched torch ops in vLLM 0.2.3 (``models/opt.py :: OPTDecoderLayer``: layer norm,
  fused QKV linear, chunk, in ``layers/attention.py :: PagedAttention.forward`` three views, flatten,
  ``reshape_and_cache``, ``empty_like``, ``paged_attention_v1``, view, output linear and its separate bias add
  (``RowParallelLinear``), residual add, layer norm, fc1, ReLU, fc2 and its bias add, residual add;
  ``models/llama.py :: LlamaDecoderLayer`` has 18: fused add-RMSNorm ×2, rotary in one op, ``SiluAndMul`` alloc +
  kernel, no bias adds); **18** in 0.9.0's V0 Llama (``models/llama.py``: fused add-RMSNorm
  ×2, QKV linear, split, rotary, the attention layer's 8 (views, ``reshape_and_cache_flash``, the varlen kernel),
  output linear, gate-up linear, ``SiluAndMul`` (alloc + kernel), down linear). Outside the layers about **12**
  (embedding, final norm, LM head, the sampler's logits, softmax and argmax/multinomial launches). MoE routing adds
  ops that are not counted (a lower bound for MoE).
  Per-op host time **19 µs** (range 15–19 µs): vLLM PR #1440 (2023-10-20, vLLM 0.2.1, Llama-2-7B TP 1, batch 1,
  5 prompt + 100 output tokens) measured 1.20 s eager against 1.05 s with CUDA graphs, 12.0 against 10.5 ms a token:
  the eager step is 1.5 ms longer, so its launches outlast the GPU work and 12.0 ms = L + CPU in series; with the
  CPU term below at batch 1 (0.855 ms) L = 11.145 ms over 32 × 18 + 12 = 588 ops (counted in 0.2.3's llama.py; the
  PR ran 0.2.1, not read), 18.95 µs an op; a CPU term up to 3 ms gives 15.3 µs. Public per-op breakdowns of PyTorch
  eager dispatch give 5–25 µs (Python, pybind11, dispatcher, ``cudaLaunchKernel``). Not fitted on any run kvledger
  validates against.
* **CPU time in series** (V0 only: scheduling, input preparation, sampling, output processing): Vidur's
  ``cpu_overheads.csv`` (microsoft/vidur, MIT, commit 7f14d6a, bundled under ``data/profiling/vidur/cpu_overheads``;
  measured on Sarathi-Serve, "built on top of vLLM" in its V0-era engine loop, A100, batch 8–128): the medians of
  ``schedule + prepare_inputs_e2e + sampler_e2e + process_model_outputs`` are a line in the batch; least squares
  over the TP 1 rows (Llama-2-7B, phi-2: 26 rows) **0.813 ms + 42.3 µs per sequence** (each model alone 0.790/0.836
  ms + 42.6/42.1 µs, residuals ≤ 0.063 ms), over the TP 2–4 rows (CodeLlama-34B, InternLM-20B, Llama-2-70B: 39
  rows, Ray workers) **1.454 ms + 44.3 µs** (each alone 1.39–1.57 ms + 43.0–46.3 µs; Qwen-72B's rows are noisier,
  residuals to 1.5 ms, and left out). A100 host; another host's CPU is not modelled.
* **V1's CPU time** (0.8+; read in vLLM 0.11.0's wheel): ``v1/engine/core.py :: EngineCore.step`` runs
  ``scheduler.schedule()`` → ``model_executor.execute_model()`` → ``scheduler.update_from_output()`` one after the
  other; ``execute_model`` (``v1/worker/gpu_model_runner.py``) prepares the inputs (``_update_states``,
  ``_prepare_inputs``), launches the graph, samples and syncs (``_bookkeeping_sync`` → ``_to_list`` of the sampled
  ids when ``use_async_scheduling`` is off) — so without async scheduling all of it is in series with the GPU:
  **0.5 ms + 20 µs per sequence**. 20 µs (range 12–22): vllm-project/vllm issue #10634 (2024-11-25, V1 with the
  AsyncLLM of PR #9826, Llama-2-7B, batch 256, ShareGPT) measured 5–6 ms between two decode steps, of which 2–3 ms
  it put on GIL contention with the engine core's IPC threads (still there in 0.11's ``core.py``): (5.5 − 0.5) / 256
  = 19.5 µs, (5 − 2) / 256 = 11.7 µs to (6 − 0.3) / 256 = 22.3 µs. 0.5 ms (range 0.3–1.5): an assumption between
  the ~0.2 ms left between steps once the host work is hidden (the residual gap xLLM's async-schedule docs report) and
  vllm PR #17866's V1 decode of Llama-3.2-1B at about one request in flight, 2.73 ms TPOT (GPU not named; ~1 ms of
  weight reads on an H100 would leave ≤ 1.7 ms of host time). Cross-checks: tenstorrent/vllm PR #305 (2026-01, a
  V1 fork, a no-op model so only the host loop is timed) measured 1.15 ms a step at batch 32, and 0.5 + 32 × 0.02 =
  1.14 ms; PR #23569 (2025-08-25), which took input preparation and sampling off the critical path on top of async
  scheduling, expected 5–10% — the share of those two alone. With ``--async-scheduling`` (``step_with_batch_queue``,
  ``AsyncScheduler``; 0.11's ``AsyncGPUModelRunnerOutput`` defers the copy) the engine overlaps it with the GPU: the
  step takes max(GPU, CPU), the roofline's ``overlap_cpu`` rule (``overlap``; with CUDA graphs the serving layer's
  step-cost choice leaves the term out there: the GPU step is the longer but for small models at hundreds of
  sequences). ``--cpu-overhead`` replaces the term (the roofline's
  ``cpu_overhead_s`` is the same per-step CPU time given by hand), as does a GPU profile fitted with host terms. Not
  fitted on any run kvledger validates against.

Only the roofline gets the term. A model-scope step cost — a ``kvledger calibrate --scope model`` profile, a bundled
calibration (DistServe's offline fit of vLLM 0.2.3's iterations) — is fitted to the measured engine's own step or
request times, host time included: its fixed and per-request terms already hold the CPU work and any launches that
outlast the GPU (``calibration/api.py :: build_profile``'s note for a synchronous engine), so adding the term would
count them twice (``step_cost_choice.make_step_cost`` wraps the roofline only). Fitting net of the term instead would,
where the launches hide under the GPU work, only move V0's 0.813 ms and 42.3 µs per decoding request out of ``fixed_s``
and ``decode_seq_s`` (fitted on DistServe's five OPT-13B runs: 23.4 and 0.97 ms, validation.md §2.2) and add 42.3 µs per
prompt to prompt steps, while tying the profile to Vidur's A100 host constants rather than the host that served the
runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.accounting.decode_prices import PLAIN_FLOAT_MAX_STEPS, DecodePrices
from kvledger.accounting.stepcost import StepShape, decode_steps_by_loop, step_pricer
from kvledger.accounting.vllm_predates import GRAPHS_FROM

__all__ = ["HostOverhead", "HostStepCost", "host_overhead_for", "OP_HOST_S", "V0_STEP_S", "V0_SEQ_S", "V1_STEP_S",
           "V1_SEQ_S", "cpu_can_lead", "eager_launch_s"]

OP_HOST_S = 19e-6
"""Host time per dispatched torch op in eager mode, s (module docstring: vLLM PR #1440; range 15–19 µs)."""
OPS_PER_LAYER_023 = 20  # vLLM 0.2.3 models/opt.py OPTDecoderLayer (llama.py: 18), dispatched ops
OPS_PER_LAYER_V0 = 18  # vLLM 0.9.0 V0 models/llama.py LlamaDecoderLayer, dispatched ops
OPS_OUTSIDE_LAYERS = 12  # embedding, final norm, LM head, sampler launches
V0_STEP_S = {1: 0.813e-3, 2: 1.454e-3}
"""V0 CPU time in series per step, s, at TP 1 and at TP > 1 (Vidur cpu_overheads.csv, module docstring)."""
V0_SEQ_S = {1: 42.3e-6, 2: 44.3e-6}
"""V0 CPU time in series per sequence in the step, s (same source)."""
V1_STEP_S = 0.5e-3
"""V1 CPU time per step without async scheduling, s (module docstring: an assumption, range 0.3–1.5 ms)."""
V1_SEQ_S = 20e-6
"""V1 CPU time per sequence in the step, s (module docstring: vllm issue #10634, range 12–22 µs)."""
V1_FROM = (0, 8, 0)  # VLLM_USE_V1 default on from 0.8
V0_GRAPH_MAX_05 = 256  # 0.5.0 worker/model_runner.py _BATCH_SIZES_TO_CAPTURE[-1]
V0_CAPTURE_ALL_FROM = (0, 9, 0)  # 0.9.0 config.py _set_cudagraph_sizes: captures up to ≥ max_num_seqs


def eager_launch_s(num_layers: int, ops_per_layer: int, op_s: float = OP_HOST_S) -> float:
    """Host time to launch one eager forward: (layers × ops per layer + ops outside) × per-op time, s."""
    return (num_layers * ops_per_layer + OPS_OUTSIDE_LAYERS) * op_s


@dataclass(frozen=True)
class HostOverhead:
    """The host term of a step (module docstring).

    Attributes:
        launch_s: eager launch time of one forward, s (0: never eager).
        graph_max_batch: pure-decode steps of more sequences run eager (0: all, no CUDA graphs: < 0.2.4 or
            ``--enforce-eager``).
        eager_prompt: steps with prompt tokens run eager (V0 never graphs them).
        step_s / seq_s: CPU time per step and per sequence in the step, s.
        source: the rule in words.
        overlap: the engine overlaps the CPU time with the GPU (V1's async scheduling): max instead of a sum.
    """

    launch_s: float
    graph_max_batch: int
    eager_prompt: bool
    step_s: float
    seq_s: float
    source: str
    overlap: bool = False

    @property
    def overlapped(self) -> bool:
        """The CPU time overlaps the GPU's and no eager launch runs: the step is max(GPU, CPU)."""
        return self.overlap and not self.launch_s

    def step(self, gpu_s: float, num_prefill_tokens: int, num_seqs: int) -> float:
        """Step time with the host term, s: max(GPU work, eager launches) + CPU in series (overlapped: the max)."""
        if num_seqs == 0 and num_prefill_tokens == 0:
            return gpu_s
        eager = self.eager_prompt if num_prefill_tokens else num_seqs > self.graph_max_batch
        t = gpu_s if not eager or gpu_s >= self.launch_s else self.launch_s
        cpu = self.step_s + self.seq_s * num_seqs
        return (t if t >= cpu else cpu) if self.overlap else t + cpu

    def decode_steps(self, gpus: list[float], num_seqs: int) -> list[float]:
        """``step`` of each pure-decode step of ``num_seqs`` sequences (``num_seqs`` > 0) from its GPU time, s."""
        if num_seqs > self.graph_max_batch:  # eager: max(GPU work, launches), as step's t
            launch = self.launch_s
            gpus = [g if g >= launch else launch for g in gpus]
        cpu = self.step_s + self.seq_s * num_seqs
        return [g if g >= cpu else cpu for g in gpus] if self.overlap else [g + cpu for g in gpus]

    def decode_steps_array(self, gpus: Any, num_seqs: int) -> Any:
        """``decode_steps`` on a float64 array of GPU times: numpy's elementwise max and sum give the floats the list's
        comparisons and sums give (a max returns one of its two operands; no NaN here)."""
        import numpy as np

        if num_seqs > self.graph_max_batch:
            gpus = np.maximum(gpus, self.launch_s)
        cpu = self.step_s + self.seq_s * num_seqs
        return np.maximum(gpus, cpu) if self.overlap else gpus + cpu


def _ver(v: str | None) -> tuple[int, int, int]:
    from kvledger.accounting.vllm_rules import parse_version

    return parse_version(v) if v else (99, 0, 0)


def host_overhead_for(engine: str, engine_version: str | None, num_layers: int, tp: int, *, enforce_eager: bool,
                      batching: str, max_num_seqs: int | None = None, async_scheduling: bool = False,
                      rule_cpu: bool = True) -> HostOverhead | None:
    """The host term of a vLLM step for this version and flags, or None where none is modelled (SGLang,
    TensorRT-LLM; V1 with CUDA graphs when ``rule_cpu`` is off). ``rule_cpu`` off: ``--cpu-overhead`` gives the
    engine's CPU time per step, which replaces the rule's (V0's in series, V1's); eager launches stay (they are priced
    against the GPU work, not as CPU time). ``batching == "vllm_v0"`` marks a V0 engine (``VLLM_USE_V1=0`` or a
    release before 0.8); ``async_scheduling``: V1 overlaps its CPU time with the GPU (max, not a sum). V1's CPU term
    is priced only under its own rule (``batching == "continuous"``), not for the static / contiguous baselines of
    the experiments."""
    if engine != "vllm":
        return None
    ver = _ver(engine_version)
    v0 = batching == "vllm_v0" or ver < V1_FROM
    v1_cpu = rule_cpu and batching == "continuous"  # V1's own loop: not a static or contiguous baseline's
    if not v0 and not enforce_eager and not v1_cpu:
        return None
    no_graphs = enforce_eager or ver < GRAPHS_FROM
    graphs = 0 if no_graphs else (V0_GRAPH_MAX_05 if v0 and (ver < V0_CAPTURE_ALL_FROM or not max_num_seqs)
                                  else 1 << 30)
    ops = OPS_PER_LAYER_023 if ver < GRAPHS_FROM else OPS_PER_LAYER_V0
    launch = eager_launch_s(num_layers, ops) if v0 or enforce_eager else 0.0
    k = 1 if tp == 1 else 2
    step, seq = ((V0_STEP_S[k], V0_SEQ_S[k]) if v0 and rule_cpu else (V1_STEP_S, V1_SEQ_S) if v1_cpu and not v0
                 else (0.0, 0.0))
    overlap = not v0 and async_scheduling
    where = ("every step eager (--enforce-eager)" if enforce_eager else
             "V0: prompt steps eager, decode steps replay CUDA graphs" if v0 else "V1: CUDA graphs, no eager launches")
    src = f"host term (accounting/host_overhead.py): {where}"
    if launch:
        src += (f", launches {num_layers} layers × {ops} ops + {OPS_OUTSIDE_LAYERS} × {OP_HOST_S * 1e6:g} µs = "
                f"{launch * 1e3:.2f} ms against the GPU work (max)")
    if v0 and step:
        src += (f"; V0 CPU in series {step * 1e3:g} ms + {seq * 1e6:g} µs per sequence (Vidur cpu_overheads.csv, "
                "A100)")
    elif step:
        src += (f"; V1 CPU {step * 1e3:g} ms + {seq * 1e6:g} µs per sequence (schedule, input preparation, sampling "
                "sync, output update: vLLM 0.11 engine/core.py; kvledger.accounting.host_overhead), "
                + ("overlapped by async scheduling: max(GPU, CPU)" if overlap else "in series (no async scheduling)"))
    if graphs and graphs < 1 << 30:
        src += f"; decode batches above {graphs} run eager (0.5's largest captured batch)"
    return HostOverhead(launch, graphs, v0 or bool(enforce_eager), step, seq, src, overlap)


class HostStepCost:
    """A step-cost model with a host term (``HostOverhead``) around another; any other attribute is the wrapped
    model's. Pure-decode runs are priced step by step (no plain form), so every path prices the same float."""

    def __init__(self, inner: Any, host: HostOverhead) -> None:
        self.inner, self.host = inner, host
        self.name = f"{inner.name}+host"
        self.price_of = step_pricer(inner)

    def __getattr__(self, attr: str) -> Any:
        if attr in ("inner", "host", "price_of"):  # not yet set (copy / pickle): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def step_time_of(self, num_prefill_tokens: int, num_prefill_seqs: int, prefill_kv_tokens: int,
                     prefill_attn_pairs: float, num_decode_seqs: int, decode_kv_tokens: int) -> float:
        """The wrapped model's price of this step with the host term, s."""
        gpu = self.price_of(num_prefill_tokens, num_prefill_seqs, prefill_kv_tokens, prefill_attn_pairs,
                            num_decode_seqs, decode_kv_tokens)
        return self.host.step(gpu, num_prefill_tokens, num_prefill_seqs + num_decode_seqs)

    def step_time_s(self, shape: StepShape) -> float:
        return self.step_time_of(shape.num_prefill_tokens, shape.num_prefill_seqs, shape.prefill_kv_tokens,
                                 shape.prefill_attn_pairs, shape.num_decode_seqs, shape.decode_kv_tokens)

    def decode_steps_list(self, num_seqs: int, kv_tokens: int, num_steps: int) -> list[float]:
        """``step_time_of`` of each pure-decode step, s: the wrapped model's own list where it has one (bit for bit its
        ``step_time_of``, the StepCostModel contract), the host term applied as ``HostOverhead.step`` applies it."""
        own = getattr(self.inner, "decode_steps_list", None)
        if own is None or num_seqs == 0:
            return [self.step_time_of(0, 0, 0, 0.0, num_seqs, kv_tokens + i * num_seqs) for i in range(num_steps)]
        if getattr(own, "__func__", None) is DecodePrices.decode_steps_list:
            if num_steps > PLAIN_FLOAT_MAX_STEPS:
                # the roofline's list there is its decode_steps_s array listed: the host term applied to the array
                gpus = self.inner.decode_steps_s(num_seqs, kv_tokens, num_steps)
                return self.host.decode_steps_array(gpus, num_seqs).tolist()
            form = self._plain_host(num_seqs)
            if form is not None:  # the roofline's plain list and the host's CPU term in one pass, the same floats
                gemm, g, b, cpu, overlap = form
                kvs = range(kv_tokens, kv_tokens + num_seqs * num_steps, num_seqs)
                if overlap:
                    return [d if (d := gemm + g * x / b) >= cpu else cpu for x in kvs]
                return [gemm + g * x / b + cpu for x in kvs]
        return self.host.decode_steps(own(num_seqs, kv_tokens, num_steps), num_seqs)

    def _plain_host(self, num_seqs: int) -> tuple[float, float, float, float, bool] | None:
        """``(gemm s, KV bytes per token, bandwidth B/s, CPU s, overlapped)`` when a pure-decode step of ``num_seqs``
        sequences is the wrapped roofline's plain ``gemm + g · kv / bw`` (``decode_plain_terms``) with the CPU term
        ``HostOverhead.decode_steps`` applies (no eager launch: a captured batch), else None; memoised per batch
        size."""
        memo = self.__dict__.get("_plain_memo")
        if memo is None:
            memo = self.__dict__["_plain_memo"] = {}
        form = memo.get(num_seqs, 0)
        if form == 0:
            h, terms = self.host, DecodePrices.decode_plain_terms(self.inner, num_seqs)  # the base list's form
            form = None if terms is None or num_seqs > h.graph_max_batch else (
                *terms, h.step_s + h.seq_s * num_seqs, h.overlap)  # decode_steps's cpu, the same expression
            if len(memo) < 4096:
                memo[num_seqs] = form
        return form

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int):
        return decode_steps_by_loop(self, num_seqs, kv_tokens, num_steps)

    def decode_plain_terms(self, num_seqs: int) -> None:
        """No plain form: the host term is not ``gemm + g · kv / bw``."""
        return None


def cpu_can_lead(cost: Any, h: Any, seats: int | None) -> bool:
    """Whether V1's CPU time, ``h.step_s + h.seq_s · n``, can exceed the GPU time of a decode step of n sequences for
    some n up to ``seats`` (each sequence at one token of context, the cheapest step): checked at n = 1, 2, 4, …,
    ``seats``. Where it cannot, max(GPU, CPU) is the GPU time and the roofline's fast paths stay; where it can (a small
    model at many sequences), the overlapped host term prices every step."""
    top = max(1, seats or 1)
    grid = sorted({min(1 << i, top) for i in range(top.bit_length() + 1)})
    price = step_pricer(cost)
    return any(price(0, 0, 0, 0.0, n, n) < h.step_s + h.seq_s * n for n in grid)
