"""SGLang 0.5.23's DP attention step cost (accounting/sglang_dp_cost.py): the per-step padding mode and the MLP
layers' collectives, worked by hand for DeepSeek-V3 at --tp 8 --ep-size 8 --enable-dp-attention --dp-size 8 on H200."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_dp_cost import padding_mode
from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_sglang_dp import sglang_dp_cost
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

H = 7168  # DeepSeek-V3's hidden size
CA = 16 << 20  # SGLang 0.5.23's custom all-reduce v2 bound on H200 (NVLink all-to-all): 16 MiB


def _cost(backend=None, **kw):
    s = make_settings(engine="sglang", tp=8, ep_size=8, enable_dp_attention=True, data_parallel_size=8,
                      moe_a2a_backend=backend, **kw)
    return sglang_dp_cost(build_plan(load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200"), s))


def test_padding_mode_follows_get_dp_padding_mode():
    # a prefill anywhere: SUM_LEN
    assert padding_mode([100, 0], True, "none", H, CA) == "sum_len"
    # decode, no rank idle, 8 × 64 rows × 7,168 × 2 B = 7,340,032 B ≤ 16 MiB: SUM_LEN (the custom all-reduce holds it)
    assert padding_mode([64] * 8, False, "none", H, CA) == "sum_len"
    # the same under deepep: the custom-all-reduce rule needs backend none; 2 × 512 ≥ 64 × 8: MAX_LEN
    assert padding_mode([64] * 8, False, "deepep", H, CA) == "max_len"
    # one rank idle: 2 × 448 = 896 ≥ 64 × 8 = 512: MAX_LEN; one rank busy: 2 × 64 = 128 < 512: SUM_LEN
    assert padding_mode([64] * 7 + [0], False, "none", H, CA) == "max_len"
    assert padding_mode([64] + [0] * 7, False, "none", H, CA) == "sum_len"


def test_gathered_layer_collectives_dsv3_tp8_dp8_h200():
    c = _cost()
    # DeepSeek-V3: 61 layers, 58 MoE, so 3 dense MLP layers; the 8 GPUs' link 450 GB/s (tp_comm), the all-reduce's
    # fitted latency 34.323 µs, NCCL's ring all-gather 34.323 − 7 × 0.6 = 30.123 µs (tp_network.gather_latency_s)
    assert (c.moe_layers, c.dense_layers) == (58, 3)
    # SUM_LEN's decode bound: 0.5.23's custom all-reduce v2 on NVLink all-to-all, 16 MiB (sglang_rules.py)
    assert c.ca_max_bytes == CA
    assert c.link_Bps == pytest.approx(450e9) and c.call_latency_s == pytest.approx(34.323e-6, rel=1e-4)
    assert c.gather_latency_s == pytest.approx(30.123e-6, rel=1e-4)
    # MAX_LEN, 7 ranks of 64 decodes and one idle: an all-gather and a reduce-scatter, each receiving 7 × 64 rows ×
    # 14,336 B = 6,422,528 B: 2 × (30.123 µs + 6,422,528 / 450e9 = 14.2723 µs) = 88.791 µs a layer
    assert c.gathered_layer_s([64] * 7 + [0], True) == pytest.approx(88.791e-6, rel=1e-4)
    # SUM_LEN, 8 × 64 decodes: two all-reduces of 512 × 14,336 = 7,340,032 B, a ring moving 2 × 7/8 of it:
    # 2 × (34.323 µs + 12,845,056 / 450e9 = 28.5446 µs) = 125.735 µs a layer; × 61 gathered layers = 7.6698 ms a step
    assert c.gathered_layer_s([64] * 8, False) == pytest.approx(125.735e-6, rel=1e-4)
    assert c.comm_s([64] * 8, False)[0] == pytest.approx(61 * 125.735e-6, rel=1e-4)


def test_deepep_dispatch_and_combine_dsv3():
    c = _cost("deepep")
    # rank 0 with 64 decodes, 7 ranks idle: it sends 64 × 8 experts × 7/8 = 448 token-experts, receives 0:
    # 2 × (30.123 µs + 448 × 14,336 B / 450e9 = 14.2723 µs) = 88.791 µs a MoE layer
    assert c.deepep_layer_s([64] + [0] * 7, 0) == pytest.approx(88.791e-6, rel=1e-4)
    # an idle rank receives 64 × 8 / 8 = 64 token-experts: 2 × (30.123 + 64 × 14,336 / 450e9 = 2.0389 µs) = 64.324 µs
    assert c.deepep_layer_s([64] + [0] * 7, 1) == pytest.approx(64.324e-6, rel=1e-4)
    # the 3 dense layers still gathered (SUM_LEN: 2 × 64 < 8 × 64): 2 × (34.323 + 2 × 7/8 × 64 × 14,336 / 450e9
    # = 3.5681 µs) = 75.782 µs each; rank 0's step: 3 × 75.782 + 58 × 88.791 = 5,377.2 µs
    assert c.comm_s([64] + [0] * 7, False)[0] == pytest.approx(3 * 75.782e-6 + 58 * 88.791e-6, rel=1e-4)


def test_step_waits_for_the_slowest_rank_and_an_idle_rank_adds_no_rows_when_eager():
    c = _cost()
    c.capture_sizes = ()  # eager (no decode CUDA graph): an IDLE batch is 0 tokens
    busy = StepShape(0, 0, 0, 0.0, 64, 64 * 1000)
    one, all_busy = c.step_time_s([busy] + [None] * 7), c.step_time_s([busy] * 8)
    # the MoE rows: 64 with seven IDLE ranks (SUM_LEN: 2 × 64 < 512), 512 with all busy (SUM_LEN, custom all-reduce)
    assert c.rank_tokens([busy] + [None] * 7)[1:] == (64, False) and c.rank_tokens([busy] * 8)[1:] == (512, False)
    assert all_busy > one


def test_decode_graph_pads_every_rank_to_the_bucket_of_the_largest():
    # SGLang 0.5.23 decode_cuda_graph_runner.py: under require_mlp_tp_gather every rank replays the graph of
    # _pad_to_bucket(max rank count) — DSV3 at --tp 8 on H200 captures 1, 2, 4, 8, 12, 16, 24, …, 512 (cuda_graph_max_bs
    # 512, the rank's pool 2,048 requests: sglang_steps.decode_capture_sizes)
    c = _cost()
    assert c.capture_sizes[:7] == (1, 2, 4, 8, 12, 16, 24) and c.capture_sizes[-1] == 512
    three, nine = StepShape(0, 0, 0, 0.0, 3, 3_000), StepShape(0, 0, 0, 0.0, 9, 9_000)
    got = c.graph_padded([three, None, nine] + [None] * 5)
    # max 9 → 12: the 3-request rank gains 9 padding rows of 1 KV token (3,009), the 9-request rank 3 (9,003), an
    # idle rank's IDLE batch replays 12 rows of 1 token (ForwardMode.is_cuda_graph holds for IDLE)
    assert got[:3] == [StepShape(0, 0, 0, 0.0, 12, 3_009), StepShape(0, 0, 0, 0.0, 12, 12),
                       StepShape(0, 0, 0, 0.0, 12, 9_003)]
    # priced as those shapes: 8 ranks × 12 rows = 96 MoE rows (SUM_LEN: 96 × 7,168 × 2 B = 1.4 MB fits the 16 MiB
    # custom all-reduce), each rank the same step
    assert c.rank_tokens(got)[1:] == (96, False)
    eager = _cost()
    eager.capture_sizes = ()
    assert c.step_time_s([three, None, nine] + [None] * 5) == pytest.approx(eager.step_time_s(got), rel=1e-12)
    # a prefill on any rank: every rank eager, unpadded (_local_decode_cuda_graph_vote is min-reduced); above the
    # largest captured size (513 > 512): eager too
    chunk = StepShape(256, 1, 256, 256 * 257 / 2, 0, 0)
    assert c.graph_padded([three, chunk] + [None] * 6) == [three, chunk] + [None] * 6
    big = StepShape(0, 0, 0, 0.0, 513, 513_000)
    assert c.graph_padded([big, three] + [None] * 6) == [big, three] + [None] * 6


@pytest.mark.parametrize(("kw", "said"), [({"tp": 8, "data_parallel_size": 4}, "an attention DP size below --tp"),
                                          ({"tp": 8, "ep_size": 1}, "--ep-size 1")])
def test_refuses_what_it_does_not_model(kw, said):
    base = {"engine": "sglang", "tp": 8, "ep_size": 8, "enable_dp_attention": True, "data_parallel_size": 8, **kw}
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200"), make_settings(**base))
    with pytest.raises(InputError, match=said):
        sglang_dp_cost(plan)
