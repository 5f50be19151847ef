"""The version-by-version vLLM memory profile against real start-up logs (derivations in the comments)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.vllm_profile import (
    ACTIVATION_FIXED_BYTES,
    CUDAGRAPH_BYTES_PER_GRAPH,
    CUDAGRAPH_FIRST_CAPTURE_BYTES,
    SAMPLER_BYTES_PER_LOGIT_SORT,
    activation_peak,
    cudagraph_estimate,
    moe_workspace_bytes,
    non_torch,
    pp_stages,
    stage_model,
)
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB, MiB

CFG = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "configs"
LLAMA = str(CFG / "meta-llama--Llama-3.1-8B-Instruct.json")
V19, V16 = (0, 19, 0), (0, 16, 0)


def test_sampler_peak_from_the_0_19_code_matches_the_log():
    # 0.19, 1,024 dummy requests × 128,256 vocab × (2 bf16 logits + 4 fp32 copy + 4 probs + 4 noise) B = 1.7124 GiB
    # + Triton top-k/top-p buffer 132 SMs × 128,256 × 4 B = 0.0631 GiB + hidden states 8,192 × 4,096 × 2 B = 0.0625 GiB
    # + 0.05 GiB fixed = 1.888 GiB; the log prints "torch peak memory increase: 1.89GiB".
    peak, src = activation_peak(load_model(LLAMA), V19, 8192, 1024)
    want = 1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2 + ACTIVATION_FIXED_BYTES
    assert peak == want and round(peak / GiB, 2) == 1.89 and "Triton" in src


def test_qwen3_14b_drop_at_0_17_is_reproduced_without_fitting_to_it():
    # The campaign's version sweep logs 5.64 GiB in 0.15/0.16 and 2.23 GiB from 0.17 (not used in any fit).
    # 0.16: 1,024 × 151,936 × (2 + 35.95) B + 8,192 × 5,120 × 2 B + 0.05 GiB = 5.627 GiB;
    # 0.17: 1,024 × 151,936 × 14 B + 132 × 151,936 × 4 B + 0.078 + 0.05 GiB = 2.231 GiB.
    m = load_model(str(CFG / "Qwen--Qwen3-14B.json"))
    assert activation_peak(m, V16, 8192, 1024)[0] / GiB == pytest.approx(5.64, abs=0.015)
    assert activation_peak(m, (0, 17, 0), 8192, 1024)[0] / GiB == pytest.approx(2.23, abs=0.005)


def test_sort_era_constant_reproduces_the_older_logs():
    # vllm_memory_observations.csv (pre-0.17): Llama-3.1-8B 4.76 and Qwen3-0.6B 5.56 GiB (fitted), gpt-oss-20b 7.38 (not
    # fitted;
    # MXFP4 experts keep no bf16 fused-MoE workspace): 1,024 × 201,088 × 37.95 B + 8,192 × 2,880 × 2 B + 0.05 GiB = 7.37
    # GiB.
    qwen06 = str(Path(__file__).parents[1] / "fixtures" / "configs" / "Qwen3-0.6B.json")
    for name, logged in ((LLAMA, 4.76), (qwen06, 5.56), ("openai/gpt-oss-20b", 7.38)):
        assert activation_peak(load_model(name), V16, 8192, 1024)[0] / GiB == pytest.approx(logged, abs=0.012), name
    assert SAMPLER_BYTES_PER_LOGIT_SORT == pytest.approx(35.95)


def test_moe_workspace_is_held_through_the_sampler():
    # Mixtral-8x7B at TP 2 (0.19 log: 1.21 GiB): workspaces 8,192 tokens × top-2 × (max(7,168, 4,096) + max(14,336,
    # 4,096))
    # × 2 B = 0.65625 GiB on top of the sampler 1,024 × 32,000 × 14 B + 132 × 32,000 × 4 B + 8,192 × 4,096 × 2 B + 0.05
    # GiB.
    m = load_model(str(CFG / "mistralai--Mixtral-8x7B-Instruct-v0.1.json"))
    assert moe_workspace_bytes(m, V19, 8192, 2) == 8192 * 2 * (7168 + 14336) * 2
    assert activation_peak(m, V19, 8192, 1024, 2)[0] / GiB == pytest.approx(1.21, abs=0.005)


def test_pp_split_and_stage_terms_for_llama_pp4():
    # get_pp_indices: 32 layers / 4 = 8 each. Stage weights (0.19 log: 4.26, 3.28, 3.28, 4.26 GiB): 8 layers of
    # 218,112,000
    # params × 2 B + the 0.98 GiB embedding (first) or LM head + norm (last) + 32 MiB RoPE cache on every stage.
    # Activation: middle stages forward 8,192 × (4·4,096 + 3·14,336) × 2 B + PP buffers 8,192 × 2 × 4,096 × 2 B + 0.05
    # GiB
    # = 1.081 GiB (logged 1.05); the last stage has the sampler: 1.888 + 0.125 = 2.013 GiB (logged 2.01).
    m = load_model(LLAMA)
    st = pp_stages(32, 4)
    assert [(s.start_layer, s.end_layer) for s in st] == [(0, 8), (8, 16), (16, 24), (24, 32)]
    w = [weight_bytes_per_gpu(stage_model(m, s))[0] / GiB for s in st]
    assert [round(x, 2) for x in w] == [4.26, 3.28, 3.28, 4.26]
    act = [activation_peak(stage_model(m, s), V19, 8192, 1024, 1, s)[0] / GiB for s in st]
    assert act[1] == pytest.approx(1.05, abs=0.035) and act[3] == pytest.approx(2.01, abs=0.005)
    # remainder 2 → stages 2, 1
    assert [(s.start_layer, s.end_layer) for s in pp_stages(30, 4)] == [(0, 7), (7, 15), (15, 23), (23, 30)]


def test_non_torch_by_version_tp_and_pp():
    # 0.19 logs: 0.24–0.25 GiB at TP 1, 2.06–2.07 at TP 2, 2.13–2.17 at TP 4, 0.07 at PP 2/4; 0.13 before 0.18.
    assert [round(non_torch(V19, tp, 1)[0] / GiB, 2) for tp in (1, 2, 4)] == [0.25, 2.07, 2.13]
    assert round(non_torch(V19, 1, 4)[0] / GiB, 2) == 0.07 and round(non_torch(V16, 1, 1)[0] / GiB, 2) == 0.13


def test_cudagraph_estimate_follows_the_code_sum():
    # profile_cudagraph_memory: max(first captures) + Σ modes (n − 1) × per-graph. Llama-3.1-8B's 0.19 log:
    # max(138, 260) + 50 × 6 + 50 × 6 = 860 MiB = 0.84 GiB, as printed. With the fitted 244 MiB and 5 MiB:
    # 244 + 2 × 50 × 5 = 744 MiB; with 4 capture sizes (max_num_seqs 2): 244 + 2 × 3 × 5 = 274 MiB.
    assert CUDAGRAPH_FIRST_CAPTURE_BYTES == 244 * MiB and CUDAGRAPH_BYTES_PER_GRAPH == 5 * MiB
    assert cudagraph_estimate(51)[0] == 744 * MiB and cudagraph_estimate(4)[0] == 274 * MiB
