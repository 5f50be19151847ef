"""Speculative decoding through the simulator, without changing it: a step-cost wrapper prices each decode step as a
speculative round, and the workload is re-expressed in rounds.

The simulator (``kvledger.dynamics``) produces one token per running request per decode step. A
speculative round yields T ∈ {1, …, k+1} tokens with P(T = j) = α^(j−1)(1 − α) for j ≤ k and
P(T = k+1) = α^k (i.i.d. acceptance; its mean is Leviathan et al.'s E). So each request's N output
tokens become ``1 + R`` simulated tokens: the first from prefill, then R rounds whose T's, drawn from
an explicit seed, first sum to ≥ N − 1. ``SpecRoundStepCost`` prices a decode step as k draft steps
plus a verification of k+1 tokens per sequence; the records get their N back afterwards, so TPOT and
throughput count real tokens and each ITL gap is one round (a chunk of T tokens, as streamed).

What this leaves out, and what the simulator would need to model it exactly: KV grows by one slot per
round instead of T (the output part of the KV is under-counted by up to a factor E — small when prompts
dominate), the k lookahead slots and k+1 verification tokens do not count against the block pool or
``max_num_batched_tokens``. An ``EngineConfig.num_speculative_tokens`` with a per-step tokens-per-request
hook in ``Replica`` (sampling T per request) would remove all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kvledger.accounting.stepcost import StepShape, decode_steps_by_loop
from kvledger.accounting.vllm_spec_verify import verify_step_costs
from kvledger.analyses.judgments.spec_decode import SpecDecodeModel
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable

__all__ = ["SpecSweep", "SpecRoundStepCost", "rounds_for_tokens", "spec_workload", "run_spec_sweep", "auto_rates",
           "sweep_sentence", "rate_verdict", "KEEPS_PACE_RATIO"]


class SpecRoundStepCost:
    """StepCostModel whose decode steps are speculative rounds: k draft steps + a verification of k+1 tokens each, on
    the roofline inside ``simulate``'s step cost, with its host term once per step (``SpecDecodeModel.priced``)."""

    name = "roofline + speculative rounds"

    def __init__(self, sm: SpecDecodeModel) -> None:
        self.sm, self.rc, self.k = sm, sm.rc, sm.k

    def step_time_s(self, shape: StepShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        dec, kvd, k = shape.num_decode_seqs, shape.decode_kv_tokens, self.k
        if dec == 0:
            return self.sm.priced(self.rc.time_s(self.rc.costs(shape)), shape.num_prefill_tokens, shape.num_seqs)
        # each decoding sequence with ℓ KV tokens verifies k+1 tokens after ℓ−1: (k+1)ℓ + k(k+1)/2 pairs, ℓ+k KV tokens
        c = verify_step_costs(self.rc, dec, kvd, k, as_decode=self.sm.verify_as_decode, prefill=shape)
        base = self.rc.time_s(self.rc.costs(StepShape(num_decode_seqs=dec, decode_kv_tokens=kvd)))
        # the host term once per engine step, judged on the step as scheduled (its verify tokens are not prompts)
        return self.sm.priced(self.rc.time_s(c) + self._draft_s(dec, kvd, base), shape.num_prefill_tokens,
                              shape.num_seqs)

    def _draft_s(self, dec: int, kvd: int, base_s: float) -> float:
        d = self.sm.draft
        if d.kind == "free":
            return 0.0
        if d.kind == "fraction":
            return self.k * d.cost_fraction * base_s
        rd = self.sm.draft_rc
        return self.k * rd.time_s(rd.costs(StepShape(num_decode_seqs=dec, decode_kv_tokens=kvd)))

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        return decode_steps_by_loop(self, num_seqs, kv_tokens, num_steps)


def rounds_for_tokens(num_tokens: int, draft_tokens: int, acceptance: float, rng: np.random.Generator) -> int:
    """Rounds until the round yields T = min(Geometric(1 − α), k + 1) sum to ≥ ``num_tokens``, count (0 for 0
    tokens)."""
    if num_tokens <= 0:
        return 0
    if acceptance >= 1.0:
        return math.ceil(num_tokens / (draft_tokens + 1))
    t = np.minimum(rng.geometric(1.0 - acceptance, size=num_tokens), draft_tokens + 1)
    return int(np.searchsorted(np.cumsum(t), num_tokens)) + 1


def spec_workload(requests: list[RequestSpec], draft_tokens: int, acceptance: float,
                  seed: int | np.random.Generator) -> list[RequestSpec]:
    """The same requests with ``num_output_tokens`` replaced by 1 + rounds (drawn in request order from ``seed``)."""
    from kvledger.dynamics.workload.synthetic import make_rng

    rng = make_rng(seed)
    return [replace(r, num_output_tokens=1 + rounds_for_tokens(r.num_output_tokens - 1, draft_tokens, acceptance, rng))
            for r in requests]


def _metrics(result, real_outputs: dict[str, int] | None) -> dict[str, Any]:
    """TTFT/TPOT/ITL/E2E and throughput of a SimResult, with the real output-token counts restored."""
    from kvledger.dynamics.outputs.metrics import summarize_records
    from kvledger.records import RunRecords

    run = result.records
    if real_outputs is not None:
        recs = [replace(r, num_output_tokens=real_outputs[r.request_id]) if r.ok else r for r in run.records]
        run = RunRecords(recs, run.metadata)
    s = summarize_records(run)
    return {"throughput_output_tok_per_s": s.throughput_output_tok_per_s, "ttft_s": s.ttft_s.to_dict(),
            "tpot_s": s.tpot_s.to_dict(), "itl_s": s.itl_s.to_dict(), "e2e_s": s.e2e_s.to_dict(),
            "num_finished": s.num_finished, "num_preemptions": result.summary.num_preemptions}


@dataclass(frozen=True)
class SpecSweep:
    """Plain and speculative decoding simulated over request rates (``run_spec_sweep``).

    Attributes:
        num_requests, prompt_tokens, output_tokens, seed, arrivals: the workload of each rate.
        base_blocks / spec_blocks: the KV pool of the plain engine and of the speculative one (draft's share taken).
        rates: per rate the plain and spec metrics, the TPOT, TTFT and throughput ratios and the verdict.
        method: how the rounds are simulated.
    """

    num_requests: int
    prompt_tokens: int
    output_tokens: int
    seed: int
    arrivals: str
    base_blocks: int
    spec_blocks: int
    rates: list[dict[str, Any]]
    method: str = ("StepCostModel wrapper + workload in rounds (kvledger.analyses.judgments.spec_sim); see its "
                   "docstring for what is left out")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def run_spec_sweep(sm: SpecDecodeModel, rates_per_s: list[float], *, num_requests: int = 200,
                   prompt_tokens: int = 1024, output_tokens: int = 256, seed: int = 0) -> SpecSweep:
    """Simulate plain and speculative decoding over request rates (Poisson arrivals, fixed lengths) on one replica.

    Raises:
        InputError: no rates, a rate ≤ 0, too few requests, or lengths the plan cannot hold.
    """
    from kvledger.dynamics.simulator import EngineConfig, simulate
    from kvledger.dynamics.workload.synthetic import Fixed, synthetic_workload

    if not rates_per_s or any(not (r > 0) for r in rates_per_s):
        raise InputError(f"--rates must be request rates > 0 req/s, got {rates_per_s!r}")
    if num_requests < 2 or prompt_tokens < 1 or output_tokens < 2:
        raise InputError("the sweep needs ≥ 2 requests, prompts ≥ 1 token and outputs ≥ 2 tokens")
    p = sm.plan
    m = p.memory
    if prompt_tokens + output_tokens > m.max_model_len:
        raise InputError(f"prompt + output = {prompt_tokens + output_tokens:,} tokens exceeds max_model_len "
                         f"{m.max_model_len:,}")
    hybrid = p.layout is not None and len(p.layout.groups) > 1
    common = dict(max_model_len=m.max_model_len, block_size=m.block_size,
                  max_num_batched_tokens=m.max_num_batched_tokens,
                  max_num_seqs=m.max_num_seqs, enable_prefix_caching=False,
                  blocks_for_tokens=p.blocks_for_tokens if hybrid else None)
    cfg_base = EngineConfig(num_gpu_blocks=m.num_gpu_blocks, **common)
    cfg_spec = EngineConfig(num_gpu_blocks=max(2, sm.pool_blocks()), **common)
    base_cost, spec_cost = sm.cost, SpecRoundStepCost(sm)  # the plain engine: simulate's step cost itself
    out = []
    for rate in rates_per_s:  # each rate's draws from the seed alone: a rate's row is the same wherever it is listed
        reqs = synthetic_workload(num_requests, rate_per_s=rate, prompt=Fixed(prompt_tokens),
                                  output=Fixed(output_tokens),
                                  seed=seed, id_prefix="spec")
        real = {r.request_id: r.num_output_tokens for r in reqs}
        b = _metrics(simulate(reqs, cfg_base, base_cost), None)
        s = _metrics(simulate(spec_workload(reqs, sm.k, sm.alpha, seed + 10_000), cfg_spec, spec_cost), real)
        tb, ts = b["tpot_s"]["p50"], s["tpot_s"]["p50"]
        row = {"rate_per_s": rate, "base": b, "spec": s, "tpot_p50_ratio": ts / tb if tb and ts else None,
               "ttft_p50_ratio": _ratio(s["ttft_s"]["p50"], b["ttft_s"]["p50"]),
               "throughput_ratio": (s["throughput_output_tok_per_s"] / b["throughput_output_tok_per_s"]
                                    if b["throughput_output_tok_per_s"] else None)}
        row["verdict"], row["verdict_because"] = rate_verdict(row)
        out.append(row)
    return SpecSweep(num_requests, prompt_tokens, output_tokens, seed, "Poisson (Gamma CV 1), first request at t = 0",
                     cfg_base.num_gpu_blocks, cfg_spec.num_gpu_blocks, out)


def auto_rates(sm: SpecDecodeModel, prompt_tokens: int, output_tokens: int) -> list[float]:
    """Rates from light load to past plain decode's saturation: 0.1, 0.3, 0.6, 0.9, 1.2 × the rate at which a full pool
    of requests at the mean context (prompt + output/2) just keeps up, req/s."""
    ctx = prompt_tokens + output_tokens // 2
    b = max(1, min(sm.plan.memory.max_num_seqs, _requests_at(sm, ctx)))
    sat = sm.row(b, ctx).base_tok_per_s / output_tokens
    return [float(f"{f * sat:.3g}") for f in (0.1, 0.3, 0.6, 0.9, 1.2)]


def _requests_at(sm: SpecDecodeModel, ctx: int) -> int:
    from kvledger.accounting.plan import concurrency_rows

    p = sm.plan
    return concurrency_rows(p.memory, p.layout, p.kv, p.inflight_tokens, [ctx])[0].max_requests


KEEPS_PACE_RATIO = 0.97
"""Spec-over-plain output throughput at or above this counts as keeping pace: while both engines keep up with the same
Poisson arrivals, throughput is set by the arrivals and the ratio sits within a few % of 1; below it the speculative
engine's queue grows and its requests finish later."""


def _ratio(spec: float | None, base: float | None) -> float | None:
    return spec / base if spec is not None and base else None


def rate_verdict(row: dict[str, Any]) -> tuple[str, list[str]]:
    """("ahead" or "behind", the figures that decided it) for one rate of :func:`run_spec_sweep`.

    Ahead: median TPOT and median E2E lower and output throughput ≥ :data:`KEEPS_PACE_RATIO` × plain's. Behind:
    anything else — throughput below it (no longer keeping up with the arrivals), or TPOT or E2E not lower.
    """
    b, s = row["base"], row["spec"]
    why = []
    thr, tpot = row.get("throughput_ratio"), row.get("tpot_p50_ratio")
    e2e = _ratio(s["e2e_s"]["p50"], b["e2e_s"]["p50"])
    if thr is not None and thr < KEEPS_PACE_RATIO:
        why.append(f"output throughput × {thr:.2f}: it no longer keeps up with the arrivals")
    if tpot is not None and tpot >= 1.0:
        why.append(f"median TPOT × {tpot:.2f}")
    if e2e is not None and e2e >= 1.0:
        why.append(f"median E2E × {e2e:.2f}")
    return ("behind" if why else "ahead"), why


def _join(values: list[float]) -> str:
    return ", ".join(f"{v:g}" for v in values[:-1]) + (" and " if len(values) > 1 else "") + f"{values[-1]:g}"


def sweep_sentence(sim: SpecSweep) -> str:
    """The sweep in words, from the figures the table prints: per rate the TPOT, TTFT and throughput ratios, and
    where speculative decoding is ahead or behind (:func:`rate_verdict`)."""
    rows = [r for r in sim.rates if r["tpot_p50_ratio"] is not None]
    if not rows:
        return "The simulator sweep produced no TPOT figures (no request finished with more than one output token)."
    rates = " / ".join(f"{r['rate_per_s']:g}" for r in rows)

    def series(f) -> str:
        return " / ".join("—" if f(r) is None else f"{f(r):.2f}" for r in rows)

    ttft = lambda r: _ratio(r["spec"]["ttft_s"]["p50"], r["base"]["ttft_s"]["p50"])  # noqa: E731
    s = (f"Simulator ({sim.num_requests} requests of {sim.prompt_tokens:,} + {sim.output_tokens:,} tokens, "
         f"Poisson "
         f"arrivals), speculative vs plain at {rates} req/s: median TPOT × {series(lambda r: r['tpot_p50_ratio'])}, "
         f"median "
         f"TTFT × {series(ttft)}, output throughput × {series(lambda r: r['throughput_ratio'])}.")
    verdicts = [(r, *rate_verdict(r)) for r in rows]
    ahead = [r["rate_per_s"] for r, v, _ in verdicts if v == "ahead"]
    behind = [(r, why) for r, v, why in verdicts if v == "behind"]
    slower_ttft = [r["rate_per_s"] for r in rows if r["rate_per_s"] in ahead and (ttft(r) or 0) > 1.0]
    where = "" if not slower_ttft or slower_ttft == ahead else f" at {_join(slower_ttft)} req/s"  # _join needs a value
    caveat = (f" (with a higher median TTFT{where}: a prompt's prefill shares its step with a speculative round, which "
              "takes longer than a plain decode step)") if slower_ttft else ""
    if not behind:
        return s + f" It stays ahead at every rate tried: lower median TPOT and E2E at the same throughput{caveat}."
    first, why = behind[0]
    detail = (f"; at {first['rate_per_s']:g} req/s " + ", ".join(why)
              + f" (TTFT p50 {_ms(first['base']['ttft_s']['p50'])} → {_ms(first['spec']['ttft_s']['p50'])})")
    lost = _join([r["rate_per_s"] for r, _ in behind])
    if not ahead:
        return s + f" Speculative decoding is behind at every rate tried{detail}."
    return s + f" Speculative decoding is ahead at {_join(ahead)} req/s{caveat} and behind at {lost} req/s{detail}."


def _ms(x: float | None) -> str:
    from kvledger.units import fmt_duration

    return "—" if x is None else fmt_duration(x)
