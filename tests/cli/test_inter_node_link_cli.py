"""``--inter-node-link``: the NIC a TP group over nodes runs its all-reduces on, in plan's text and --json and in
simulate's step-cost source; an unreadable value refused with the flag named.

DeepSeek-V3 at --tp 16 on H100 (8 a board): the plan assumes 2 nodes of 8; with --inter-node-link 200Gbps (25 GB/s a
GPU, one direction) NCCL's ring runs at 8 × 25 = 200 GB/s, and each call adds NCCL's 25.0 µs for the network steps
((28 × 1.0 + 2 × 2.7) − 14 × 0.6 µs: tests/accounting/test_tp_network.py) to the one-node 34.32 µs.
"""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli

V3 = "deepseek-ai/DeepSeek-V3"


def test_plan_json_states_the_ring_across_nodes():
    r = cli_json("plan", V3, "--gpu", "H100", "--tp", "16", "--inter-node-link", "200Gbps", "--json")["roofline"]
    assert r["allreduce_tp_nodes"] == 2 and r["allreduce_algorithm"] == "NCCL ring across nodes"
    assert r["allreduce_link_bytes_per_s"] == 200e9 and r["inter_node_link_bytes_per_s"] == 25e9
    assert r["inter_node_link_source"] == "given (--inter-node-link)"
    assert r["allreduce_inter_node_latency_s"] == pytest.approx(25.0e-6)
    assert r["allreduce_latency_s"] == pytest.approx(34.32e-6 + 25.0e-6, abs=1e-8)
    default = cli_json("plan", V3, "--gpu", "H100", "--tp", "16", "--json")["roofline"]
    assert default["allreduce_link_bytes_per_s"] == 400e9  # 8 × one 400 Gb/s NIC (50 GB/s) a GPU
    assert "one 400 Gb/s NIC per GPU" in default["inter_node_link_source"]
    one_node = cli_json("plan", V3, "--gpu", "H200", "--tp", "8", "--json")["roofline"]
    assert "allreduce_tp_nodes" not in one_node


def test_plan_text_and_simulate_source_say_so():
    out = run_cli("plan", V3, "--gpu", "H100", "--tp", "16", "--verbose").output
    assert "roofline priced by: TP all-reduces across 2 nodes: NCCL's ring at 400 GB/s a direction" in out
    # the short plan: one line at 80 columns, the ring's bound and latency left to --verbose
    short = run_cli("plan", V3, "--gpu", "H100", "--tp", "16").output
    assert "roofline priced by: TP all-reduces as NCCL's ring across 2 nodes at 400 GB/s\n" in short
    sim = run_cli("simulate", V3, "--gpu", "H100", "--tp", "16", "--num-requests", "5",
                  "--inter-node-link", "100GB/s").output
    assert "across 2 nodes: NCCL's ring at 450 GB/s a direction (bound by the node's link" in sim


def test_unreadable_inter_node_link_is_refused():
    msg = refused("plan", V3, "--gpu", "H100", "--tp", "16", "--inter-node-link", "fast")
    assert msg.startswith("--inter-node-link: cannot read 'fast'")


def test_a_link_past_the_range_is_refused_in_the_flags_units():
    # 1e30 Gbps = 1e30 × 1e9 b/s ÷ 8 = 1.25e38 B/s = 1.25e29 GB/s, past the settings' 1e15 B/s = 1,000,000 GB/s;
    # the error named the settings field (--inter-node-link-bytes-per-s, no such flag) and 1.2500000000000001e+38
    msg = refused("plan", V3, "--gpu", "H100", "--tp", "16", "--inter-node-link", "1e30Gbps")
    assert "--inter-node-link 1e30Gbps: 1.25e+29 GB/s per GPU and direction is out of range" in msg
    assert "allowed: up to 1,000,000 GB/s" in msg and "bytes-per-s" not in msg


def test_a_nic_nothing_crosses_is_said_to_have_no_effect():
    base = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "4", "--inter-node-link",
            "100Gbps")
    # TP 2 of an 8-GPU board stays in one node: the flag used to be taken and ignored without a word
    one = cli_json(*base, "--tp", "2")
    assert any(n.startswith("--inter-node-link 100Gbps has no effect here") for n in one["notes"])
    # TP 16 spans 2 nodes: the NIC prices its all-reduces, no such note
    assert not any("has no effect here" in n for n in cli_json(*base, "--tp", "16")["notes"])
