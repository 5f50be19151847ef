"""FP8 KV cache for one model on one GPU: the capacity and bandwidth it buys, its cost per step, the decode break-even.

Capacity comes from two ledgers (``build_plan`` with ``kv_cache_dtype`` auto and fp8): the page
halves, blocks and concurrency double (vLLM ``FullAttentionSpec.page_size_bytes``; docs/engine-model.md §1.8).
Step time comes from each ledger's step cost as ``simulate`` prices the deployment
(``analyses.serving.plan_pricing``: the roofline ``RooflineStepCost`` at the GPU profile's or given fractions, with the
engine's host term ``h`` of ``accounting/host_overhead.py`` around it): a decode step reads half the KV bytes in fp8,
plus the FP8 overhead of :mod:`kvledger.analyses.judgments.fp8_calibration`:

    t_bf16 = h(max(F_w / F_peak, W / BW) + max(F_a / F_peak, K_bf16 / BW) + cpu)
    t_fp8  = h(max(F_w / F_peak, W / BW) + max(F_a / F_peak, K_fp8  / BW) + cpu + L_attn·f + x·elements)

(``h``: the engine's CPU time per step added, or with ``--enforce-eager`` the launches as a floor, or nothing where
async scheduling hides it; a CPU time in series cancels in the difference.)

with F_w, F_a the GEMM and attention FLOPs, W the weight bytes, K the KV bytes and BW, F_peak the
achievable peaks (GEMMs and attention priced in sequence by ``RooflineStepCost.time_s``).
Decode attention is bandwidth-bound at any batch, so the weight term cancels and the break-even
context per sequence is

    c* = L_attn·f / (B · (ΔKV bytes per token / BW − x · elements per token))

falling as 1/B with the batch B. It is therefore *derived* for the model, GPU, batch and
calibration — the "~7,000 tokens on Hopper" rule of thumb has no source (docs/engine-model.md §6.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.plan import Plan, build_plan
from kvledger.accounting.roofline import StepCosts
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.settings import PlanSettings
from kvledger.analyses.judgments.fp8_calibration import (
    DEFAULT_FP8_OVERHEAD,
    Fp8Overhead,
    fitted_step_cost,
    kv_layers,
)
from kvledger.analyses.judgments.fp8_capacity import (
    Fp8Capacity,
    capacity,
    default_curve_contexts,
    max_context_holding,
    requests_at,
    start_ups,
)
from kvledger.analyses.judgments.fp8_verdict import fp8_notes, fp8_verdict, measured_disagreements
from kvledger.analyses.judgments.roofline_terms import weights_bound
from kvledger.analyses.plans import require_kv_pool
from kvledger.analyses.serving.plan_pricing import PricingFlags, priced_settings, simulate_step_cost, split_host
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ranges import check_options

__all__ = ["Fp8Point", "BreakEven", "Fp8Capacity", "Fp8Report", "Fp8DecodeModel", "analyse_fp8_kv",
           "max_context_holding", "default_curve_contexts"]


@dataclass(frozen=True)
class Fp8Point:
    """One decode step, bf16 vs fp8 KV (per GPU).

    Attributes:
        context_tokens: KV per sequence, tokens. batch: sequences, count.
        bf16_step_s / fp8_step_s: step times, s. fp8_overhead_s: the overhead inside fp8_step_s, s.
        bf16_kv_bytes / fp8_kv_bytes: KV bytes read + written by the step, B.
        bf16_bound / fp8_bound: "memory" or "compute" (which roofline term is larger).
        fp8_gain_pct: (bf16 − fp8) / bf16 × 100, % (negative: fp8 slower).
        fits_bf16 / fits_fp8: ``batch`` whole requests of this context fit the pool.
    """

    context_tokens: int
    batch: int
    bf16_step_s: float
    fp8_step_s: float
    fp8_overhead_s: float
    bf16_kv_bytes: float
    fp8_kv_bytes: float
    bf16_bound: str
    fp8_bound: str
    fp8_gain_pct: float
    fits_bf16: bool
    fits_fp8: bool


@dataclass(frozen=True)
class BreakEven:
    """Where fp8 decode steps become faster at one batch size.

    Attributes:
        batch: sequences, count.
        context_tokens: smallest context from which fp8 is faster at every longer context, tokens; None if never.
        kind: "always" (faster from the first token), "above" (faster from ``context_tokens``) or "never" (up to max).
        max_context_tokens: the search range's end (max_model_len), tokens.
        closed_form_tokens: c* of the bandwidth-bound formula (module docstring), tokens; None if not positive.
        regime: the bf16 step's bound at the break-even (or at max context when never).
        short_context_bound: the bf16 step's bound at a 1-token context ("compute" once the weight matmuls are).
    """

    batch: int
    context_tokens: int | None
    kind: str
    max_context_tokens: int
    closed_form_tokens: float | None
    regime: str
    short_context_bound: str = "memory"


class Fp8DecodeModel:
    """bf16 and fp8 decode step times for one model on one GPU: each plan's step cost as ``simulate`` prices it
    (``analyses.serving.plan_pricing``: the roofline, a GPU profile's fractions, the engine's host term) + the FP8
    overhead."""

    def __init__(self, plan_bf16: Plan, plan_fp8: Plan, overhead: Fp8Overhead, pricing: PricingFlags | None = None,
                 fitted: str | None = None, bf16_starts: bool = True) -> None:
        self.pb, self.pf, self.overhead = plan_bf16, plan_fp8, overhead
        self.same_cache = plan_bf16.memory.bytes_per_block == plan_fp8.memory.bytes_per_block  # one layout for both
        self.num_kv_layers, self.elem_bytes = kv_layers(plan_bf16.model), plan_fp8.kv.elem_bytes
        if fitted is not None:  # a fit of the measured engine's steps, host time inside its fixed term: as fitted
            self.rb, self.rf, self.host_b, self.host_f = plan_bf16.step_cost(), plan_fp8.step_cost(), None, None
            self.step_cost = fitted_step_cost(self.rb, fitted)
            return
        # both sides priced as `simulate` prices the deployment (plan_pricing.py): the roofline inside, its host term
        # a bf16 pool too short to start: its steps priced under the engine config the fp8 plan starts with
        cost_b, self.step_cost = simulate_step_cost(plan_bf16, pricing, engine_plan=None if bf16_starts else plan_fp8)
        (self.rb, self.host_b), (self.rf, self.host_f) = split_host(cost_b), split_host(
            simulate_step_cost(plan_fp8, pricing)[0])

    def _bound(self, c: StepCosts) -> str:
        """The weight GEMMs' bound (decode attention is bandwidth-bound at any batch)."""
        return weights_bound(self.rb, c)

    def overhead_s(self, c_fp8: StepCosts, batch: int) -> float:
        """The FP8 overhead of a decode step, s; none where both settings store the same cache (one kernel, one
        cache: vLLM on SM120 turns ``auto`` into the packed fp8_ds_mla entry too)."""
        if self.same_cache:
            return 0.0
        elements = (c_fp8.kv_bytes - 2 * self.rf.state_bytes * batch) / self.elem_bytes
        return self.overhead.step_s(self.num_kv_layers, elements)

    def times(self, batch: int, context_tokens: int) -> tuple[float, float, StepCosts, StepCosts, float]:
        """(bf16 step s, fp8 step s, bf16 costs, fp8 costs, fp8 overhead s) of a decode step."""
        shape = decode_shape(batch, context_tokens)
        cb, cf = self.rb.costs(shape), self.rf.costs(shape)
        ov = self.overhead_s(cf, batch)
        tb, tf = self.rb.time_s(cb), self.rf.time_s(cf) + ov  # the FP8 overhead is GPU work: inside the host term's max
        if self.host_b is not None:  # simulate's step_time_s of the shape (host_overhead.HostStepCost)
            tb, tf = self.host_b.step(tb, 0, batch), self.host_f.step(tf, 0, batch)
        return tb, tf, cb, cf, ov

    def gain_s(self, batch: int, context_tokens: int) -> float:
        """bf16 step − fp8 step, s (positive: fp8 faster)."""
        tb, tf, *_ = self.times(batch, context_tokens)
        return tb - tf

    def point(self, batch: int, context_tokens: int) -> Fp8Point:
        tb, tf, cb, cf, ov = self.times(batch, context_tokens)
        fits_b = requests_at(self.pb, context_tokens) >= batch
        fits_f = requests_at(self.pf, context_tokens) >= batch
        return Fp8Point(context_tokens, batch, tb, tf, ov, cb.kv_bytes, cf.kv_bytes, self._bound(cb), self._bound(cf),
                        100 * (tb - tf) / tb, fits_b, fits_f)

    def closed_form(self, batch: int) -> float | None:
        """c* = L·f / (B·(Δbytes/token / BW − x·elements/token)), tokens (bandwidth-bound both sides)."""
        bw = self.rb.bw * self.rb.bandwidth_fraction
        d_bytes = self.pb.kv.growing_bytes_per_token - self.pf.kv.growing_bytes_per_token
        elems = self.pf.kv.growing_bytes_per_token / self.elem_bytes
        per_token = d_bytes / bw - elems * self.overhead.ns_per_element * 1e-9
        if per_token <= 0:
            return None
        return self.num_kv_layers * self.overhead.per_layer_s / (batch * per_token)

    def break_even(self, batch: int, max_context: int) -> BreakEven:
        """Smallest context from which fp8 stays faster, by a geometric scan and integer bisection."""
        n = 96
        grid = sorted({max(1, min(max_context, round(max_context ** (i / (n - 1))))) for i in range(n)})
        gains = [self.gain_s(batch, c) for c in grid]
        cf = self.closed_form(batch)
        short = self._bound(self.times(batch, 1)[2])
        if gains[-1] <= 0:
            return BreakEven(batch, None, "never", max_context, cf, self._bound(self.times(batch, max_context)[2]),
                             short)
        losing = [i for i, g in enumerate(gains) if g <= 0]
        if not losing:
            return BreakEven(batch, 1, "always", max_context, cf, short, short)
        lo, hi = grid[losing[-1]], grid[losing[-1] + 1]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.gain_s(batch, mid) > 0:
                hi = mid
            else:
                lo = mid
        return BreakEven(batch, hi, "above", max_context, cf, self._bound(self.times(batch, hi)[2]), short)


