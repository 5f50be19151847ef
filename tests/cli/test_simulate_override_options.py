"""The preemption options under a block-count override say what their block counts compare. simulate's
--num-gpu-blocks-override is read as the pool a server's memory left: every option moves its blocks × bytes per block
by what the ledger's plan moves with its flag, and the answer names that basis. A log whose settings fix the count
(doctor) has every option planned with it, as vLLM runs a flag with the override still set: none moves the pool."""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json

from kvledger.units import GiB, MiB

RUN = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "fixed:1000", "--output-lengths", "fixed:200",
       "--num-requests", "200", "--rate", "20", "--max-model-len", "4096"]


def _available_kv(tp: int) -> int:
    return cli_json("plan", *RUN[:3], "--max-model-len", "4096", "--tp", str(tp))["memory"]["available_kv_bytes"]


def test_the_tp_option_moves_the_override_budget_by_the_ledgers_terms_and_says_so():
    p = cli_json("simulate", *RUN, "--num-gpu-blocks-override", "600")["preemptions"]
    rows = {o["action"]: o for o in p["options"]}
    # a block: 32 layers × 2 (K, V) × 8 KV heads × 128 × 2 B × 16 tokens = 2 MiB at TP 1; at TP 2 a GPU holds 4 KV
    # heads: 1 MiB.
    # the override's 600 blocks read as 600 × 2 MiB = 1,200 MiB of KV memory per GPU
    assert rows["as simulated"]["num_gpu_blocks"] == 600
    # FP8 moves no term: the same 1,200 MiB in 1 MiB pages, 1,200 blocks, ×2.00
    assert rows["--kv-cache-dtype fp8"]["num_gpu_blocks"] == 1200
    # TP 2 moves the budget by the ledger's change in available KV between its TP 1 and TP 2 plans (no override):
    # weights 14.99 → 7.51 GiB and non-torch memory 0.25 → 2.07 GiB a GPU, +5.66 GiB; (1,200 MiB + Δ) ÷ 1 MiB
    delta = _available_kv(2) - _available_kv(1)
    assert abs(delta / GiB - (14.99 - 7.51 - (2.07 - 0.25))) < 0.01
    tp2 = rows["--tensor-parallel-size 2"]["num_gpu_blocks"]
    assert tp2 == (600 * 2 * MiB + delta) // MiB == 6992
    assert f"--tensor-parallel-size 2 → 6,992 blocks on 2 GPUs (×{6992 / 600:.2f})" in p["what_to_change"]  # ×11.65
    # the basis, and the ledger's own pool without the override (its TP 1 plan: 28,160 blocks)
    assert ("the options read its 600 blocks × 2 MiB per block = 1.17 GiB as the KV memory per GPU and move that by "
            "the terms each flag moves in the ledger's plan, so every ratio is to these 600 blocks"
            ) in p["what_to_change"]
    assert ("vLLM keeps an override's block count under any flag (kv_cache_planning.may_override_num_blocks): set "
            "together with the override, no flag here changes the pool") in p["what_to_change"]
    free = cli_json("plan", *RUN[:3], "--max-model-len", "4096")["memory"]["num_gpu_blocks"]
    assert f"without the override the ledger plans {free:,} blocks for these settings" in p["what_to_change"]


def test_a_planned_pool_of_about_the_same_size_takes_the_ledgers_own_plans():
    # --gpu-memory-utilization 0.24 leaves the ledger 589 blocks: the pool is its plan, not an override, so each option
    # is the ledger's plan with the flag (what `kvledger plan` prints with it), and no basis sentence is added
    gmu = ["--gpu-memory-utilization", "0.24"]
    p = cli_json("simulate", *RUN, *gmu)["preemptions"]
    rows = {o["action"]: o for o in p["options"]}
    assert rows["as simulated"]["num_gpu_blocks"] == 589
    planned = cli_json("plan", *RUN[:3], "--max-model-len", "4096", "--tp", "2", *gmu)["memory"]["num_gpu_blocks"]
    assert rows["--tensor-parallel-size 2"]["num_gpu_blocks"] == planned
    assert "block-count override" not in p["what_to_change"]


def test_doctor_with_a_logged_override_says_no_option_moves_the_pool(tmp_path):
    # the constructed V1 log of preemptions at full KV, its printed KV memory and capacity lines dropped and
    # 'num_gpu_blocks_override': 2000 among its non-default args: the pool is the override, 2,000 blocks, and each
    # option planned with it (as vLLM runs a flag with the override still set) keeps 2,000 blocks: ×1.00
    src = Path("tests/fixtures/vllm_logs/constructed_v1_preemptions_at_full_kv.log").read_text().splitlines()
    drop = ("Available KV cache memory", "GPU KV cache size", "Maximum concurrency")
    log = tmp_path / "override.log"
    log.write_text("\n".join(line.replace("'max_model_len': 16000}", "'max_model_len': 16000, "
                                          "'num_gpu_blocks_override': 2000}")
                             for line in src if not any(d in line for d in drop)) + "\n")
    d = cli_json("doctor", str(log), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    (cap,) = [f for f in d["findings"] if f["name"] == "capacity"]
    assert cap["verdict"] == "capacity_bound_preemptions"
    assert {o["num_gpu_blocks"] for o in cap["options"]} == {2000} and len(cap["options"]) == 6
    free = cli_json("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "16000",
                    "--engine-version", "0.11.0")["memory"]["num_gpu_blocks"]  # the log's release's rules: 26,315
    assert cap["options"][0]["notes"] == [
        "the pool is the block-count override (num_gpu_blocks_override, line 2): vLLM keeps an override's block count "
        "under any flag (kv_cache_planning.may_override_num_blocks), so each option here, set with it, keeps 2,000 "
        f"blocks; only raising or dropping the override changes the pool; without the override the ledger plans "
        f"{free:,} blocks for these settings"]
