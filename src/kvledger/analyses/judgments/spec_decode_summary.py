"""The speculative-decoding analysis for one model and GPU: rows over batch size, the flip concurrency by context,
saturation throughput, and the verdict in words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import PlanSettings
from kvledger.analyses.judgments.spec_decode import DraftSpec, SpecDecodeModel, SpecRow, SpecSummary
from kvledger.analyses.judgments.spec_mtp import MTP_NAME, mtp_draft_model
from kvledger.analyses.plans import require_kv_pool
from kvledger.analyses.serving.plan_pricing import PricingFlags, priced_settings
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ranges import check_options
from kvledger.units import fmt_bytes, fmt_duration, fmt_ratio

if TYPE_CHECKING:
    from kvledger.analyses.judgments.spec_sim import SpecSweep

__all__ = ["make_draft", "SpecReport", "analyse_spec_decode", "NGRAM_DEFAULT"]


def make_draft(draft_model: str | None = None, draft_cost_fraction: float | None = None,
               target: Any = None) -> DraftSpec:
    """The draft from the CLI choices: a model name/path, a cost fraction, or neither (n-gram: free); a draft model
    whose vocabulary differs from ``target``'s (a ModelSpec) is refused, as vLLM refuses it.

    Raises:
        InputError: both given, a fraction outside its range (kvledger.ranges), or a draft model of another
            vocabulary size than the target's.
        UnknownNameError/ConfigError: a bad model.
    """
    if draft_model and draft_cost_fraction is not None:
        raise InputError("give either --draft-model or --draft-cost-fraction, not both")
    if draft_model and draft_model.strip().lower() == MTP_NAME:  # vLLM's method mtp: the target's own MTP layers
        dm = mtp_draft_model(target)
        return DraftSpec("model", dm.name, 0.0, dm, mtp=True)
    if draft_model:
        from kvledger.catalog.models import load_model

        m = load_model(draft_model)
        if target is not None and m.vocab_size != target.vocab_size:  # vLLM config/speculative.py
            raise InputError(f"--draft-model {m.name} has a vocabulary of {m.vocab_size:,} tokens and "
                             f"{target.name} of {target.vocab_size:,}: vLLM refuses a draft model whose vocabulary "
                             "size differs from the target's (config/speculative.py: "
                             "SpeculativeConfig.verify_equal_vocab_size_if_draft_model); give a draft of the same "
                             "family")
        return DraftSpec("model", m.name, 0.0, m)
    if draft_cost_fraction is not None:
        check_options("spec-decode", {"draft_cost_fraction": draft_cost_fraction})  # kvledger.ranges
        return DraftSpec("fraction",
                         f"draft head at {draft_cost_fraction:g} × the target's decode step per draft token",
                             draft_cost_fraction)
    return DraftSpec("free", NGRAM_DEFAULT)


NGRAM_DEFAULT = "n-gram prompt lookup (default; no --draft-model given)"
"""The draft without --draft-model or --draft-cost-fraction: vLLM's n-gram proposer, drafting with no GPU work, so
the most optimistic case (only the verification is paid)."""


@dataclass(frozen=True)
class SpecReport:
    """The whole analysis; ``to_dict`` is the JSON of ``kvledger spec-decode --json``.

    Attributes:
        summary: draft, k, α, E, draft memory. context_tokens: the context of ``rows``, tokens.
        rows: per batch size at that context. flips: per context, the flip batch and the pool's limits.
        saturation: plain vs spec throughput with the pool full at ``context_tokens``.
        weight_crossover_tokens: tokens per step at which the weight matmuls turn compute-bound.
        simulation: the request-rate sweep (``kvledger.analyses.judgments.spec_sim``), when run.
        step_cost: the step cost that priced plain and speculative steps, as ``simulate`` describes it.
    """

    model: str
    gpu: str
    settings: dict[str, Any]
    summary: SpecSummary
    context_tokens: int
    rows: tuple[SpecRow, ...]
    flips: tuple[dict[str, Any], ...]
    saturation: dict[str, Any]
    weight_crossover_tokens: float
    verdict: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    simulation: SpecSweep | None = None
    step_cost: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _saturation(sm: SpecDecodeModel, ctx: int, max_seqs: int, base_requests: int) -> dict[str, Any]:
    bb = max(0, min(max_seqs, base_requests))
    bs = max(0, min(max_seqs, sm.max_requests(ctx)))
    base = sm.row(bb, ctx) if bb else None
    spec = sm.row(bs, ctx) if bs else None
    return {"context_tokens": ctx, "base_batch": bb, "spec_batch": bs,
            "base_tok_per_s": base.base_tok_per_s if base else 0.0,
                "spec_tok_per_s": spec.spec_tok_per_s if spec else 0.0}


def _flip_cause(sm: SpecDecodeModel, r: SpecReport, row: SpecRow, b: int) -> str:
    k = sm.k
    if row.draft_s > row.verify_step_s - row.base_step_s:
        return "the draft's k steps, which read the draft's own weights and KV, are most of the added cost"
    if sm.plan.model.is_moe and row.verify_bound == "memory":
        return (f"the verification, memory-bound, reads every expert its {b * (k + 1):,} tokens route to (up to "
                f"k + 1 = {k + 1} times plain decode's per sequence) and is most of the added cost")
    return (f"the verification GEMMs ({b * (k + 1):,} tokens per step, ridge crossover ≈ "
            f"{r.weight_crossover_tokens:,.0f}) are {row.verify_bound}-bound and most of the added cost")


def _regain_sentence(sm: SpecDecodeModel, f: dict[str, Any], c: int) -> str:
    """The gain that comes back above the flip (an MoE: plain decode already reads most experts at larger batch)."""
    g, g2 = f["gain_again_batch"], f["loss_again_batch"]
    why = (": plain decode's own step already reads most experts there, so verifying k + 1 tokens per sequence adds "
           "few expert reads" if sm.plan.model.is_moe else "")
    pool = "" if g <= f["spec_pool_max_batch"] else (f"; beyond the {f['spec_pool_max_batch']:,} requests of this "
                                                     "length the spec-decode pool holds")
    until = "up to max_num_seqs" if g2 is None else f"until {g2:,}, where it loses again"
    return (f" From {g:,} concurrent sequences on it gains again ({fmt_ratio(sm.speedup(g, c))} at {g:,}{why}{pool}), "
            f"{until}.")


def _flip_sentence(sm: SpecDecodeModel, r: SpecReport, f: dict[str, Any], c: int) -> str:
    b = f["flip_batch"]
    row = sm.row(b, c)
    where = ("within the KV pool" if f["within_pool"] else
             f"beyond the {f['spec_pool_max_batch']:,} requests of this length the spec-decode pool holds, so not "
             f"reached here")
    costs = (f"a round costs {fmt_duration(row.draft_s)} draft + {fmt_duration(row.verify_step_s)} verification "
             f"against {row.tokens_per_round:.2f} × {fmt_duration(row.base_step_s)} of plain decode; "
             f"{_flip_cause(sm, r, row, b)}")
    if f.get("gain_again_batch") is not None:  # a loss window, not a flip for good
        head = (f"At {c:,} tokens speculative decoding loses from 1 sequence on: {costs}." if b == 1 else
                f"The gain turns into a loss at {b:,} concurrent sequences ({c:,} tokens; {where}): {costs}.")
        return head + _regain_sentence(sm, f, c)
    if b == 1:  # a loss from the first sequence on: there was no gain to turn
        return (f"There is no gain at {c:,} tokens: already at 1 sequence, {costs}. Speculative decoding costs more "
                "than it yields at every batch.")
    return (f"The gain turns into a loss at {b:,} concurrent sequences ({c:,} tokens; {where}): {costs}. Above it, "
            "speculative decoding costs more than it yields.")


def _span(x: dict[str, Any]) -> str:
    """One context's flip in words: never, a batch, or a loss window followed by a gain."""
    f, g, g2 = x["flip_batch"], x.get("gain_again_batch"), x.get("loss_again_batch")
    if f is None:
        return "never"
    if g is None:
        return f"batch {f:,}" + ("" if x["within_pool"] else " (beyond the pool)")
    return (f"a loss at batch {f:,}" + (f"–{g - 1:,}" if g - 1 > f else "") + f", a gain from {g:,}"
            + (f", a loss again from {g2:,}" if g2 is not None else ""))


