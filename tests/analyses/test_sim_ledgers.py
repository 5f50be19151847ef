"""Simulated runs for the ledgers (kvledger.analyses.serving.sim_ledgers) and the simulator-driven SLO-boundary search
(sim_boundary)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvledger.analyses.serving.probe_length import probe_too_short
from kvledger.analyses.serving.sim_boundary import search_sim_boundary
from kvledger.analyses.serving.sim_ledgers import SyntheticSpec, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import InputError, UnknownNameError
from kvledger.ledgers import boundary_from_sweep, goodput, parse_slo

MODEL = "meta-llama/Llama-3.1-8B"
ARGS = SimRequestArgs(model=MODEL, gpu="H100", trace="azure-conv", num_requests=200)


def test_metadata_the_ledgers_need():
    sim = simulate_run(replace(ARGS, num_requests=300))
    md = sim.run.metadata
    assert len(sim.run.records) == 300 and md.source == "simulator" and md.model == sim.setup.model_name
    # one replica at TP 1 = 1 GPU; the price table's key for an H100 SXM is nvidia_h100_sxm
    assert md.num_gpus == 1 and md.extra["gpu_id"] == "nvidia_h100_sxm" and md.hardware == "NVIDIA H100 80GB SXM5"
    # offered rate = (n − 1) ÷ arrival span of the first 300 azure-conv requests, read independently of the simulator
    specs = load_trace("azure-conv", num_requests=300)
    assert md.request_rate == pytest.approx(299 / (specs[-1].arrival_s - specs[0].arrival_s))
    # vLLM's max_num_seqs default on a ≥ 70 GiB GPU is 1024 (EngineConfig docstring; docs/engine-model.md §1.3)
    assert md.extra["max_num_seqs"] == 1024 and md.extra["tp"] == 1
    prov = sim.provenance()
    assert prov.plan.num_gpu_blocks == sim.result.config["num_gpu_blocks"]
    assert prov.plan.kv_bytes_per_token_per_gpu == 131_072  # 2 × 32 layers × 8 KV heads × 128 × 2 B
    assert prov.step_cost["name"] == "roofline" and "vLLM v1 scheduling rule" in prov.simulator
    assert list(prov.to_dict())[:3] == ["simulator", "model", "gpu"] and prov.to_dict()["plan"]["block_size"] == 16
    lines = sim.source_lines()
    assert lines[0].startswith("simulated run: kvledger simulator") and lines[1].startswith("step cost: roofline")
    # no ".0" in the B per token
    assert f"{prov.plan.num_gpu_blocks:,} blocks × 16 tokens per replica (131,072 B per token per GPU)" in lines[2]


def test_provenance_names_the_rule_that_was_simulated():
    # --policy presets (dynamics/from_plan.py POLICY_PRESETS): sglang → batching "sglang" with SGLang's radix prefix
    # caching; static → batching "static", caching off; contiguous → the v1 rule with kv_allocation "contiguous",
    # caching off. Async scheduling is vLLM v1's (0.33 default on, continuous batching only), so only the v1 runs say
    # it.
    head = "kvledger simulator (kvledger.dynamics.simulator.simulate; deterministic, no wall clock): "
    cases = ((None, "vLLM v1 scheduling rule (preemption by recompute) — iteration-level", "paged", "vllm", True),
             ("sglang", "SGLang 0.5.x scheduling rule — SGLang's scheduler (managers/scheduler.py", "paged", "sglang",
              False),
             ("static", "static batching — a batch is formed from waiting requests", "paged", "off", False),
             ("contiguous", "vLLM v1 scheduling rule (preemption by recompute) — iteration-level", "contiguous", "off",
              True))
    for policy, rule, kv, caching, is_async in cases:
        sim = simulate_run(replace(ARGS, num_requests=20, policy=policy))
        text = sim.provenance().simulator
        assert text.startswith(head + rule), text
        assert f"; {kv} KV: " in text and "; queue order fcfs; " in text
        assert (
            f"; prefix caching {caching}" in text and text.endswith("; async scheduling (batch queue of 2)") == is_async
        )
        assert ("vLLM v1" in text) == (policy in (None, "contiguous"))
        assert sim.source_lines()[0].startswith("simulated run: " + head + rule)


def test_gpu_count_is_replicas_times_tp():
    sim = simulate_run(replace(ARGS, num_requests=40, tp=2, replicas=2, router="least_loaded"))
    assert sim.run.metadata.num_gpus == 4 and sim.provenance().router == "least_loaded"


def test_synthetic_workload_is_seeded_and_priced_per_token():
    args = replace(ARGS, num_requests=100, rate=5.0, seed=7)
    syn = SyntheticSpec("fixed:512", "fixed:64")
    a, b = simulate_run(args, syn), simulate_run(args, syn)
    assert a.run.records == b.run.records  # same seed, same records (no wall clock, no hidden RNG)
    assert {(r.num_prompt_tokens, r.num_output_tokens) for r in a.run.records} == {(512, 64)}
    g = goodput(a.run, parse_slo("ttft=1s"))
    # every good request carries 64 output tokens: good tok/s = good × 64 ÷ duration
    assert g.goodput_output_tok_per_s == pytest.approx(g.num_good * 64 / g.duration_s)
    assert a.setup.workload_info["trace"].startswith("synthetic (prompt fixed:512, output fixed:64")
    other = simulate_run(replace(args, seed=8), syn)
    assert [r.arrival_s for r in other.run.records] != [r.arrival_s for r in a.run.records]


def test_rate_boundary_agrees_with_a_direct_sweep():
    slo = parse_slo("ttft=200ms,tpot=30ms")
    sb = search_sim_boundary(ARGS, slo, 0.9, "rate")  # bracket found by doubling from 1 req/s
    b = sb.boundary
    assert b.boundary_value is not None and b.first_failing_value is not None
    # doubling 1, 2, 4, … stops at the first miss, hi; bisection then stops within 1 % of hi (the default resolution)
    bracket = [p for p in sb.probes if p.phase == "bracket"]
    assert [p.value for p in bracket] == [2.0 ** k for k in range(len(bracket))] and not bracket[-1].meets_target
    assert all(p.meets_target for p in bracket[:-1]) and sb.probes[-1].phase == "bisection"
    assert 0 < b.first_failing_value - b.boundary_value <= bracket[-1].value / 100
    # an independent sweep on a grid: every rate up to the boundary meets the target with a run long enough to show
    # it, every rate past the first failure misses it or is too short to show it (more than half its 200 requests in
    # the system at its last arrival: kvledger.analyses.serving.probe_length; at 14.625 req/s 98% meet the SLO)
    step = b.boundary_value / 8
    grid = [step * k for k in range(1, 13)]
    runs = [simulate_run(replace(ARGS, rate=r)).run for r in grid]
    att = [goodput(r, slo).attainment for r in runs]
    short = [probe_too_short(r, "open loop") is not None for r in runs]
    assert all(a >= 0.9 and not s for r, a, s in zip(grid, att, short) if r <= b.boundary_value)
    assert all(a < 0.9 or s for r, a, s in zip(grid, att, short) if r >= b.first_failing_value)
    # the ledgers' sweep over the same simulated runs, those long enough, reads the offered rate from their metadata
    swept = boundary_from_sweep([r for r, s in zip(runs, short) if not s], slo, 0.9)
    assert swept.boundary_value == pytest.approx(max(r for r in grid if r <= b.boundary_value), rel=1e-9)
    assert sb.boundary_per_gpu == b.boundary_value and sb.goodput_at_boundary_req_per_s == pytest.approx(
        goodput(simulate_run(replace(ARGS, rate=b.boundary_value)).run, slo).goodput_req_per_s)


def test_max_num_seqs_boundary_is_exact_on_integers():
    # a closed loop of 64 users (an open loop at a rate the engine cannot sustain would miss at every max_num_seqs: its
    # queue grows, kvledger.analyses.serving.queue_growth.probe_queue_grew): TPOT rises with the batch it allows
    slo = parse_slo("tpot=12ms")
    args = replace(ARGS, concurrency=64)
    sb = search_sim_boundary(args, slo, 0.9, "max_num_seqs", lo=1, hi=64)
    att = {m: goodput(simulate_run(replace(args, max_num_seqs=m)).run, slo).attainment for m in range(1, 65)}
    meets = [m for m in range(1, 65) if att[m] >= 0.9]
    # precondition for bisection: attainment crosses the target once (it wiggles by ±0.5 % elsewhere, one request in
    # 200)
    assert meets == list(range(1, len(meets) + 1)) and 1 < len(meets) < 64
    assert sb.boundary.boundary_value == len(meets) and sb.boundary.first_failing_value == len(meets) + 1
    assert sb.boundary_per_gpu is None and any("per-replica engine setting" in n for n in sb.notes)
    assert len(sb.probes) <= 9  # 2 ends + ⌈log2 63⌉ bisection steps


def test_bad_input_is_a_clear_error():
    slo = parse_slo("ttft=1s")
    with pytest.raises(InputError, match="search varies request_rate, so --rate cannot be given"):
        search_sim_boundary(replace(ARGS, rate=3.0), slo, 0.9, "rate")
    with pytest.raises(InputError, match="unknown search axis 'qps'"):
        search_sim_boundary(ARGS, slo, 0.9, "qps")
    with pytest.raises(InputError, match="need --lo < --hi"):
        search_sim_boundary(ARGS, slo, 0.9, "rate", lo=5, hi=2)
    with pytest.raises(InputError, match=r"^--lo 0 is out of range; allowed: \(0, 1,000,000,000\]$"):
        search_sim_boundary(ARGS, slo, 0.9, "rate", lo=0.0, hi=2)  # goodput's --lo range: kvledger.ranges
    with pytest.raises(InputError, match=r"must be a whole number ≥ 1, got 2.5"):
        search_sim_boundary(ARGS, slo, 0.9, "max_num_seqs", lo=2.5, hi=8)
    with pytest.raises(InputError, match=r"^attainment target 1\.5 is out of range; allowed: \(0, 1\] \(share of "):
        search_sim_boundary(ARGS, slo, 1.5, "rate")
    with pytest.raises(InputError, match="synthetic workload needs --rate"):
        simulate_run(replace(ARGS, num_requests=10), SyntheticSpec("fixed:8", "fixed:8"))
    with pytest.raises(InputError, match="not understood"):
        simulate_run(replace(ARGS, num_requests=10, rate=1.0), SyntheticSpec("gauss:8", "fixed:8"))
    with pytest.raises(UnknownNameError):
        simulate_run(replace(ARGS, gpu="H1000"))


def test_a_rising_attainment_is_reported_not_hidden():
    # a TTFT SLO under load: max_num_seqs = 1 queues everyone (misses), the engine default serves them (meets). At 15
    # req/s the 100 requests are long enough to show it (at 30 req/s more than half are still in the system at the last
    # arrival, a run too short to tell: kvledger.analyses.serving.probe_length)
    sb = search_sim_boundary(replace(ARGS, num_requests=100, rate=15.0), parse_slo("ttft=1s"), 0.9, "max_num_seqs",
                             hi=256)
    assert sb.boundary.boundary_value is None
    assert [(p.value, p.meets_target, p.phase) for p in sb.probes] == [(1.0, False, "bisection"), (256.0, True,
        "check")]
    assert any(
        n.startswith("attainment rises with max_num_seqs here: 1 misses the target but 256 meets it") for n in sb.notes
    )
