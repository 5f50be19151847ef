"""vLLM's profile run under DP + EP: each GPU's MoE layers run every DP rank's rows (vllm_dp_moe.py), hand-worked.

Read in vLLM 0.19.0 and 0.33.0: every rank dummy-runs max_num_batched_tokens, the default all2all_backend
(allgather_reducescatter) all_gatherv's them over the DP group (AgRsAll2AllManager.dispatch), there is no DP chunking
for it (0.19 default_moe_runner.py::use_dp_chunking: deepep_low_latency, mori, flashinfer_nvlink_two_sided, nixl_ep
only; 0.33 none), and modular_kernel.py::_fused_experts sizes the kept workspaces with M_full = the gathered rows.
So the fresh-user trial's worry holds: nothing caps the rows at the default backend.

Qwen3-235B-A22B (bf16): hidden 4,096, 128 routed experts of intermediate 1,536, top-8, no shared expert, vocabulary
151,936. DeepSeek-V3 (block FP8): hidden 7,168; its KV 61 × (512 + 64) × 2 B = 70,272 B a token, at any TP.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_dp_moe import gathered_hidden_bytes, moe_profile_rows
from kvledger.accounting.vllm_profile import activation_peak, moe_workspace
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB

QWEN = "Qwen/Qwen3-235B-A22B"


@pytest.fixture(scope="module")
def qwen():
    return load_model(QWEN)


def test_rows_are_every_dp_rank_s_under_ep_only(qwen):
    assert moe_profile_rows(qwen, 8192, 8, 8) == 65_536  # DP 8 × TP 1, EP 8: 8 × 8,192
    assert moe_profile_rows(qwen, 8192, 1, 8) == 8192  # TP 8 + EP, DP 1: every TP rank has every token already
    assert moe_profile_rows(qwen, 8192, 8, 1) == 8192  # no EP (the plan refuses MoE DP without it)
    dense = load_model("Qwen/Qwen3-8B")
    assert moe_profile_rows(dense, 8192, 4, 1) == 8192 and gathered_hidden_bytes(dense, 8192, 4, 1) == 0.0
    # the all_gatherv output: 65,536 × 4,096 × 2 B = 536,870,912 B (0.5 GiB), live while a MoE layer runs
    assert gathered_hidden_bytes(qwen, 8192, 8, 8) == 536_870_912


def test_triton_workspace_grows_dp_fold_for_qwen3_235b(qwen):
    # bf16 on H100, EP: whole experts, I = 1,536. Triton kept: M × 8 × (max(1,536, 4,096) + max(3,072, 4,096)) × 2 B
    # = M × 131,072 B: 8,192 rows 1 GiB, 65,536 rows 8,589,934,592 B (8 GiB)
    for ver in ((0, 19, 0), (0, 33, 0)):
        assert moe_workspace(qwen, ver, 65_536, 1, "sm90", 8)[0] == 8_589_934_592 == 8 * GiB
        one = activation_peak(qwen, ver, 8192, 1024, 1, arch="sm90", ep=8, dp=1)[0]
        dp8, why = activation_peak(qwen, ver, 8192, 1024, 1, arch="sm90", ep=8, dp=8)
        # the sampler stays the peak (1,024 × 151,936 × 14 B = 2.03 GiB against a forward of 8,192 × 4·4,096 × 2 B
        # + the 0.5 GiB gathered = 0.75 GiB), so the difference is the workspace's 7 GiB = 7,516,192,768 B
        assert dp8 - one == 7_516_192_768
        assert "MoE rows 65,536 = DP 8 × 8,192" in why and "AgRsAll2AllManager" in why


def test_the_trials_plan_no_longer_fits(qwen):
    # `plan Qwen/Qwen3-235B-A22B --gpu H100 --tp 1 -dp 8 --enable-expert-parallel` (vLLM 0.33.0) planned 0.88 GiB of
    # KV with an activation peak of 3,452,914,483 B: sampler 1,024 × 151,936 × (2 + 12) B = 2,178,154,496 + Triton
    # top-k/top-p buffer 132 × 151,936 × 4 B = 80,222,208 + hidden 8,192 × 4,096 × 2 B = 67,108,864 + workspace
    # 1,073,741,824 + fixed 53,687,091. With the 8 GiB workspace: 3,452,914,483 + 7,516,192,768 = 10,969,107,251 B,
    # more than the 0.88 GiB of KV there was: the engine would not start, and the plan says so
    p = build_plan(qwen, resolve_gpu("H100-SXM"), make_settings(tp=1, data_parallel_size=8,
                                                                 enable_expert_parallel=True))
    act = next(d for d in p.memory.deductions if d.name == "activation peak")
    assert act.bytes == 10_969_107_251 and not p.fits
    assert p.data_parallel.moe_profile_tokens == 65_536
    note = next(n for n in p.memory.notes if n.startswith("--data-parallel-size 8"))
    assert "8 × max_num_batched_tokens rows on every GPU" in note and "upper bound" not in note


def test_deepseek_v3_dp8_on_h200_keeps_flashinfer_cutlass_over_the_gathered_rows():
    # block FP8 on Hopper at EP 8: FlashInfer CUTLASS (0.19–0.33 oracle, ep_size > 1), (M, K) over M = 65,536 rows:
    # 65,536 × 7,168 × 2 B = 939,524,096 B, where the plan had Triton's 8,192 × 8 × (7,168 + 7,168) × 2 B =
    # 1,879,048,192 B. The gathered hidden states (0.875 GiB) stay under the MLA profile dummy (4 GiB), so the KV
    # gains 939,524,096 B: ÷ (16 × 70,272 B) = 835.6 blocks, 24,551 → 25,387 (the floor of the whole pool)
    p = build_plan(load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200"),
                   make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True))
    act = next(d for d in p.memory.deductions if d.name == "activation peak")
    assert "65,536 × 7168 × 2 B kept" in act.source and "FI CUTLASS for EP" in act.source
    assert p.memory.num_gpu_blocks == 25_387 == 24_551 + 836
    assert p.memory.available_kv_bytes // (16 * 70_272) == 25_387


def test_pre_015_per_call_caches_stay_chunked_at_32768_rows():
    # vLLM 0.11.0: the naive dispatch gathers DP × 8,192 = 65,536 rows, then fused_experts_impl runs them in chunks
    # of VLLM_FUSED_MOE_CHUNK_SIZE 32,768 over the same caches. Qwen3-30B-A3B (hidden 2,048, experts of 768, top-8),
    # EP: 32,768 × 8 × (max(2·768, 2,048) + 768) × 2 B = 1,476,395,008 B, not 65,536 rows' 2,952,790,016
    from kvledger.accounting.vllm_moe_workspace import transient_workspace_bytes

    m = load_model("Qwen/Qwen3-30B-A3B")
    rows = moe_profile_rows(m, 8192, 8, 8)
    assert rows == 65_536 and transient_workspace_bytes(m, (0, 11, 0), rows, 1, 8) == 1_476_395_008
    assert gathered_hidden_bytes(m, 8192, 8, 8) == 65_536 * 2048 * 2 == 268_435_456


def test_0_12_to_0_14_per_call_caches_chunk_at_16384_rows():
    # envs.py VLLM_FUSED_MOE_CHUNK_SIZE defaults to str(16 * 1024) in 0.12.0, 0.13.0 and 0.14.0 (32768 in 0.9.2–0.11.0),
    # and fused_moe.py::fused_experts_impl takes CHUNK_SIZE from it: Qwen3-30B-A3B under EP at 65,536 rows,
    # 16,384 × 8 × (max(2·768, 2,048) + 768) × 2 B = 738,197,504 B (half of 0.11.0's 1,476,395,008)
    from kvledger.accounting.vllm_moe_workspace import transient_workspace, transient_workspace_bytes

    m = load_model("Qwen/Qwen3-30B-A3B")
    for ver in ((0, 12, 0), (0, 13, 0), (0, 14, 0)):
        assert transient_workspace_bytes(m, ver, 65_536, 1, 8) == 738_197_504
    assert transient_workspace_bytes(m, (0, 10, 1), 65_536, 1, 8) == 1_476_395_008
    assert "16,384 tokens × top-8" in transient_workspace(m, (0, 14, 0), 65_536, 1, 8)[1]


def test_0_15_to_0_17_modular_kernel_keeps_one_chunk_of_workspace():
    # vLLM 0.15.0-0.17.0 modular_kernel.py: _chunk_info cuts M to min(M, VLLM_FUSED_MOE_CHUNK_SIZE = 16,384) (Triton
    # experts' supports_chunking, VLLM_ENABLE_FUSED_MOE_ACTIVATION_CHUNKING on by default) and _allocate_buffers asks
    # the workspace manager for workspace13 + workspace2 at the chunk and, past one chunk, the output (M_full, K) beside
    # them; 0.18.0 has no chunking. Qwen3-30B-A3B under EP (whole experts, I = 768, h = 2,048, top-8, bf16): a row is
    # 8 × (max(768, 2,048) + max(1,536, 2,048)) × 2 B = 65,536 B. DP 8 × 8,192 = 65,536 rows:
    # 0.15: 16,384 × 65,536 + 65,536 × 2,048 × 2 = 1,073,741,824 + 268,435,456 = 1,342,177,280 B (1.25 GiB);
    # 0.18: 65,536 × 65,536 = 4,294,967,296 B (4 GiB); 8,192 rows (one chunk): 8,192 × 65,536 = 536,870,912 B either way
    from kvledger.accounting.vllm_moe_workspace import moe_workspace_bytes

    q = load_model("Qwen/Qwen3-30B-A3B")
    for ver in ((0, 15, 0), (0, 16, 0), (0, 17, 0)):
        assert moe_workspace_bytes(q, ver, 65_536, 1, 8) == 1_342_177_280
        assert moe_workspace_bytes(q, ver, 8192, 1, 8) == 536_870_912
    assert moe_workspace_bytes(q, (0, 18, 0), 65_536, 1, 8) == 4_294_967_296
    # 0.11.0's modular kernel (_maybe_chunk_fused_experts) chunks at its 32,768: 32,768 × 65,536 + 65,536 × 2,048 × 2
    # = 2,147,483,648 + 268,435,456 = 2,415,919,104 B (the kept bytes an FP8 Hopper modular kernel would hold)
    from kvledger.accounting.vllm_moe_workspace import kept_workspace_bytes

    assert kept_workspace_bytes(q, 65_536, 1, 8, (0, 11, 0)) == 2_415_919_104
    assert kept_workspace_bytes(q, 65_536, 1, 8) == 4_294_967_296  # no release: unchunked