@dataclass(frozen=True)
class Fp8Report:
    """The whole FP8 KV analysis; ``to_dict`` is the JSON of ``kvledger fp8-kv --json``."""

    model: str
    gpu: str
    settings: dict[str, Any]
    overhead: Fp8Overhead
    concurrency: int
    capacity: Fp8Capacity
    break_even: BreakEven
    break_even_by_batch: tuple[BreakEven, ...]
    curve: tuple[Fp8Point, ...]
    verdict: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    headline: dict[str, Any] = field(default_factory=dict)
    """The question asked first: whole requests of ``context_tokens`` each pool holds at once, and why
    ``concurrency`` is what it is (given, or the bf16 pool's capacity at that context)."""
    step_cost: dict[str, Any] = field(default_factory=dict)
    """The step cost that priced both sides, as ``simulate`` describes it (name, source, scope)."""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _headline(pb: Plan, pf: Plan, at: int, concurrency: int | None, start_up: dict) -> dict[str, Any]:
    """The question asked first (``Fp8Report.headline``): whole requests of ``at`` tokens each pool holds, the
    concurrency the speeds are at (given, or the bf16 pool's capacity there, at most max_num_seqs) and why, and both
    pools' start-up checks."""
    n_b, n_f = requests_at(pb, at), requests_at(pf, at)
    if concurrency is None:
        concurrency = max(1, min(n_b, pb.memory.max_num_seqs))
        why = (f"the bf16 pool's capacity at {at:,} tokens ({n_b:,} whole requests" +
               (f", capped at max_num_seqs {pb.memory.max_num_seqs:,})" if n_b > pb.memory.max_num_seqs else ")") +
               "; --concurrency sets another")
    else:
        why = "given (--concurrency)"
    return {"context_tokens": at, "bf16_max_requests": n_b, "fp8_max_requests": n_f, "concurrency": concurrency,
            "concurrency_basis": why, "concurrency_given": why.startswith("given"),
            "max_num_seqs": pb.memory.max_num_seqs, "start_up": start_up}


