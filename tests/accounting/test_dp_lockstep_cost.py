"""The lock-step step cost of vLLM's DP ranks (accounting/dp_lockstep_cost.py): DP padding, the MoE term over every
rank's tokens, the all-gather/reduce-scatter of the other ranks' tokens, the slowest rank setting the step."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.accounting.dp_lockstep_cost import DUMMY_BATCH, LockstepStepCost
from kvledger.accounting.step_costs import StepCosts
from kvledger.accounting.stepcost import StepShape
from kvledger.catalog.gpu_file import resolve_gpu

H200 = resolve_gpu("H200")


class _Rank:
    """A stand-in rank roofline: 1 ms per token of its own step, 0.1 ms per token the MoE layers take, plus the
    collectives; 2 MoE layers, hidden size 1,000."""

    gpu, allreduce_link_share, moe_layers = H200, None, 2
    model = SimpleNamespace(hidden_size=1000)
    name = "stub"

    def costs(self, shape):
        return StepCosts(matmul_flops=shape.num_tokens, attn_flops=0.0, weight_bytes=0.0, kv_bytes=0.0)

    def moe_kernel_s(self, tokens):
        return 1e-4 * tokens

    def time_s(self, c):
        return 1e-3 * c.matmul_flops + c.moe_kernel_s + c.all_to_all_s


def _decode(n):
    return StepShape(0, 0, 0, 0.0, n, n * 100)


def test_padding_up_to_the_largest_rank_within_the_cuda_graph_size():
    cost = LockstepStepCost(_Rank(), 2, capture_size=512)
    # decode 3 and idle (the 1-token dummy): both within 512 → both padded to 3, the MoE layers over 6 tokens
    assert cost.rank_tokens([_decode(3), None]) == ([3, 3], 6, True)
    # a 1,000-token prefill passes 512: no padding, each rank's own (1,000 and the dummy's 1)
    assert cost.rank_tokens([StepShape(1000, 1, 1000, 500500.0), None]) == ([1000, 1], 1001, False)
    # --enforce-eager (no CUDA graphs): never padded
    assert LockstepStepCost(_Rank(), 2, None).rank_tokens([_decode(3), None]) == ([3, 1], 4, False)


def test_the_idle_rank_waits_for_the_busy_one():
    cost = LockstepStepCost(_Rank(), 2, capture_size=None)
    # H200: NVLink 900 GB/s both ways → 450 GB/s one way (tp_comm.link_bytes_per_s); the NCCL per-call latency fit at
    # 2 ranks 31.426951 µs (tp_comm.allreduce_latency_s, Vidur's H100 network profile)
    ar, link = 3.1426951111111114e-05, 450e9
    assert abs(cost.call_latency_s - ar) < 1e-15 and cost.link_Bps == link
    # unequal counts: vLLM's all_gatherv / reduce_scatterv, one NCCL group of ring broadcasts (reduces), priced as one
    # ring broadcast: the all-reduce fit less its 2 × (2 − 1) NVLink steps at 0.6 µs, plus one = 30.826951 µs
    lat = ar - 2 * 0.6e-6 + 0.6e-6
    assert abs(cost.gatherv_latency_s - lat) < 1e-15
    # ranks: decode 3 and idle, unpadded: the MoE layers over 3 + 1 = 4 tokens (0.4 ms);
    # busy rank: 3 ms own + 0.4 ms + 2 layers × 2 calls × (lat + (4 − 3) × 1,000 × 2 B / link)
    # idle rank: 1 ms (the dummy) + 0.4 ms + 2 × 2 × (lat + (4 − 1) × 2,000 B / link)
    busy = 3e-3 + 4e-4 + 4 * (lat + 2000 / link)
    idle = 1e-3 + 4e-4 + 4 * (lat + 6000 / link)
    times = cost.rank_times_s([_decode(3), None])
    assert abs(times[0] - busy) < 1e-15 and abs(times[1] - idle) < 1e-15
    assert cost.step_time_s([_decode(3), None]) == times[0]  # 3.526 ms: the busy rank's, which the idle rank waits


def test_a_real_rank_prices_the_moe_layers_over_all_ranks():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.models import load_model

    s = make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True)
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), H200, s, with_advice=False)
    inner = plan.step_cost()
    assert inner.ep == 8 and inner.moe_layers == 58  # EP 8 = DP 8 × TP 1; DeepSeek-V3's 58 MoE layers
    cost = LockstepStepCost(inner, 8, capture_size=512)
    one = [_decode(1)] + [None] * 7
    # every rank within 512 tokens: all padded to 1 token, the MoE layers over 8 — rank 0's step is its own step with
    # the MoE term at 8 tokens and the collectives of 7 other tokens, 58 × 2 × (latency + 7 × 7,168 × 2 B / link), at
    # NCCL's ring all-gather latency (every rank the same count): the 8-rank all-reduce fit 34.323022 µs less the
    # 7 NVLink steps at 0.6 µs an all-gather does not take = 30.123022 µs
    own = inner.costs(_decode(1))
    assert abs(cost.gather_latency_s - (34.323022222222223e-6 - 7 * 0.6e-6)) < 1e-15
    gather = 58 * 2 * (cost.gather_latency_s + 7 * 7168 * 2 / cost.link_Bps)
    from dataclasses import replace

    want = inner.time_s(replace(own, moe_kernel_s=inner.moe_kernel_s(8), all_to_all_s=gather))
    # an idle rank: the dummy batch (one token, one KV token) with the same MoE term and collectives
    dummy = inner.time_s(replace(inner.costs(DUMMY_BATCH), moe_kernel_s=inner.moe_kernel_s(8), all_to_all_s=gather))
    assert cost.rank_times_s(one) == [want] + [dummy] * 7
    assert cost.step_time_s(one) == max(want, dummy) == want  # rank 0 reads 100 KV tokens, the dummy 1
    # a busier rank 0 (64 decodes) makes the step longer for all: 8 × 64 padded tokens in the MoE layers
    assert cost.step_time_s([_decode(64)] + [None] * 7) > cost.step_time_s(one)


def test_sixteen_ranks_over_two_nodes_gather_over_the_nics():
    # DP 16 × TP 1 on two 8-GPU H200 nodes (node_size.dp_nnodes): the DP group's all-gather and reduce-scatter are
    # NCCL rings across the nodes, priced as tp_network prices a TP group's: 8 ranks a node, each GPU's 400 Gb/s NIC
    # 50 GB/s one way → the link min(450 GB/s NVLink, 8 × 50 GB/s) = 400 GB/s; the per-call latency the one-node fit at
    # the 8 ranks a node holds, 34.323022 µs, plus NCCL's ring LL steps across the nodes,
    # (2·15 − 2·1) × max(0.6, 1.0) µs + 2·1 × 2.7 µs − 2·7 × 0.6 µs = 28 + 5.4 − 8.4 = 25.0 µs
    cost = LockstepStepCost(_Rank(), 16, capture_size=None, nnodes=2)
    lat, link = 3.432302222222223e-05 + 25.0e-6, 400e9
    assert abs(cost.call_latency_s - lat) < 1e-15 and cost.link_Bps == link
    assert cost.span.nodes == 2 and cost.span.ranks_per_node == 8
    # one rank decodes 3, fifteen idle (1-token dummies), unpadded: the MoE layers over 3 + 15 = 18 tokens (1.8 ms);
    # the busy rank gathers the other 15 tokens' 1,000 × 2 B: 3 ms + 1.8 ms + 2 layers × 2 calls × (bcast + 30,000 B
    # / link), bcast the grouped ring broadcasts' latency across the nodes: the 8-rank fit less its 14 NVLink steps,
    # plus one network step at NCCL's ring LL 2.7 µs = 34.323022 − 8.4 + 2.7 = 28.623022 µs
    bcast = 3.432302222222223e-05 - 8.4e-6 + 2.7e-6
    assert abs(cost.gatherv_latency_s - bcast) < 1e-15
    times = cost.rank_times_s([_decode(3)] + [None] * 15)
    assert abs(times[0] - (3e-3 + 1.8e-3 + 4 * (bcast + 30_000 / link))) < 1e-15
    # --inter-node-link 200 Gb/s (25 GB/s a GPU): 8 × 25 = 200 GB/s binds instead
    assert LockstepStepCost(_Rank(), 16, None, nnodes=2, nic_Bps=25e9).link_Bps == 200e9
    # one node (DP 8): NVLink's 450 GB/s and the one-node latency, nothing across
    one = LockstepStepCost(_Rank(), 8, None, nnodes=1)
    assert one.link_Bps == 450e9 and one.span is None and one.call_latency_s == 3.432302222222223e-05


def test_equal_counts_gather_at_the_ring_all_gather_latency():
    # NCCL's ring: an all-gather takes n − 1 steps, N − 1 of them over the network; an all-reduce 2(n − 1), 2(N − 1).
    # DP 16 on two H200 nodes of 8: the 8-rank all-reduce fit 34.323022 µs, less the 7 NVLink steps (0.6 µs) an
    # all-gather does not take, plus its steps across the nodes: (16 − 2) × max(0.6, 1.0) + 1 × 2.7 − 7 × 0.6 = 12.5 µs
    # → 42.623022 µs, against the all-reduce's 34.323022 + 25.0 = 59.323022 µs
    cost = LockstepStepCost(_Rank(), 16, capture_size=512, nnodes=2)
    assert abs(cost.gather_latency_s - (34.323022222222223e-6 - 4.2e-6 + 12.5e-6)) < 1e-15
    # 16 ranks padded to 3 tokens (all within 512): 48 tokens in the MoE layers (4.8 ms); a rank's own 3 ms and
    # 2 layers × 2 calls × (42.623022 µs + 45 other tokens × 1,000 × 2 B / 400 GB/s)
    busy = 3e-3 + 4.8e-3 + 4 * (cost.gather_latency_s + 90_000 / 400e9)
    assert abs(cost.rank_times_s([_decode(3)] * 16)[0] - busy) < 1e-15
    # unequal counts (no CUDA graphs; 18 tokens, 3 own, 15 × 1,000 × 2 B = 30,000 B moved): vLLM's all_gatherv, a
    # group of ring broadcasts, one from each rank, at 34.323022 − 14 × 0.6 + 2.7 = 28.623022 µs a call, under the
    # all-reduce's 59.323022 µs it was priced at before
    eager = LockstepStepCost(_Rank(), 16, capture_size=None, nnodes=2)
    assert abs(eager.gather_s(18, 3, uniform=False) - 4 * (28.623022222222223e-6 + 30_000 / 400e9)) < 1e-15


def test_the_dp_note_says_the_bytes_and_the_link_each_gather_is_priced_at():
    # simulate's DP note gave only the per-call latency ("each call 30.12 µs"); the bandwidth term of gather_s was
    # unstated. DeepSeek-V3 (hidden 7,168) at DP 8 on one H200 node: 7,168 × 2 B = 14,336 B per other rank's token a
    # call, over NVLink 4's 450 GB/s one way (H200's 900 GB/s bidirectional), plus 34.323 − 7 × 0.6 = 30.12 µs
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.serving.sim_dp import dp_note
    from kvledger.catalog.models import load_model

    s = make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True)
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), H200, s, with_advice=False)
    cost = LockstepStepCost(plan.step_cost(), 8, capture_size=512)
    cost.balancing_rule, cost.version = "0.33.0", "0.33.0"
    assert cost.link_Bps == 450e9
    assert ("each call moves the other ranks' tokens × 7,168 hidden × 2 B = 14,336 B a token (16-bit hidden states; "
            "the top-k ids and weights not counted) at 450 GB/s (dp_lockstep_cost.gather_s), plus 30.12 µs where the "
            "ranks send equal counts") in dp_note(plan, cost)


def test_unequal_counts_on_one_node_gather_at_the_grouped_broadcasts_latency():
    # DP 8 on one H200 node, a rank past the 512-token CUDA graph (no DP padding: dp_utils.py pads only when every
    # rank's cudagraph_mode is not NONE): all_gatherv's grouped broadcasts at the 8-rank all-reduce fit 34.323022 µs
    # less its 2 × 7 NVLink steps (0.6 µs), plus one: 26.523022 µs a call; the equal-count all-gather 30.123022 µs
    cost = LockstepStepCost(_Rank(), 8, capture_size=512)
    assert abs(cost.gatherv_latency_s - 26.523022222222223e-6) < 1e-15
    assert abs(cost.gather_latency_s - 30.123022222222223e-6) < 1e-15
    # rank 0 prefills 600 tokens (past 512), seven idle: 600 + 7 = 607 tokens in the MoE layers (60.7 ms); rank 0
    # receives 7 dummy tokens (14,000 B), an idle rank 606 tokens (1,212,000 B): idle = 1 ms + 60.7 ms + 2 layers ×
    # 2 calls × (26.523022 µs + 1,212,000 B / 450 GB/s) = 61.7 ms + 4 × (26.523022 + 2.693333) µs = 61.816865 ms;
    # busy = 600 ms + 60.7 ms + 4 × (26.523022 + 0.031111) µs = 660.806217 ms
    times = cost.rank_times_s([StepShape(600, 1, 600, 180300.0)] + [None] * 7)
    assert abs(times[1] - (1e-3 + 60.7e-3 + 4 * (26.523022222222223e-6 + 1_212_000 / 450e9))) < 1e-12
    assert abs(times[0] - (600e-3 + 60.7e-3 + 4 * (26.523022222222223e-6 + 14_000 / 450e9))) < 1e-12
