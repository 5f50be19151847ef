"""The cost ledger's prefill/decode split of GPU time: step attribution for simulated runs, the occupancy split raised
to the prompts' roofline floor for measured ones, the user's share over both."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.errors import InputError
from kvledger.ledgers.cost import capacity_from
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.prefill_floor import prefill_floor
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def test_simulated_run_is_split_by_its_steps():
    # the hand-priced run of tests/accounting/test_step_split.py: steps 0.110 s (all prefill), 0.061 s (prefill part
    # 0.061 × 0.060 / 0.071), 0.012 s (all decode) → prefill share 0.1615493 / 0.183 = 0.882783
    reqs = [RequestSpec("A", 0.0, 100, 3), RequestSpec("B", 0.05, 50, 2)]
    cfg = EngineConfig(num_gpu_blocks=64, max_model_len=256, block_size=16, max_num_batched_tokens=512, max_num_seqs=8)
    run = simulate(reqs, cfg, FixedStepCost(per_step_s=0.01, per_token_s=0.001)).records
    gp = goodput(run, parse_slo("e2e=10s"))
    cap = capacity_from(run, gp, None)
    assert cap.prefill_share == pytest.approx((0.110 + 0.061 * 0.060 / 0.071) / 0.183, rel=1e-12)
    assert cap.prefill_share_method.startswith("simulated step attribution")
    assert "kvledger.accounting.step_split" in cap.prefill_share_method
    # the occupancy split would have charged by wall time: A's TTFT 0.110 s of E2E 0.183 s, B's (arrived at 0.05 s)
    # 0.121 of 0.133 → Σ TTFT ÷ Σ E2E = 0.231 / 0.316 = 0.731
    recs = sorted(run.records, key=lambda r: r.request_id)
    assert [r.ttft_s for r in recs] == pytest.approx([0.110,
                                                      0.121]) and [r.e2e_s for r in recs] == pytest.approx([0.183,
                                                          0.133])
    assert capacity_from(run, gp, 0.25).prefill_share == 0.25  # --prefill-share still overrides


def _two_prompts(num_cached: int | None = None) -> RunRecords:
    # two 1000-token prompts, TTFT 10 ms and E2E 1 s each, on one GPU for 1 s: occupancy 0.02 / 2 = 0.01
    recs = [RequestRecord(str(i), 0.0, 1000, 100, 0.01, 1.0, num_cached_tokens=num_cached) for i in range(2)]
    return RunRecords(recs, RunMetadata("hand", "test", model="meta-llama/Llama-3.1-8B", hardware="H100",
                                        duration_s=1.0,
                                        num_gpus=1))


def test_roofline_floor_by_hand():
    # Llama-3.1-8B: 6,979,588,096 matmul parameters besides embedding and LM head; LM head 2 × 128,256 × 4096 =
    # 1,050,673,152 FLOPs per prompt; attention 4 × 32 heads × 128 × 32 layers = 524,288 FLOPs per query-key pair.
    # Two 1000-token prompts: matmul 2 × 6,979,588,096 × 2000 + 2 × 1,050,673,152 = 27,920,453,730,304 FLOPs;
    # attention 524,288 × 2 × 500,500 = 524,812,288,000 FLOPs; at 70 % of 989.5 TFLOP/s (692.65 TFLOP/s):
    # 0.0403096 + 0.0007577 = 0.0410673 GPU-s of the run's 1 GPU × 1 s.
    floor, why = prefill_floor(_two_prompts(), "meta-llama/Llama-3.1-8B", "H100", 1)
    assert why == ""
    assert floor.prefill_gpu_s == pytest.approx(0.0410673, rel=1e-5)
    assert floor.share == pytest.approx(0.0410673, rel=1e-5)
    # 600 of each prompt's tokens served from the prefix cache: 400 new tokens after 600 cached, 400·600 + 400·401/2 =
    # 320,200 pairs each → matmul 2 × 6,979,588,096 × 800 + 2,101,346,304 = 11,169,442,300,160; attention 524,288 ×
    # 640,400 = 335,754,035,200 → 0.0161256 + 0.0004847 = 0.0166104 GPU-s
    cached, _ = prefill_floor(_two_prompts(600), "meta-llama/Llama-3.1-8B", "H100", 1)
    assert cached.prefill_gpu_s == pytest.approx(0.0166104, rel=1e-5)


def test_measured_split_is_raised_to_the_floor():
    run = _two_prompts()
    gp = goodput(run, parse_slo("ttft=1s"))
    assert capacity_from(run, gp, None, "the run names no GPU").prefill_share == pytest.approx(0.01)  # occupancy alone
    floor, _ = prefill_floor(run, "meta-llama/Llama-3.1-8B", "H100", 1)
    cap = capacity_from(run, gp, None, floor)
    assert cap.prefill_share == pytest.approx(0.0410673, rel=1e-5)  # above the occupancy split's 0.01
    assert (
        cap.prefill_share_method.startswith("roofline floor")
        and "raised from the occupancy split" in cap.prefill_share_method
    )
    assert cap.prefill_floor["share"] == pytest.approx(0.0410673, rel=1e-5)


def test_split_above_the_floor_says_what_the_floor_share_is():
    # TTFT 0.5 s of E2E 1 s for both prompts: occupancy 1.0 / 2.0 = 0.5, above the 0.0410673 GPU-s ÷ 1 GPU-s floor of
    # test_roofline_floor_by_hand; the text names the ratio and its unit instead of a bare "(0.041)"
    recs = [RequestRecord(str(i), 0.0, 1000, 100, 0.5, 1.0) for i in range(2)]
    run = RunRecords(recs, RunMetadata("hand", "test", duration_s=1.0, num_gpus=1))
    floor, _ = prefill_floor(run, "meta-llama/Llama-3.1-8B", "H100", 1)
    cap = capacity_from(run, goodput(run, parse_slo("ttft=1s")), None, floor)
    assert cap.prefill_share == pytest.approx(0.5)
    assert cap.prefill_share_method.endswith(
        "(kvledger.ledgers.prefill_floor); floor share = prefill 0.04107 ÷ run 1 GPU-s = 0.041 of the run's GPU time")


def test_no_floor_says_why():
    run = _two_prompts()
    assert prefill_floor(run, None, "H100", 1) == (None, "the run names no model (pass --model and --gpu)")
    floor, why = prefill_floor(run, "acme/Unbundled-70b-chat", "H100", 1)
    assert floor is None and "unknown model 'acme/Unbundled-70b-chat'" in why and "--model" in why
    gp = goodput(run, parse_slo("ttft=1s"))
    assert "no roofline floor under it: unknown model" in capacity_from(run, gp, None, why).prefill_share_method


def test_llama2_70b_chat_is_priced_on_the_base_config():
    # llmperf's Anyscale run names meta-llama/Llama-2-70b-chat-hf: the same architecture as the bundled
    # meta-llama/Llama-2-70b-hf (80 layers, 8192 hidden, 64 query / 8 KV heads, 28672 MLP, vocab 32000), so the
    # floor is priced on that config and says so; the same figure as naming the base model
    run = _two_prompts()
    chat, why = prefill_floor(run, "meta-llama/Llama-2-70b-chat-hf", "H100", 1)
    base, _ = prefill_floor(run, "meta-llama/Llama-2-70b-hf", "H100", 1)
    assert why == "" and chat.prefill_gpu_s == base.prefill_gpu_s > 0
    assert "meta-llama/Llama-2-70b-chat-hf (config of meta-llama/Llama-2-70b-hf)" in chat.text


def test_no_occupancy_split_falls_back_to_the_floor():
    # non-streaming: no first-token times, so no TTFT; the floor still prices the prompts
    recs = [RequestRecord(str(i), 0.0, 1000, 100, None, 1.0) for i in range(2)]
    run = RunRecords(recs, RunMetadata("hand", "test", duration_s=1.0, num_gpus=1))
    gp = goodput(run, parse_slo("e2e=2s"))
    with pytest.raises(InputError, match="no first-token time"):
        capacity_from(run, gp, None, "the run names no model (pass --model and --gpu)")
    floor, _ = prefill_floor(run, "meta-llama/Llama-3.1-8B", "H100", 1)
    cap = capacity_from(run, gp, None, floor)
    assert cap.prefill_share == pytest.approx(0.0410673, rel=1e-5) and "no occupancy split" in cap.prefill_share_method