def _context_line(r: SpecReport) -> str | None:
    """How the flip batch moves with context (None with one context): a loss from batch 1 everywhere is said as such,
    not as a flip that stays put; a loss window that a gain follows is said with both ends."""
    if not any(x["context_tokens"] != r.context_tokens for x in r.flips):
        return None
    if any(x.get("gain_again_batch") is not None for x in r.flips):
        return "By context (speed-up against batch is not monotone here): " + "; ".join(
            f"{x['context_tokens']:,} tokens: {_span(x)}" for x in r.flips) + "."
    known = [x["flip_batch"] if x["flip_batch"] is not None else float("inf") for x in r.flips]
    if set(known) == {1}:
        return ("It loses from batch 1 at every context checked ("
                + ", ".join(f"{x['context_tokens']:,}" for x in r.flips) + " tokens).")
    why = ("longer contexts push it out: the KV reads, shared by plain decode and verification, dilute the extra work"
           if known == sorted(known) else
           "longer contexts pull it in: the draft reads its own KV k times per round"
           if known == sorted(known, reverse=True) else "it is not monotone in context here")
    head = f"The flip moves with context ({why}): " if len(set(known)) > 1 else "The flip does not move with context: "
    return head + "; ".join(f"{x['context_tokens']:,} tokens: {_span(x)}" for x in r.flips) + "."


