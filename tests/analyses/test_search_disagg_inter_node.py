"""``search --inter-node-link`` reaches the disaggregated pools (``capacity._study``): a pool's TP group over nodes and
the KV link between a prefill and a decode replica on different nodes are priced at the NIC given, as `simulate`'s
TP groups are (``tp_network``), not at the assumed 400 Gb/s."""

from __future__ import annotations

import pytest

from kvledger.analyses.search import SearchSpec
from kvledger.analyses.search.capacity import _study
from kvledger.analyses.search.spec import Candidate
from kvledger.analyses.serving.plan_pricing import split_host
from kvledger.ledgers.slo import parse_slo

# Llama-3.1-70B, one prefill replica at TP 8 and one decode replica at TP 16 on H100 SXM (8-GPU baseboards): the decode
# pool's TP group spans 2 nodes, and the pair needs 8 + 16 = 24 GPUs, more than a node: the KV crosses the network
UNIT = Candidate("nvidia_h100_sxm", 8, prefill_replicas=1, decode_replicas=1, decode_tp=16)


def _study_at(link: str | None):
    spec = SearchSpec(model="meta-llama/Llama-3.1-70B", slo="ttft=1s,tpot=100ms", utilization=0.5,
                      gemm_efficiency="flat", inter_node_link=link)
    return _study(spec, UNIT, parse_slo(spec.slo))


@pytest.mark.parametrize(("link", "nic_Bps"), [(None, 50e9), ("200Gbps", 25e9)])
def test_the_pools_and_the_kv_link_take_the_nic(link, nic_Bps):
    study, _, kind = _study_at(link)
    # the KV link: one NIC a GPU, 400 Gb/s = 50 GB/s assumed, 200 Gb/s = 25 GB/s given
    assert kind == "network" and study.link.bytes_per_s == nic_Bps
    assert ("--inter-node-link" in study.link.source) == (link is not None)
    # the TP-16 decode pool's all-reduce: NCCL's ring over 2 nodes of 8, min(450 GB/s NVLink, 8 × NIC): 400 GB/s
    # assumed, 8 × 25 = 200 GB/s given
    decode = split_host(study.priced(16)[0])[0]
    assert decode.allreduce_span.nodes == 2 and decode.link_bytes_per_s == min(450e9, 8 * nic_Bps)
    # the TP-8 prefill pool stays within a node: NVLink's 450 GB/s a direction either way
    assert split_host(study.priced(8)[0])[0].link_bytes_per_s == 450e9
