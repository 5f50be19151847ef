"""A replica past one node (TP 16 on 8-GPU H100 boards) is not billed on a row that cannot provide the cluster: a
marketplace pod is one machine (RunPod's pods take 1 to 8 GPUs), an instance row holds a replica inside one instance,
and no catalog row sells several nodes joined by InfiniBand/RoCE. A price the user gives per GPU-hour is theirs.

Before: ``pack(RunPod H100 pod, 1, 16)`` billed 16 × $2.69 = $43.04 an hour and search offered the TP 16 candidate
on it; now the pod holds up to 8 (8 × $2.69 = $21.52 an hour) and TP 16 is refused or rejected with the reason.
"""

from __future__ import annotations

import pytest

from kvledger.analyses.search.screen import price_rows, screen_candidate
from kvledger.analyses.search.spec import Candidate, SearchSpec
from kvledger.catalog.prices import find_gpu_price
from kvledger.errors import InputError
from kvledger.ledgers.cost import GpuRate
from kvledger.ledgers.instances import POD_MAX_GPUS, holds_replica, pack

RUNPOD_H100 = GpuRate.from_catalog(find_gpu_price("nvidia_h100_sxm", "RunPod"))  # 1 GPU a row, $2.69/GPU-h


def test_a_pod_holds_one_node_at_most():
    assert POD_MAX_GPUS == 8
    assert pack(RUNPOD_H100, 1, 8).usd_per_hour == pytest.approx(8 * 2.69)  # $21.52
    assert holds_replica(1, True, 8) and not holds_replica(1, True, 16)
    assert holds_replica(1, True, 16, catalog=False)  # a price given per GPU-hour: the user's, whatever the TP
    assert pack(GpuRate.given(2.0), 1, 16).usd_per_hour == pytest.approx(32.0)  # 16 × $2.00
    with pytest.raises(InputError, match=r"a replica of 16 GPUs spans nodes .* no price row considered sells a "
                                         r"multi-node cluster: RunPod:Secure Cloud pod \(1 GPU per instance, a pod: "
                                         r"one machine\)"):
        pack(RUNPOD_H100, 1, 16)
    # the replica may be one TP group, DP ranks of a MoE model or pipeline stages: the words name all three
    with pytest.raises(InputError, match=r"a TP group's all-reduces, DP ranks' MoE all-gathers or pipeline stages' "
                                         r"sends cross InfiniBand/RoCE .* or a replica within one node$"):
        pack(RUNPOD_H100, 1, 16)


def test_search_rejects_tp16_on_h100_with_the_reason_unless_a_price_is_given():
    spec = SearchSpec(model="deepseek-ai/DeepSeek-V3", slo="ttft=2s,tpot=100ms", num_requests=10)
    assert not price_rows("nvidia_h100_sxm", None, None, 16)  # 8-GPU instances and 8-GPU pods: none holds 16
    e = screen_candidate(spec, Candidate("nvidia_h100_sxm", 16))
    assert e["status"] == "rejected" and e["reason"] == "no instance holds the TP group"
    assert "a marketplace pod is one machine, at most 8 GPUs: TP 16 spans nodes" in e["detail"]
    assert e["plan"]["nnodes"] == 2  # the plan itself: 2 nodes of 8
    given = screen_candidate(SearchSpec(model="deepseek-ai/DeepSeek-V3", slo="ttft=2s,tpot=100ms", num_requests=10,
                                        gpu_usd_per_hour=3.0), Candidate("nvidia_h100_sxm", 16))
    assert given["status"] == "planned" and given["price"]["usd_per_gpu_hour"] == 3.0


def test_search_prices_a_given_cluster_on_the_nic_given():
    # --inter-node-link 200Gbps (25 GB/s a GPU): the candidate's plan prices NCCL's ring at 8 × 25 = 200 GB/s
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.serving.sim_setup import load_plan

    spec = SearchSpec(model="deepseek-ai/DeepSeek-V3", slo="ttft=2s,tpot=100ms", num_requests=10,
                      gpu_usd_per_hour=3.0, inter_node_link="200Gbps")
    assert spec.to_dict()["inter_node_link"] == "200Gbps"
    plan, _ = load_plan(sim_args(spec, Candidate("nvidia_h100_sxm", 16)))
    assert plan.settings.inter_node_link_bytes_per_s == 25e9 and plan.step_cost().link_bytes_per_s == 200e9
    assert "inter_node_link" not in SearchSpec(model="m", slo="ttft=1s").to_dict()  # absent unless given
