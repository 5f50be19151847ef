"""A TP group over two nodes (--tp 16 on 8-GPU H100 boards) priced as NCCL's ring over the nodes' NICs, by hand.

NCCL's tuning model (``src/graph/tuning.cc``, 2.23.4 on), ring LL: a TP 16 all-reduce over 2 nodes takes 2(16 − 1) = 30
steps, 2(2 − 1) = 2 of them over the network at 2.7 µs, the other 28 at max(NVLink's 0.6 µs, the network post overhead
1 µs) = 1 µs: 28 + 5.4 = 33.4 µs; the same call over the 8 ranks of one node takes 2(8 − 1) = 14 NVLink steps, 8.4 µs.
The difference, 25.0 µs, is added to the one-node latency (Vidur's H100 fit at 8 ranks, 34.32 µs): 59.32 µs a call.
Bandwidth: 8 GPUs a node × one 400 Gb/s NIC each (50 GB/s a direction) = 400 GB/s, under NVLink 4's 450 GB/s.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.tp_comm import allreduce_latency_s
from kvledger.accounting.tp_network import (
    extra_latency_s,
    gather_latency_s,
    grouped_broadcast_latency_s,
    ring_steps,
    spanning_link,
)
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_nccl_ring_latency_added_across_two_nodes():
    assert extra_latency_s(16, 2) == pytest.approx((28 * 1.0 + 2 * 2.7 - 14 * 0.6) * 1e-6)  # 25.0 µs
    assert extra_latency_s(8, 1) == 0.0
    # over PCIe the one-node steps are 1.0 µs each: (28 × 1.0 + 2 × 2.7) − 14 × 1.0 = 19.4 µs
    assert extra_latency_s(16, 2, over_pcie=True) == pytest.approx(19.4e-6)
    # four nodes of 4: 30 steps, 2(4 − 1) = 6 over the network: 24 × 1.0 + 6 × 2.7 − 6 × 0.6 = 36.6 µs
    assert extra_latency_s(16, 4) == pytest.approx(36.6e-6)


def test_one_rank_a_node_counts_no_negative_step():
    # 2 ranks on 2 nodes: 2(2 − 1) = 2 steps, 2(2 − 1) = 2 over the network, 0 within a node (NCCL before 2.23.4
    # counted 2 × 2 = 4 network steps of 2, i.e. −2 within); at one rank a node (ppn = 1) NCCL takes the tree's
    # network latency, 5.0 µs: 0 × 1.0 + 2 × 5.0 − 0 (one rank alone on a node: no step) = 10.0 µs
    assert ring_steps(2, 2) == (0, 2)
    assert extra_latency_s(2, 2) == pytest.approx(10.0e-6)
    # 4 ranks on 4 nodes: 6 steps, all over the network: 6 × 5.0 = 30.0 µs
    assert ring_steps(4, 4) == (0, 6) and extra_latency_s(4, 4) == pytest.approx(30.0e-6)
    # every count of ranks and nodes: neither count negative, and the steps add up to 2(n − 1)
    for n in range(1, 33):
        for nodes in range(1, 9):
            within, over = ring_steps(n, nodes)
            assert within >= 0 and over >= 0 and within + over == 2 * (n - 1)


def test_ring_bandwidth_is_the_nics_or_the_node_link_whichever_is_less():
    span = spanning_link(16, 2, 450e9)
    assert span.link_bytes_per_s == 400e9 and span.ranks_per_node == 8  # 8 × 50 GB/s
    assert "bound by the NICs: 8 GPUs a node × 50 GB/s NIC each = 400 GB/s" in span.words()
    fast = spanning_link(16, 2, 450e9, nic_Bps=100e9)  # 8 × 100 GB/s = 800 GB/s: NVLink's 450 GB/s binds
    assert fast.link_bytes_per_s == 450e9 and "bound by the node's link" in fast.words()
    assert spanning_link(8, 1, 450e9) is None


def test_deepseek_v3_tp16_decode_all_reduces_by_hand():
    # DeepSeek-V3: 61 layers, hidden 7,168. A decode step of 64 sequences moves 64 × 7,168 × 2 B = 917,504 B a call,
    # 2 calls a layer, every one NCCL's (custom all-reduce is off across nodes):
    # 122 × (34.32 + 25.0 µs + 2 × 15/16 × 917,504 B / 400 GB/s = 4.3008 µs) = 122 × 63.62 µs = 7.762 ms
    gpu = get_gpu("H100")
    lat8 = allreduce_latency_s(gpu, 8)
    assert lat8 * 1e6 == pytest.approx(34.32, abs=0.01)
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), gpu, make_settings(tp=16), with_advice=False)
    assert plan.settings.nnodes == 2
    rc = plan.step_cost()
    assert rc.custom_allreduce_max_bytes == 0 and rc.link_bytes_per_s == 400e9
    assert rc.allreduce_latency_s == pytest.approx(lat8 + 25.0e-6)
    per_call = lat8 + 25.0e-6 + 2 * 15 / 16 * 917_504 / 400e9
    assert rc.allreduce_s(64) == pytest.approx(122 * per_call)
    assert rc.allreduce_s(64) * 1e3 == pytest.approx(7.762, abs=0.001)
    # a 200 Gb/s NIC a GPU (25 GB/s): 8 × 25 = 200 GB/s; the latency is the same
    slow = build_plan(load_model("deepseek-ai/DeepSeek-V3"), gpu,
                      make_settings(tp=16, inter_node_link_bytes_per_s=25e9), with_advice=False).step_cost()
    assert slow.link_bytes_per_s == 200e9
    assert slow.allreduce_s(64) == pytest.approx(122 * (lat8 + 25.0e-6 + 2 * 15 / 16 * 917_504 / 200e9))


def test_tp8_within_one_node_is_unchanged():
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("H200"), make_settings(tp=8), with_advice=False)
    rc = plan.step_cost()
    assert rc.allreduce_span is None and rc.link_bytes_per_s == 450e9  # NVLink 4: 900 GB/s ÷ 2
    assert rc.allreduce_latency_s == allreduce_latency_s(get_gpu("H200"), 8)


def test_an_all_gather_takes_half_the_all_reduce_steps():
    # NCCL tuning.cc: an all-gather (or reduce-scatter) ring takes n − 1 steps, N − 1 over the network
    assert ring_steps(16, 2, "all_gather") == (14, 1) and ring_steps(8, 1, "all_gather") == (7, 0)
    # across two nodes of 8: 14 × 1.0 + 1 × 2.7 − 7 × 0.6 = 12.5 µs (the all-reduce's: 25.0)
    assert extra_latency_s(16, 2, collective="all_gather") == pytest.approx(12.5e-6)
    h100 = get_gpu("H100")
    # one node of 8: the all-reduce fit at 8 ranks, 34.32 µs, less 7 NVLink steps × 0.6 µs = 30.12 µs
    assert gather_latency_s(h100, 8) == pytest.approx(allreduce_latency_s(h100, 8) - 4.2e-6)
    assert gather_latency_s(h100, 16, 2) == pytest.approx(allreduce_latency_s(h100, 8) - 4.2e-6 + 12.5e-6)
    assert gather_latency_s(h100, 1) == 0.0


def test_unequal_counts_take_one_grouped_ring_broadcast():
    # vLLM's all_gatherv at unequal counts: one NCCL group of ring broadcasts, priced once at a ring broadcast's
    # baseLat + one hop (tuning.cc, sameChannels). baseLat: the 8-rank all-reduce fit 34.323022 µs less its 14 NVLink
    # steps × 0.6 µs = 25.923022 µs; one node: + 0.6 µs = 26.523022 µs; two nodes of 8: + one network step at NCCL's
    # ring LL 2.7 µs = 28.623022 µs; PCIe (L40S: no scale-up link): 1.0 µs a step, 2 ranks: fit(2) − 2 × 1.0 + 1.0
    h100 = get_gpu("H100")
    assert grouped_broadcast_latency_s(h100, 8) == pytest.approx(allreduce_latency_s(h100, 8) - 8.4e-6 + 0.6e-6)
    assert grouped_broadcast_latency_s(h100, 8) == pytest.approx(26.523022e-6, abs=1e-12)
    assert grouped_broadcast_latency_s(h100, 16, 2) == pytest.approx(28.623022e-6, abs=1e-12)
    l40s = get_gpu("L40S")
    assert grouped_broadcast_latency_s(l40s, 2) == pytest.approx(allreduce_latency_s(l40s, 2) - 1.0e-6)
    assert grouped_broadcast_latency_s(h100, 1) == 0.0
