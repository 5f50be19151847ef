"""Host and disk tiers beyond one server are refused (exit 2) before any planning, in every command that takes them
(``accounting/tier_bounds.py``): 8 TiB of DRAM per node, 16 × 122.88 TB of NVMe per node."""

from __future__ import annotations

import pytest
from cli_run import MODEL, refused, run_cli

from kvledger.accounting.tier_bounds import HOST_GIB_PER_NODE_MAX, NVME_GIB_PER_NODE_MAX, refuse_beyond_a_node
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.errors import InputError


def test_the_bounds():
    # 32 DIMM slots × 256 GiB = 8,192 GiB; 16 bays × 122.88 TB = 1.96608e15 B ÷ 2^30 = 1,831,054 GiB (floor)
    assert HOST_GIB_PER_NODE_MAX == 8192
    assert NVME_GIB_PER_NODE_MAX == 1_831_054


def test_per_node_is_the_replicas_gpus_on_one_node():
    h100 = resolve_gpu("H100")  # an 8-GPU SXM baseboard
    refuse_beyond_a_node("x", "host", 2048, h100, 4)  # 2,048 × 4 = 8,192 GiB: exactly the bound, allowed
    with pytest.raises(InputError, match="8,200 GiB on one node for this replica's 4 GPUs"):
        refuse_beyond_a_node("x", "host", 2050, h100, 4)  # 2,050 × 4 = 8,200 > 8,192
    # TP 16 spans two nodes of 8: 1,024 GiB × 8 = 8,192 GiB a node, allowed though the replica holds 16,384
    refuse_beyond_a_node("x", "host", 1024, h100, 16)


@pytest.mark.parametrize("command", [["plan", MODEL], ["offload", MODEL], ["simulate", MODEL, "--num-requests", "5"],
                                     ["goodput", "--slo", "ttft=2s", "--num-requests", "5", "--simulate", MODEL]])
def test_a_host_tier_of_64_tib_is_refused_in_every_command(command):
    # the trial: --kv-offloading-size 64TiB at TP 4 = 65,536 GiB ÷ 4 = 16,384 GiB per GPU, 65,536 GiB on one node
    msg = refused(*command, "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "64TiB")
    assert "16,384 GiB of host memory per GPU, 65,536 GiB on one node" in msg
    assert "at most 8,192 GiB of host memory per node" in msg and "DGX B200" in msg


def test_search_refuses_a_tier_no_node_holds():
    # cpu:16TiB per replica at TP 1: 16,384 GiB on one node > 8,192
    msg = refused("search", MODEL, "--gpus", "H100", "--tp", "1,2", "--slo", "ttft=2s,tpot=50ms", "--offload",
                  "cpu:16TiB")
    assert msg.startswith("--offload cpu:16384GiB (per replica) at TP 1 is 16,384 GiB of host memory per GPU")


def test_nvme_beyond_a_node_is_refused_and_a_real_host_tier_plans():
    # --kv-tier-nvme 300TiB per GPU × 8 GPUs of a TP 8 replica = 2,457,600 GiB > 1,831,054
    msg = refused("plan", MODEL, "--gpu", "H100", "--tp", "8", "--kv-tier-nvme", "300TiB")
    assert "2,457,600 GiB on one node" in msg and "16 U.2 NVMe bays × 122.88 TB" in msg
    assert run_cli("plan", MODEL, "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "2TiB").exit_code == 0


def test_cost_simulate_checks_its_per_gpu_tier_before_the_search():
    # --kv-tier-host is GiB per GPU: 10 TiB = 10,240 GiB on the one GPU of a TP 1 replica > 8,192 GiB a node
    msg = refused("cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=2s", "--utilization", "0.5",
                  "--kv-tier-host", "10TiB")
    assert msg.startswith("--kv-tier-host 10,240 GiB (per GPU) is 10,240 GiB of host memory per GPU, 10,240 GiB on "
                          "one node for this replica's 1 GPU there")
