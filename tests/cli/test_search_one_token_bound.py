"""``search`` on a workload whose every output is one token keeps its capacity bound (``work_bounds``).

Why it was lost: ``bounds.candidate_bounds`` bounds tokens/s per user by the TPOTs of the requests of more than one
output token; with none, it returned None for the whole record, the capacity bound with it, so a 60-request probe
that met the target above what a replica can keep pace with was sized on the rate found (3 L4s, $964/month, where
the bound gives 5). The per-user bound is now 0 there (no TPOT: the capacity's tokens/s per user is none, read as 0),
and the others stand."""

from __future__ import annotations

import json
import math

import pytest
from cli_run import run_cli

SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s", "--gpus", "L4", "--tp", "1", "--max-model-len",
          "8K", "--num-requests", "60", "--rate", "50", "--prompt-lengths", "fixed:1000", "--output-lengths", "fixed:1",
          "--backend", "serial", "--gemm-efficiency", "flat"]  # the flat roofline worked below (no carried floors)


def _work_s() -> float:
    """w of one request of P = 1,000 prompt tokens and n = 1 output token (work_bounds' formula, written out here):
    (2·mp·(P + n − 1) + head·n) ÷ (peak · flops fraction · the GEMM curve's highest efficiency) + g·P ÷ (bw ·
    bandwidth fraction), no all-reduce at TP 1 and no decode term ((n − 1) = 0)."""
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.search.spec import Candidate, SearchSpec
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
    from kvledger.analyses.serving.work_bounds import run_lengths

    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s", num_requests=60, max_model_len=8192,
                      rate_req_per_s=50.0, synthetic=SyntheticSpec("fixed:1000", "fixed:1"))
    c, p, n, _ = run_lengths(sim_args(spec, Candidate("nvidia_l4", 1)), spec.synthetic)
    assert set(p) == {1000} and set(n) == {1}
    matmul_rate = c.peak_flops * c.flops_fraction * c.peak_matmul_efficiency()
    return (2 * c.matmul_params * 1000 + c.head_flops_per_seq) / matmul_rate + \
        c.growing_read_bytes * 1000 / (c.bw * c.bandwidth_fraction)


def test_every_output_one_token_keeps_the_capacity_bound():
    res = run_cli(*SEARCH, "--json")
    assert res.exit_code == 0, res.output
    e = json.loads(res.stdout)["candidates"][0]
    b, cap, siz = e["bounds"], e["capacity"], e["sizing"]
    assert b is not None and b["tok_per_s_per_user"] == 0.0 and b["output_tokens_mean"] == 1.0
    # 60 identical requests: k = ⌈0.9 × 60⌉ = 54 good ones take at least 54·w, so the bound is 54 ÷ (54·w) = 1/w
    assert b["capacity_bound_req_per_s"] == pytest.approx(1.0 / _work_s(), rel=1e-6)
    assert b["capacity_bound_req_per_s"] == pytest.approx(14.9152, rel=1e-4)
    # and output tokens/s per GPU ≤ all 60 output tokens ÷ 54·w = (60 / 54) × 14.9152 = 16.5725
    assert b["output_tok_per_s_per_gpu"] == pytest.approx(60 / 54 * b["capacity_bound_req_per_s"], rel=1e-9)
    # the probe met the target at 29.5 req/s, above the bound: sized on the bound, ⌈50 ÷ (14.9152 × 0.8)⌉ = ⌈4.19⌉ = 5
    # replicas, 5 L4s × $0.44/GPU-h × 730 h = $1,606/month
    assert cap["slo_capacity_req_per_s"] == 29.5 and cap["sized_on_req_per_s"] == b["capacity_bound_req_per_s"]
    assert siz["replicas"] == math.ceil(50 / (b["capacity_bound_req_per_s"] * 0.8)) == 5
    assert siz["rental_usd_per_month"] == pytest.approx(5 * 0.44 * 730)
    text = run_cli(*SEARCH).stdout
    assert "SLO capacity 29.5 req/s per replica (29.01 good req/s there), sized on 14.92 req/s, the capacity bound" \
        in text
