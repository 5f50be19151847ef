"""What vLLM's process holds at its start-up snapshot (accounting/startup_free.py), re-derived from the vLLM 0.19.0
H100 records of benchmarks/data/vllm_snapshot_held.csv, and the free-memory arithmetic the start-up checks share."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest

from kvledger.accounting.memory import Deduction
from kvledger.accounting.startup_free import (
    LINUX_CONTEXT_GIB,
    SNAPSHOT_GPU_ID,
    VLLM_DIST_INIT_GIB,
    VLLM_SNAPSHOT_CONTEXT_GIB,
    snapshot_free,
    vllm_snapshot_held,
    vllm_snapshot_ranks,
)
from kvledger.catalog.gpus import get_gpu
from kvledger.units import GiB

ROOT = Path(__file__).resolve().parents[2]
ROWS = list(csv.DictReader((ROOT / "benchmarks" / "data" / "vllm_snapshot_held.csv").open()))


def test_the_records_keep_their_source_and_agree_with_their_own_free_memory():
    # 38 start-ups with a snapshot line (of the corpus's 40: two fail before it), every one on the corpus's H100, each
    # naming its file, commit and licence; cuda_memory = total − free to the print's 0.01 GiB
    assert len(ROWS) == 38
    for r in ROWS:
        assert r["gpu"] == SNAPSHOT_GPU_ID
        assert "jgchn/llm-d-planner@3c876c8" in r["source"] and "Apache-2.0" in r["source"]
        total, free, held = float(r["init_total_gib"]), float(r["init_free_gib"]), float(r["init_cuda_gib"])
        assert total == 79.19 and abs(total - free - held) <= 0.011


def test_one_gpu_holds_0_51_gib_in_every_start_up():
    # TP·PP = 1: 27 records, cuda_memory 0.51 GiB in each (no spread; the print's half step ±0.005 is the range)
    one = [float(r["init_cuda_gib"]) for r in ROWS if int(r["tp"]) * int(r["pp"]) == 1]
    assert len(one) == 27 and set(one) == {0.51}
    assert VLLM_SNAPSHOT_CONTEXT_GIB == (0.51 - 0.005, 0.51, 0.51 + 0.005)


def test_the_distributed_init_adds_0_92_to_1_56_gib():
    # TP·PP > 1: 11 records, 1.43 (PP 2) … 2.07 (Llama-4-Scout TP 4), median 1.53 (TP 2); less the 0.51 GiB context:
    # 0.92, 1.02, 1.56. The two MoE shapes (Mixtral TP 2 2.01, Scout TP 4 2.07) are the top three: their EP group.
    multi = sorted(float(r["init_cuda_gib"]) for r in ROWS if int(r["tp"]) * int(r["pp"]) > 1)
    assert multi == [1.43, 1.48, 1.48, 1.53, 1.53, 1.53, 1.55, 1.55, 2.01, 2.07, 2.07]
    dist = (min(multi) - 0.51, statistics.median(multi) - 0.51, max(multi) - 0.51)
    assert VLLM_DIST_INIT_GIB == pytest.approx(dist, abs=1e-9)
    assert {r["model"] for r in ROWS if float(r["init_cuda_gib"]) > 2} == {
        "mistralai/Mixtral-8x7B-Instruct-v0.1", "meta-llama/Llama-4-Scout-17B-16E-Instruct"}
    assert all(r["moe"] == "yes" for r in ROWS if float(r["init_cuda_gib"]) > 2)


def test_held_term_by_gpu_and_ranks():
    # H100 at TP 1: 0.51 GiB (0.505–0.515); TP 2: 0.51 + 1.02 = 1.53 (1.425–2.075); elsewhere the Linux context
    # (0.37, 0.45, 0.51), + 1.02 (0–1.56: the distributed init measured on NVLink H100s only, from nothing on a GPU
    # not measured) at TP 4: 1.47 (0.37–2.07)
    h100, l40s = get_gpu("H100-SXM"), get_gpu("L40S")
    for gpu, ranks, want in ((h100, 1, (0.505, 0.51, 0.515)), (h100, 2, (1.425, 1.53, 2.075)),
                             (l40s, 1, LINUX_CONTEXT_GIB), (l40s, 4, (0.37, 1.47, 2.07))):
        d = vllm_snapshot_held(gpu, ranks)
        assert (d.low_bytes / GiB, d.bytes / GiB, d.high_bytes / GiB) == pytest.approx(want, abs=1e-9)
    # the snapshot follows the distributed init from 0.11.0 only
    assert (vllm_snapshot_ranks((0, 10, 0), 2, 2), vllm_snapshot_ranks((0, 11, 0), 2, 2)) == (1, 4)


def test_snapshot_free_band_and_largest_utilization():
    # total 100 B, two terms 5 (4–6) and 10 (8–13): free 85 (81–88); 81 starts, 85 below the point, 88 below the high
    # end, 89 above; largest utilization floor(free ÷ total × 1000) / 1000 = 0.85 (0.81–0.88)
    sf = snapshot_free(100, Deduction("a", 5, "", 4, 6), Deduction("b", 10, "", 8, 13))
    assert (sf.free, sf.low, sf.high) == (85, 81, 88)
    assert [sf.band(x) for x in (81, 85, 88, 89)] == ["starts", "below_point", "below_high", "above"]
    assert sf.max_utilizations() == (0.85, 0.81, 0.88)
