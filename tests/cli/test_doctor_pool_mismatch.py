"""`kvledger doctor` sizes no capacity option from a plan whose KV page does not make the log's pool (a new user's
trial: `--model Qwen/Qwen2.5-7B` on a Llama-3.1-8B log printed "--kv-cache-dtype fp8: 120,258 blocks" against the
26,306 as logged, ×4.6 for a dtype that halves the page, and "--max-num-seqs 127: +148.5%")."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run_cli

# start-up figures of a real measurement (llm-d-benchmark, Llama-3.1-8B-Instruct, H100, max_model_len 16000; the
# fixture's README): available KV 51.38 GiB (line 6), 420,896 tokens = 26,306 blocks × 16 (line 7)
LOG = Path(__file__).parents[1] / "fixtures" / "vllm_logs" / "constructed_v1_preemptions_at_full_kv.log"


def _capacity(*args: str) -> dict:
    res = run_cli("doctor", str(LOG), *args, "--json")
    assert res.exit_code == 0, res.output
    return next(f for f in json.loads(res.stdout)["findings"] if f["name"] == "capacity")


def test_another_models_page_sizes_no_option():
    cap = _capacity("--model", "Qwen/Qwen2.5-7B")
    # Qwen2.5-7B: 2 (K,V) × 28 layers × 4 KV heads × 128 × 2 B = 57,344 B/token; × 16 = 917,504 B per block;
    # floor(51.38 × 2^30 / 917,504) = 60,129 blocks, not the log's 26,306 (51.38 GiB / 26,306 ≈ 2,097,197 B per block,
    # Llama-3.1-8B's 2 MiB page): only the pool as logged is shown, no re-planned option
    assert [o["action"] for o in cap["options"]] == ["as logged"]
    assert cap["options"][0]["num_gpu_blocks"] == 26306
    assert "makes 60,129 blocks, against the 26,306 the log prints" in cap["message"]
    assert "917,504 B per block" in cap["message"] and "no option is sized" in cap["message"]


def test_the_served_models_page_keeps_every_option():
    cap = _capacity("--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    # Llama-3.1-8B: 131,072 B/token × 16 = 2 MiB per block; floor(51.38 GiB / 2 MiB) = 26,306 = the log's count
    acts = [o["action"] for o in cap["options"]]
    assert acts[0] == "as logged" and "--kv-cache-dtype fp8" in acts and "--max-num-seqs 127" in acts
    fp8 = next(o for o in cap["options"] if o["action"] == "--kv-cache-dtype fp8")
    assert fp8["num_gpu_blocks"] == 52613  # floor(51.38 GiB / 1 MiB): the page halves, the blocks double (+1)
    assert "no option is sized" not in cap["message"]


def test_tp_option_on_a_stand_in_gpu_says_so():
    # the log prints no device total and no GPU name: --tensor-parallel-size 2 is re-planned on a stand-in GPU
    # (non-torch 0.33 GiB per GPU at TP 2) and gave 60,064 blocks where --gpu H100 gives 58,282 (its measured
    # 2.07 GiB at TP 2), with nothing in the brief line to tell them apart
    bare = " ".join(run_cli("doctor", str(LOG)).stdout.split())
    assert ("--tensor-parallel-size 2: 60,064 blocks per replica of 2 GPUs (1 as logged; its per-GPU terms on a "
            "stand-in GPU, --gpu names yours)") in bare
    named = " ".join(run_cli("doctor", str(LOG), "--gpu", "H100").stdout.split())
    assert "--tensor-parallel-size 2: 58,282 blocks per replica of 2 GPUs (1 as logged)," in named
    assert "stand-in" not in named
