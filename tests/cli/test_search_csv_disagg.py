"""``search --disagg --csv``: a disaggregated unit's row names both pools, the prefill and the decode side (it gave the
prefill side's TP and KV blocks alone, so a row did not say the deployment)."""

from __future__ import annotations

import csv

from cli_run import run_cli

# Llama-3.2-3B on H100 at TP 1 and 2, colocated and disaggregated 1 prefill : 2 decode engines, sized for 40 req/s
SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1,2",
          "--max-model-len", "8K", "--num-requests", "60", "--rate", "40", "--disagg", "--disagg-splits", "1:2",
          "--backend", "serial"]


def test_a_disaggregated_row_names_the_prefill_and_the_decode_pool(tmp_path):
    out = tmp_path / "s.csv"
    res = run_cli(*SEARCH, "--csv", str(out))
    assert res.exit_code == 0, res.output
    rows = {r["id"]: r for r in csv.DictReader(out.open())}
    tp1, tp2 = rows["nvidia_h100_sxm:tp1:kv-auto"], rows["nvidia_h100_sxm:tp2:kv-auto"]
    unit = rows["nvidia_h100_sxm:p1xtp1+d2xtp2:kv-auto"]
    # 1 prefill engine at TP 1 (1 GPU) + 2 decode engines at TP 2 (4 GPUs) = 5 GPUs per unit
    assert [unit[k] for k in ("tp", "prefill_replicas", "prefill_gpus", "decode_replicas", "decode_tp", "decode_gpus",
                              "num_gpus_per_unit")] == ["1", "1", "1", "2", "2", "4", "5"]
    # each pool's KV blocks are its engine's plan: the prefill engine's those of the colocated TP 1 candidate (37,442
    # blocks), the decode engine's those of the colocated TP 2 one (76,225)
    assert (unit["num_gpu_blocks"], unit["decode_num_gpu_blocks"]) == ("37442", "76225")
    assert (tp1["num_gpu_blocks"], tp2["num_gpu_blocks"]) == ("37442", "76225")
    # one unit carries the 40 req/s: 1 replica × 5 GPUs = 5 GPUs, × $2.69/GPU-h (RunPod H100) × 730 h = $9,818.50
    assert (unit["replicas"], unit["num_gpus"], unit["rental_usd_per_month"]) == ("1", "5", "9818.5")
    # the other way round: 1 prefill engine at TP 2 + 2 decode engines at TP 1 = 2 + 2 = 4 GPUs
    other = rows["nvidia_h100_sxm:p1xtp2+d2xtp1:kv-auto"]
    assert [other[k] for k in ("tp", "prefill_gpus", "decode_tp", "decode_gpus", "num_gpus_per_unit")] == \
        ["2", "2", "1", "2", "4"]
    # a colocated row: one engine of tp GPUs, the pool columns blank
    assert (tp2["num_gpus_per_unit"], tp2["prefill_replicas"], tp2["decode_tp"], tp2["decode_num_gpu_blocks"]) == \
        ("2", "", "", "")
