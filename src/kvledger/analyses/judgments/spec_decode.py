"""Speculative decoding as a statement about load: tokens per verification step, the verification cost on the roofline
at the running batch, and the concurrency where the gain turns into a loss.

Expected tokens per verification step with draft length k and i.i.d. per-token acceptance α
(Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding", ICML 2023,
eq. 1): ``E = (1 − α^(k+1)) / (1 − α)`` (``k + 1`` when α = 1).

Per round each running sequence pays k draft steps and one verification step. Verification pushes
k+1 tokens per sequence through the weights (FLOPs × (k+1), weight bytes read once) and attends them
to the sequence's KV (read once); logits are computed at all k+1 positions. Steps are priced with the
GEMMs and attention in sequence (``RooflineStepCost.time_s``). While the GEMMs are
bandwidth-bound verification costs about one decode step, so a round yields E tokens for ~1 step: a
gain. Once batch × (k+1) tokens pass the GEMMs' ridge crossover (docs/engine-model.md §6.1–§6.3) their time
grows with every verified token, and past the point where (k+1)× the GEMM FLOPs plus the draft cost
more than E plain steps, the round loses. Long contexts delay this: KV reads, the same in both, dilute it. The draft is
a model (its own roofline: k decode steps at the same batch and context), a fraction of the target's
decode step per draft token (MTP / EAGLE heads), or free (n-gram / prompt lookup).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.plan import Plan
from kvledger.accounting.plan_roofline import roofline_terms
from kvledger.accounting.roofline import RooflineStepCost, StepCosts
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.vllm_spec_verify import verify_runs_as_decode, verify_step_costs
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.analyses.judgments.roofline_terms import weights_bound
from kvledger.analyses.judgments.spec_mtp import mtp_weight_bytes_per_gpu
from kvledger.analyses.serving.plan_pricing import PricingFlags, simulate_step_cost, split_host
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import DoesNotFitError, InputError
from kvledger.jsonable import to_jsonable
from kvledger.ranges import check_options
from kvledger.units import cdiv, fmt_bytes

__all__ = ["expected_tokens_per_step", "DraftSpec", "SpecSummary", "SpecRow", "SpecDecodeModel", "verify_shape"]


def expected_tokens_per_step(acceptance: float, draft_tokens: int) -> float:
    """E[tokens per verification step] = (1 − α^(k+1)) / (1 − α), tokens (Leviathan et al. 2023, eq. 1).

    Raises:
        InputError: α or k outside its range (``kvledger.ranges``: α in [0, 1], k in [1, 64]).
    """
    if isinstance(draft_tokens, bool) or not isinstance(draft_tokens, int):
        raise InputError(f"--draft-tokens must be an integer, got {draft_tokens!r}")
    check_options("spec-decode", {"draft_tokens": draft_tokens, "acceptance": acceptance})  # kvledger.ranges
    if acceptance == 1.0:
        return float(draft_tokens + 1)
    return (1 - acceptance ** (draft_tokens + 1)) / (1 - acceptance)


def verify_shape(batch: int, context_tokens: int, draft_tokens: int) -> StepShape:
    """``batch`` sequences each verifying k+1 tokens after ``context_tokens − 1`` computed ones (causal pairs
    counted)."""
    n, prior = draft_tokens + 1, context_tokens - 1
    pairs = n * prior + n * (n + 1) / 2
    return StepShape(num_prefill_tokens=batch * n, num_prefill_seqs=batch, prefill_kv_tokens=batch * (prior + n),
                     prefill_attn_pairs=batch * pairs)


@dataclass(frozen=True)
class DraftSpec:
    """Where draft tokens come from.

    Attributes:
        kind: "model" (a draft model on the same GPUs), "fraction" (an MTP/EAGLE head costing a share of the
            target's decode step per draft token) or "free" (n-gram / prompt lookup: no GPU work).
        name: the draft model, or a description. cost_fraction: for "fraction", the share, 0–1.
    """

    kind: str
    name: str
    cost_fraction: float = 0.0
    model: ModelSpec | None = field(default=None, repr=False, compare=False)
    mtp: bool = False  # the target's own MTP layers (spec_mtp.py): their weights counted as vLLM shares them

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self, exclude=("model", "mtp"))


@dataclass(frozen=True)
class SpecSummary:
    """The speculative setting in figures: the draft, k, α, the expected tokens per round (E) and the draft's memory.

    Attributes:
        draft: where draft tokens come from; draft_tokens: k; acceptance: α, per token.
        expected_tokens_per_round: E = (1 − α^(k+1)) / (1 − α), tokens (``expected_tokens_per_step``).
        draft_weight_bytes_per_gpu / draft_kv_bytes_per_token_per_gpu: the draft model's share of each GPU, B.
        pool_blocks_with_draft / pool_blocks_without_draft: the KV pool after and before the draft's share, blocks.
        notes: what the figures assume.
    """

    draft: DraftSpec
    draft_tokens: int
    acceptance: float
    expected_tokens_per_round: float
    draft_weight_bytes_per_gpu: float
    draft_kv_bytes_per_token_per_gpu: float
    pool_blocks_with_draft: int
    pool_blocks_without_draft: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class SpecRow:
    """One batch size at one context (per GPU).

    Attributes:
        batch: sequences, count. context_tokens: KV per sequence, tokens.
        base_step_s: one plain decode step, s. verify_step_s: one verification of k+1 tokens per sequence, s.
        draft_s: the k draft steps of a round, s. round_s: draft + verify, s.
        tokens_per_round: E, tokens per sequence. speedup: E × base / round (>1: a gain), ×.
        base_tok_per_s / spec_tok_per_s: output tokens per second over the batch, tok/s.
        base_bound / verify_bound: "memory" or "compute". fits: ``batch`` requests fit the (spec) KV pool.
    """

    batch: int
    context_tokens: int
    base_step_s: float
    verify_step_s: float
    draft_s: float
    round_s: float
    tokens_per_round: float
    speedup: float
    base_tok_per_s: float
    spec_tok_per_s: float
    base_bound: str
    verify_bound: str
    fits: bool


class SpecDecodeModel:
    """Round costs of speculative decoding for one target plan, draft and (k, α)."""

    def __init__(self, plan: Plan, draft: DraftSpec, draft_tokens: int, acceptance: float,
                 pricing: PricingFlags | None = None) -> None:
        self.plan, self.draft, self.k, self.alpha = plan, draft, draft_tokens, acceptance
        self.expected = expected_tokens_per_step(acceptance, draft_tokens)
        # plain and speculative steps priced alike, as `simulate` prices the deployment (plan_pricing.py): the
        # roofline's FLOPs and bytes, then the engine's host term once per engine step (a round is one step)
        self.cost, self.step_cost = simulate_step_cost(plan, pricing)
        self.rc, self.host = split_host(self.cost)
        self.notes: list[str] = [f"warning: {plan.nodes.text}"] if plan.nodes else []  # plan's node rule
        self.verify_as_decode, why = verify_runs_as_decode(plan.settings.engine, plan.memory.engine_version,
                                                           plan.gpu.arch, any(g.kind == "mla" for g in plan.kv.groups))
        self.notes += [f"verification: {why}"] if why else []
        self.draft_rc: RooflineStepCost | None = None
        self.draft_weight_bytes = 0.0
        self.draft_kv_bytes_per_token = 0.0
        if draft.kind == "model":
            self._init_draft_model(draft.model)
        elif draft.kind == "fraction":
            check_options("spec-decode", {"draft_cost_fraction": draft.cost_fraction})

    def _init_draft_model(self, dm: ModelSpec | None) -> None:
        if dm is None:
            raise InputError("a 'model' draft needs its ModelSpec")
        s = self.plan.settings
        tp = s.tp
        try:
            kv = kv_ledger(dm, s.kv_cache_dtype, tp)
        except InputError:
            tp = 1
            kv = kv_ledger(dm, s.kv_cache_dtype, 1)
            self.notes.append(f"draft {dm.name} cannot split over TP {s.tp}; priced at TP 1 (its full weights on each "
                              f"GPU)")
        # the terms a plan of the draft at its own TP would price it with (roofline_terms: the fractions, the custom
        # all-reduce bound, EP, the tuned-or-default fused-MoE config factor of a MoE draft), not the target's weight
        # bytes or online FP8 (vLLM's draft takes its own checkpoint); the target's measured GEMM curve where it applies
        ds = replace(s, tp=tp, weights_bytes=None, quantization=None)
        self.draft_rc = RooflineStepCost(dm, self.plan.gpu, kv, tp, cpu_overhead_s=s.cpu_overhead_s,
                                         gemm_curve=getattr(self.rc, "gemm_curve", None),
                                         **roofline_terms(dm, self.plan.gpu, ds))
        self.draft_weight_bytes = (mtp_weight_bytes_per_gpu(dm, tp, self.plan.memory.engine_version) if self.draft.mtp
                                   else weight_bytes_per_gpu(dm, tp)[0])
        self.draft_kv_bytes_per_token = kv.bytes_per_token
        if dm.num_params >= self.plan.model.num_params:
            self.notes.insert(0, f"warning: the draft model has {dm.num_params / 1e9:,.1f} B parameters, not fewer "
                              f"than the target's {self.plan.model.num_params / 1e9:,.1f} B: a draft is meant to be "
                              "much cheaper than the target; check --draft-model")

    def priced(self, gpu_s: float, num_prefill_tokens: int, num_seqs: int) -> float:
        """A step's time with the host term (``HostOverhead.step``; unchanged without one), s: ``self.cost``'s
        ``step_time_s`` when ``gpu_s`` is the roofline's time of the same step."""
        return gpu_s if self.host is None else self.host.step(gpu_s, num_prefill_tokens, num_seqs)

    def bound(self, c: StepCosts) -> str:
        """The weight GEMMs' bound (what turns compute-bound as batch × (k+1) grows)."""
        return weights_bound(self.rc, c)

    def verify_costs(self, batch: int, context_tokens: int) -> StepCosts:
        """FLOPs and bytes of one verification step (vllm_spec_verify.py: MLA's decode path where vLLM takes it)."""
        return verify_step_costs(self.rc, batch, batch * context_tokens, self.k, as_decode=self.verify_as_decode)

    def draft_s(self, batch: int, context_tokens: int, base_step_s: float) -> float:
        """Time of the k draft steps of one round, s."""
        if self.draft.kind == "free":
            return 0.0
        if self.draft.kind == "fraction":
            return self.k * self.draft.cost_fraction * base_step_s
        return self.k * self.draft_rc.time_s(self.draft_rc.costs(decode_shape(batch, context_tokens)))

    def row(self, batch: int, context_tokens: int) -> SpecRow:
        cb = self.rc.costs(decode_shape(batch, context_tokens))
        base_gpu = self.rc.time_s(cb)
        cv = self.verify_costs(batch, context_tokens)
        ver_gpu = self.rc.time_s(cv)
        dr = self.draft_s(batch, context_tokens, base_gpu)  # a draft head's fraction is of the GPU step
        # one engine step each: the verification is a decode step of `batch` sequences (V1 graphs it as one)
        base, ver, rnd = (self.priced(t, 0, batch) for t in (base_gpu, ver_gpu, ver_gpu + dr))
        return SpecRow(batch, context_tokens, base, ver, dr, rnd, self.expected, self.expected * base / rnd,
                       batch / base, batch * self.expected / rnd, self.bound(cb), self.bound(cv),
                       batch <= self.max_requests(context_tokens))

    def speedup(self, batch: int, context_tokens: int) -> float:
        return self.row(batch, context_tokens).speedup

    def flip_batch(self, context_tokens: int, max_batch: int) -> int | None:
        """Smallest batch ≤ ``max_batch`` at which the round is slower than plain decode (speed-up < 1); None if
        none."""
        return self.crossing(context_tokens, 1, max_batch, loss=True)

    def crossing(self, context_tokens: int, start: int, max_batch: int, *, loss: bool) -> int | None:
        """Smallest batch in [``start``, ``max_batch``] at which the round loses (``loss``: speed-up < 1) or gains
        (speed-up ≥ 1); None if none. Searched on batches doubling from ``start``, then bisected between the last
        batch without it and the first with it (one crossing assumed between two probes)."""
        def hit(b: int) -> bool:
            return (self.speedup(b, context_tokens) < 1.0) == loss

        prev, b = start - 1, start
        while b <= max_batch:
            if hit(b):
                lo, hi = prev, b  # no hit at lo (or lo = start − 1), a hit at hi
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if hit(mid) else (mid, hi)
                return hi
            if b == max_batch:
                return None
            prev, b = b, min(max_batch, 2 * b)
        return None

    def pool_blocks(self) -> int:
        """Blocks of the target's page size left when the draft's weights and KV share the pool, blocks.

        vLLM adds the draft's attention layers to the KV cache groups, so each token costs the target's plus the
        draft's KV bytes, and the draft's weights come out of the memory the pool would have had.
        """
        m = self.plan.memory
        if self.draft.kind != "model":
            return m.num_gpu_blocks
        per_token = self.plan.kv.bytes_per_token + self.draft_kv_bytes_per_token
        avail = m.available_kv_bytes - self.draft_weight_bytes
        return max(0, int(avail // (per_token * m.block_size)))

    def max_requests(self, context_tokens: int) -> int:
        """Whole requests of ``context_tokens`` (+ k lookahead slots) that fit the spec-decode pool, count."""
        per_req = self.plan.blocks_for_tokens(context_tokens + self.k) if self.draft.kind != "model" else \
            cdiv(context_tokens + self.k, self.plan.memory.block_size)
        usable = max(0, self.pool_blocks() - 1)  # block 0 is the null block; a pool the draft emptied holds none
        return usable // per_req if per_req else 0

    def require_pool(self) -> None:
        """Raise where the draft model's weights and KV leave the pool too short for one request of max_model_len
        (vLLM's start-up check, on the pool left after the draft's share: ``pool_blocks``).

        Raises:
            DoesNotFitError: nothing can start (exit 3), with the draft's share and the blocks.
        """
        if self.draft.kind != "model":
            return
        m = self.plan.memory
        usable, need = max(0, self.pool_blocks() - 1), cdiv(m.max_model_len, m.block_size)
        if usable >= need:
            return
        warn = [n for n in self.notes if n.startswith("warning:")]
        raise DoesNotFitError(
            f"speculative decoding with the draft {self.draft.name} does not fit: its weights "
            f"({fmt_bytes(self.draft_weight_bytes, both=False)} per GPU) and KV "
            f"({self.draft_kv_bytes_per_token:,.0f} B per token) come out of the KV pool's "
            f"{fmt_bytes(m.available_kv_bytes, both=False)}, leaving {self.pool_blocks():,} of "
            f"{m.num_gpu_blocks:,} blocks ({usable:,} usable), but one request of max_model_len "
            f"{m.max_model_len:,} tokens needs {need:,} blocks, so vLLM could not start; choose a smaller draft, more "
            f"TP or a lower --max-model-len" + (f". {warn[0][0].upper()}{warn[0][1:]}" if warn else ""))

    def summary(self) -> SpecSummary:
        return SpecSummary(self.draft, self.k, self.alpha, self.expected, self.draft_weight_bytes,
                           self.draft_kv_bytes_per_token, self.pool_blocks(), self.plan.memory.num_gpu_blocks,
                           list(self.notes))