def analyse_fp8_kv(model: ModelSpec, gpu: GpuSpec, settings: PlanSettings | None = None, *,
                   concurrency: int | None = None,
                   contexts: list[int] | None = None, overhead: Fp8Overhead = DEFAULT_FP8_OVERHEAD,
                   pricing: PricingFlags | None = None, fitted: str | None = None, measured=None) -> Fp8Report:
    """Compare bf16 ("auto") and fp8 KV for ``model`` on ``gpu`` at ``concurrency`` sequences.

    The first question is capacity at the user's context: the first of ``contexts`` (default 8,192 tokens, or
    max_model_len when shorter). Without ``concurrency`` the speed comparison runs at the batch the bf16 pool holds
    at that context (at most max_num_seqs): the load a server filled with such requests decodes at.

    Steps are priced as ``simulate`` prices the deployment under ``pricing`` (``plan_pricing``), unless ``fitted``
    names a fit of the measured engine's bf16 steps (``fit_fp8_overhead``) whose bandwidth fraction and fixed step
    time ``settings`` carry: its fixed time holds the engine's host time, so the roofline prices the steps as fitted
    (fixed time in series, no host term) and the output says so. ``measured``: that model's measured rows on this
    GPU (``Fp8Measurement``), where the verdict says which of them the priced steps contradict.

    Raises:
        InputError: concurrency out of range, a context past max_model_len, KV already 1 byte, or a bad plan.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int | None):
        raise InputError(f"--concurrency must be a whole number of sequences, got {concurrency!r}")
    check_options("fp8-kv", {"concurrency": concurrency})  # [1, 2^20] sequences: kvledger.ranges
    s = settings or PlanSettings()
    s = s if pricing is None else priced_settings(s, gpu, pricing, model)  # the fractions simulate plans with
    s_b = s.model_copy(update={"kv_cache_dtype": "auto", "contexts": tuple(contexts) if contexts else s.contexts})
    pb = build_plan(model, gpu, s_b, with_roofline=False, with_advice=False)
    require_kv_pool(pb)
    if pb.kv.elem_bytes <= 1:
        raise InputError(f"{model.name}: its KV dtype is already {pb.kv.elem_bytes:g} byte per element; fp8 saves "
                         f"nothing")
    pf = build_plan(model, gpu, s_b.model_copy(update={"kv_cache_dtype": "fp8"}), with_roofline=False,
                    with_advice=False)
    max_len = pb.memory.max_model_len
    ctxs = sorted(set(contexts)) if contexts else default_curve_contexts(max_len)
    bad = [c for c in ctxs if c > max_len]
    if bad:
        raise InputError(f"context {bad[0]:,} tokens exceeds max_model_len {max_len:,} (raise --max-model-len)")
    at = contexts[0] if contexts else min(8192, max_len)
    headline = _headline(pb, pf, at, concurrency, start_ups(pb, pf))
    concurrency, st = headline["concurrency"], headline["start_up"]
    dm = Fp8DecodeModel(pb, pf, overhead, pricing, fitted, bool(st["bf16"]["starts"]))
    curve = tuple(dm.point(concurrency, c) for c in ctxs)
    cap_n = min(pb.memory.max_num_seqs, 1024)
    batches = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if b <= cap_n} | {concurrency})
    table = tuple(dm.break_even(b, max_len) for b in batches)
    be = next(t for t in table if t.batch == concurrency)
    cap = capacity(pb, pf, concurrency)
    settings_used = s_b.model_dump() | {"nnodes": pb.settings.nnodes}  # the nodes the plan assumed (node_size.py)
    rep = Fp8Report(model.name, gpu.name, settings_used, overhead, concurrency, cap, be, table, curve, (), (),
                    headline, dm.step_cost)
    notes = ([f"warning: {pb.nodes.text}"] if pb.nodes else []) + fp8_notes(rep, dm)  # plan's node rule (node_size)
    verdict = measured_disagreements(measured, dm) + fp8_verdict(rep, dm)  # first: where your own runs disagree
    return Fp8Report(**{**rep.__dict__, "verdict": tuple(verdict), "notes": tuple(notes)})