def _verdict(r: SpecReport, sm: SpecDecodeModel) -> list[str]:
    k, a, E, c = sm.k, sm.alpha, sm.expected, r.context_tokens
    one = sm.row(1, c)
    out = [f"Each round yields E = (1 − α^(k+1)) / (1 − α) = {E:.3f} tokens per sequence (k = {k} draft tokens, "
           f"i.i.d. acceptance α = {a:g}; Leviathan et al. 2023, eq. 1).",
           f"Low load (batch 1, {c:,} tokens): decode is {one.base_bound}-bound, so verifying {k + 1} tokens costs "
           f"{fmt_duration(one.verify_step_s)} against {fmt_duration(one.base_step_s)} for one; "
           + (f"with the draft's {fmt_duration(one.draft_s)} " if sm.draft.kind != "free" else "with a free (n-gram) "
               "draft ")
           + f"a round takes {fmt_duration(one.round_s)} for {E:.2f} tokens: {fmt_ratio(one.speedup)} "
           f"per sequence (TPOT {fmt_duration(one.base_step_s)} → {fmt_duration(one.round_s / E)})."]
    f = next(x for x in r.flips if x["context_tokens"] == c)
    if f["flip_batch"] is None:
        out.append(f"At {c:,} tokens the gain never turns into a loss up to max_num_seqs: the KV reads, which "
                   f"verification "
                   "shares with plain decode, outweigh the extra GEMM work and the draft.")
    else:
        out.append(_flip_sentence(sm, r, f, c))
    if (moves := _context_line(r)) is not None:
        out.append(moves)
    s = r.saturation
    if s["base_batch"] and s["spec_batch"]:
        out.append(f"With the pool full at {c:,} tokens: plain decode runs {s['base_batch']:,} sequences at "
                   f"{s['base_tok_per_s']:,.0f} tok/s; speculative decoding {s['spec_batch']:,} at "
                   f"{s['spec_tok_per_s']:,.0f} tok/s "
                   f"({fmt_ratio(s['spec_tok_per_s'] / s['base_tok_per_s'])}).")
    if sm.draft.kind == "model":
        out.append(f"The draft model's weights ({fmt_bytes(sm.draft_weight_bytes, both=False)} per GPU) and KV "
                   f"({sm.draft_kv_bytes_per_token:,.0f} B/token) come out of the KV pool: "
                   f"{sm.plan.memory.num_gpu_blocks:,} → "
                   f"{sm.pool_blocks():,} blocks.")
    out.append("Direction as in the vLLM docs (spec decode targets medium-to-low QPS, memory-bound serving); the 2024 "
               "vLLM "
               "blog's 1.4–1.8× slowdowns at high QPS (Llama-3-70B, 4×H100, V0 engine) are a qualitative check only.")
    return out


