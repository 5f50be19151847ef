"""The P/D KV link follows the nodes a prefill/decode pair needs: NVLink inside one 8-GPU baseboard, the network across
two (a TP 8 prefill replica and a TP 8 decode replica of DeepSeek-V3 on HGX H200 sit on two nodes)."""

from __future__ import annotations

from kvledger.catalog.gpus import get_gpu
from kvledger.dynamics.engine.kv_link_nodes import pair_link


def test_pair_on_one_baseboard_keeps_nvlink():
    # TP 4 + TP 4 = 8 GPUs: one HGX H200 board; NVLink 4 900 GB/s bidirectional ÷ 2 = 450 GB/s one way
    link, note = pair_link(get_gpu("H200-SXM"), "auto", 4, 4, 1e-3)
    assert (link.name, link.bytes_per_s, note) == ("nvlink", 450e9, None)


def test_pair_across_two_nodes_goes_over_the_network():
    # TP 8 + TP 8 = 16 GPUs > 8 on the board: the KV crosses nodes at one 400 Gb/s NIC per GPU = 400e9 / 8 = 50e9 B/s
    link, note = pair_link(get_gpu("H200-SXM"), "auto", 8, 8, 1e-3)
    assert (link.name, link.bytes_per_s, link.latency_s) == ("network", 50e9, 1e-3)
    assert "need 16 GPUs, more than one node holds (8" in note
    # NVLink given for such a pair: kept as asked, with a warning
    link, note = pair_link(get_gpu("H200-SXM"), "nvlink", 8, 8, 1e-3)
    assert link.name == "nvlink" and note.startswith("warning: --link nvlink, but")
    # a bandwidth given is taken as is, with nothing to say
    link, note = pair_link(get_gpu("H200-SXM"), "25GB/s", 8, 8, 1e-3)
    assert (link.name, link.bytes_per_s, note) == ("network", 25e9, None)


def test_pcie_card_without_nvlink_uses_its_host_link():
    link, note = pair_link(get_gpu("L40S"), "auto", 1, 1, 1e-3)
    assert link.name == "pcie" and note is None
