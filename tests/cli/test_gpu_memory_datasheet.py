"""plan --gpu-memory given a catalog GPU's datasheet capacity (the "80GB" in "H100 80GB") instead of the device total
CUDA reports: the plan takes the figure given, and a note says which figure that was and what CUDA reports."""

from __future__ import annotations

from cli_run import MODEL, run_cli

from kvledger.catalog.gpu_file import datasheet_memory_note
from kvledger.catalog.gpus import get_gpu


def test_80gb_on_an_h100_is_said_to_be_the_datasheet_figure():
    # 80 GB = 80e9 B = 74.51 GiB; CUDA reports the H100 80GB SXM5's total as 79.19 GiB (catalog): 4.68 GiB less KV
    # pool, which the plan printed without a word ("device total 74.51 GiB")
    res = run_cli("plan", MODEL, "--gpu", "h100-sxm", "--gpu-memory", "80GB")
    assert res.exit_code == 0, res.output
    assert "device total 74.51 GiB" in res.stdout
    assert ("note: --gpu-memory 74.51 GiB is the NVIDIA H100 80GB SXM5's datasheet capacity, 80 GB, read as GB "
            "(10^9 B), not what CUDA reports: 79.19 GiB (catalog, what the plan takes without --gpu-memory); the plan "
            "sizes the KV pool from the figure given (-4.68 GiB)") in res.stdout
    assert len(res.stdout.splitlines()) <= 26


def test_a_bare_number_read_as_gib_and_a_measured_total_taken_as_given():
    h100 = get_gpu("h100-sxm")
    # bare 80 = 80 GiB: 0.81 GiB more than CUDA's 79.19
    assert datasheet_memory_note(h100, 80 * 2**30).endswith("read as GiB (2^30 B), not what CUDA reports: 79.19 GiB "
                                                            "(catalog, what the plan takes without --gpu-memory); the "
                                                            "plan sizes the KV pool from the figure given (+0.81 GiB)")
    # a log's own total (79.18 GiB, another driver) or the catalog's is a measurement: no note
    assert datasheet_memory_note(h100, int(79.18 * 2**30)) is None
    assert datasheet_memory_note(h100, h100.memory_bytes) is None