def analyse_spec_decode(model: ModelSpec, gpu: GpuSpec, settings: PlanSettings | None, *, draft_tokens: int,
                        acceptance: float, draft: DraftSpec, context_tokens: int = 2048,
                        flip_contexts: list[int] | None = None, pricing: PricingFlags | None = None) -> SpecReport:
    """Speculative decoding for ``model`` on ``gpu``: the gain at low load, the flip concurrency, saturation.

    Raises:
        InputError: bad k, α, draft or context (beyond max_model_len); anything build_plan rejects.
    """
    s = settings or PlanSettings()
    s = s if pricing is None else priced_settings(s, gpu, pricing, model)  # the fractions simulate plans with
    plan = build_plan(model, gpu, s.model_copy(update={"contexts": (context_tokens,)}), with_advice=False)
    require_kv_pool(plan)
    max_len, max_seqs = plan.memory.max_model_len, plan.memory.max_num_seqs
    ctxs = sorted({x for x in (flip_contexts or [256, 512, 1024, 2048, 8192,
                                                 32768]) if x <= max_len} | {context_tokens})
    if context_tokens + draft_tokens > max_len or context_tokens < 1:
        raise InputError(f"--context {context_tokens:,} (+ {draft_tokens} draft tokens) must be within "
                         f"1..max_model_len {max_len:,}")
    sm = SpecDecodeModel(plan, draft, draft_tokens, acceptance, pricing)
    sm.require_pool()
    flips = []
    for cx in ctxs:
        f = sm.flip_batch(cx, max_seqs)
        pool = min(max_seqs, sm.max_requests(cx))
        # a loss need not last: an MoE's verification reads more experts than plain decode at small batch only
        g = sm.crossing(cx, f + 1, max_seqs, loss=False) if f is not None and f < max_seqs else None
        g2 = sm.crossing(cx, g + 1, max_seqs, loss=True) if g is not None and g < max_seqs else None
        flips.append({"context_tokens": cx, "flip_batch": f, "spec_pool_max_batch": pool,
                      "within_pool": f is not None and f <= pool, "gain_again_batch": g, "loss_again_batch": g2})
    base_req = plan.concurrency[0].max_requests
    here = next(x["flip_batch"] for x in flips if x["context_tokens"] == context_tokens)
    batches = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if b <= max_seqs}
                     | ({here} if here else set()) | ({min(base_req, max_seqs)} if base_req else set()))
    rows = tuple(sm.row(b, context_tokens) for b in batches)
    sat = _saturation(sm, context_tokens, max_seqs, base_req)
    cross = plan.roofline.weight_matmul_crossover_tokens if plan.roofline else float("nan")
    rep = SpecReport(model.name, gpu.name, s.model_dump() | {"nnodes": plan.settings.nnodes}, sm.summary(),
                     context_tokens, rows, tuple(flips), sat, cross, (), step_cost=sm.step_cost)
    notes = list(sm.notes) + [
        "α is a property of the draft and the traffic (measure it: vLLM reports the mean acceptance length); "
        "acceptance is taken as i.i.d. per token, as in Leviathan et al.",
        "Not priced: rejection sampling, the draft's catch-up on accepted tokens, the k lookahead slots' effect on "
        "max_num_batched_tokens, and host time of the draft's own forward passes: the engine's host term (the step "
        "cost line) is paid once per round, as one engine step.",
        *(["MoE: verifying k+1 tokens per sequence touches more experts, priced under uniform routing "
           "(E·(1 − (1 − top_k/E)^T) experts per layer); consecutive tokens' routing is correlated in practice, so "
           "this "
           "overstates the verification cost at small batch."] if model.is_moe else []),
        "Step times are the step cost `kvledger simulate` uses for this deployment (the step cost line): the roofline "
        "with the weight GEMMs and attention priced in sequence, each the max of its compute and bandwidth terms at "
        "the achievable fractions (RooflineStepCost.time_s), and the engine's host term where one is modelled.",
    ]
    return SpecReport(**{**rep.__dict__, "verdict": tuple(_verdict(rep, sm)), "notes": tuple(notes)})
