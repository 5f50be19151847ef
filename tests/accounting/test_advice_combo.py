"""A plan that does not fit is offered the smaller TP an FP8 change makes enough (a fresh user's trial: Llama-3.1-70B
on one H100 was offered --tp 4 and a bigger GPU, where --tp 2 with FP8 weights holds the full context)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app


def test_half_the_gpus_with_fp8_weights():
    res = CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--json"])
    assert res.exit_code == 3  # does not fit on one GPU
    opts = {o["action"]: o for o in json.loads(res.stdout)["advice"]["options"]}
    # TP alone needs 4: at TP 2 the 141 GB of bf16 weights leave no room for a 131,072-token request
    assert "--tp 4" in opts and "--tp 2" not in opts
    # --tp 2 -q fp8: about half the weight bytes freed, 34.24 GiB of KV per GPU; one 131,072-token request takes
    # 131,072 × 163,840 B (80 layers × 8 KV heads × 128 × 2 (K, V) × 2 B ÷ TP 2) = 20.0 GiB: 34.24 / 20.0 = 1.71x
    combo = opts["--tp 2 -q fp8"]
    assert (combo["max_requests"], round(combo["max_concurrency"], 2)) == (1, 1.71)
    assert combo["detail"].endswith("34.24 GiB KV per GPU; 2 GPUs where TP alone needs 4")
    # FP8 KV alone at TP 2 is not enough (the weights still fill the GPU), so it is not offered, nor the pair
    assert "--tp 2 --kv-cache-dtype fp8" not in opts and "--tp 2 -q fp8 --kv-cache-dtype fp8" not in opts


def test_no_combination_where_the_next_tp_fits_alone():
    # Llama-3.1-8B at its full context on an RTX 4090 (22 GiB): TP 2 fits alone, so no TP below it is left to pair
    res = CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "RTX 4090", "--json"])
    opts = [o["action"] for o in json.loads(res.stdout)["advice"]["options"]]
    assert "--tp 2" in opts and not any(a.startswith("--tp 2 ") for a in opts)
