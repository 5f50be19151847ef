"""vLLM's DP ranks across nodes: engine/arg_utils.py asserts world_size % nnodes == 0 over DP × PP × TP, and a TP group
sees ParallelConfig.nnodes_within_dp = nnodes ÷ (DP ÷ data_parallel_size_local) nodes (config/parallel.py, 0.19.0),
data_parallel_size_local inferred as max((DP × PP × TP ÷ nnodes) ÷ (PP × TP), 1)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.topology import check_topology, nodes_within_dp
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError


def _s(**kw):
    return make_settings(enable_expert_parallel=True, **kw)


def test_nodes_within_dp_by_hand():
    # DP 16 × TP 1 on 2 nodes: 8 ranks a node, dp_local = 8 ÷ 1 = 8, 16 ÷ 8 = 2 DP node groups, 2 ÷ 2 = 1 node
    assert nodes_within_dp(_s(tp=1, data_parallel_size=16, nnodes=2)) == 1
    # DP 2 × TP 8 on 2 nodes: dp_local = max(8 ÷ 8, 1) = 1, 2 ÷ 1 = 2 groups, 2 ÷ 2 = 1: each TP 8 inside one node
    assert nodes_within_dp(_s(tp=8, data_parallel_size=2, nnodes=2)) == 1
    # DP 2 × TP 8 on 4 nodes of 4: dp_local = max(4 ÷ 8, 1) = 1, 4 ÷ 2 = 2: each TP group spans 2 nodes
    assert nodes_within_dp(_s(tp=8, data_parallel_size=2, nnodes=4)) == 2
    # TP 16 without DP on 2 nodes: the TP group spans both
    assert nodes_within_dp(make_settings(tp=16, nnodes=2)) == 2


def test_dp_across_nodes_is_planned_not_refused():
    # was: "--nnodes 2 is more nodes than --tp 1 has GPUs (1)" for the canonical wide-EP layout
    check_topology(_s(tp=1, data_parallel_size=16, nnodes=2), (0, 33, 0))
    # DP 3 × TP 8 = 24 GPUs on 2 nodes: 12 a node, dp_local = 1, 3 groups over 2 nodes: 2 ÷ 3 = 0, refused
    with pytest.raises(InputError, match="cannot share 2 nodes evenly"):
        check_topology(_s(tp=8, data_parallel_size=3, nnodes=2), (0, 33, 0))
    with pytest.raises(InputError, match="does not divide the 24 GPUs"):
        check_topology(_s(tp=8, data_parallel_size=3, nnodes=5), (0, 33, 0))


def test_dp2_tp8_on_two_nodes_keeps_each_tp_group_in_one_node():
    # each TP 8 group on one H200 board: the same pool as the one-node plan of the same ranks (before, the TP group
    # was taken to span 2 nodes and the non-torch term fell to the multi-node fallback, 2.08 GiB more KV)
    m, g = load_model("moonshotai/Kimi-K2-Instruct"), get_gpu("H200")
    two = build_plan(m, g, _s(tp=8, data_parallel_size=2, nnodes=2), with_advice=False)
    one = build_plan(m, g, _s(tp=8, data_parallel_size=2), with_advice=False)
    assert two.memory.num_gpu_blocks == one.memory.num_gpu_blocks
