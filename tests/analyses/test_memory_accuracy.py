"""Every vLLM 0.19 start-up of the corpus that kvledger can read, replayed: available KV within 2% of the log."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvledger.analyses.doctor.memory_accuracy import exact_from_logged, replay

D = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19"
ORACLE = Path(__file__).parents[2] / "benchmarks" / "data" / "oracle_configs"
# transformers' default GemmaConfig / Qwen2MoeConfig, documented as gemma-7b's and Qwen1.5-MoE-A2.7B's (no config of theirs here)
STANDINS = {"google/gemma-7b": ORACLE / "gemma.json", "Qwen/Qwen1.5-MoE-A2.7B": ORACLE / "qwen2_moe.json"}
ROWS = list(csv.DictReader((D / "startups_trimmed.csv").open()))
REPLAYS = {r["log_file"]: replay(r, D / "configs", standins=STANDINS) for r in ROWS}


def test_every_start_up_that_ran_is_replayed_at_tp_1_2_4_and_pp_2_4():
    # 34 of the 40: the 6 others failed to start. CodeLlama-7b and phi-2 are read from the bundled catalog, the 4
    # RedHatAI quantized checkpoints from their base release's config with the reconstructed quantization_config,
    # gemma-7b and Qwen1.5-MoE from transformers' default configs of their architectures.
    done = [x for x in REPLAYS.values() if not x.skipped]
    shapes = {(r["tp"], r["pp"]) for r in ROWS if not REPLAYS[r["log_file"]].skipped}
    assert {r["model"] for r in ROWS if not REPLAYS[r["log_file"]].skipped} >= {
        "codellama/CodeLlama-7b-hf", "microsoft/phi-2", "google/gemma-7b", "Qwen/Qwen1.5-MoE-A2.7B",
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic"}
    assert len(done) == 34 and all(x.skipped == "start-up failed" for x in REPLAYS.values() if x.skipped)
    assert {("1", "1"), ("2", "1"), ("4", "1"), ("1", "2"), ("1", "4")} <= shapes


@pytest.mark.parametrize("row", [r for r in ROWS if not REPLAYS[r["log_file"]].skipped], ids=lambda r: r["log_file"][:60])
def test_available_kv_within_2_percent(row):
    x = REPLAYS[row["log_file"]]
    t = x.term("available KV")
    assert abs(t.rel_error) < 0.02, (x.label, t)
    # the profile terms alone (weights taken as logged) hold too
    assert abs(t.error + x.term("weights").error) / t.logged < 0.02


def test_binding_stage_of_pp_runs_is_the_last():
    x = next(v for v in REPLAYS.values() if "PP4" in v.label)
    # PP3: requested 75.23 − non-KV 6.34 = 68.89 GiB (the log's 2,257,264 tokens = 141,079 blocks of 0.5 MiB);
    # predicted 75.23 − 4.26 − 2.013 − 0.07 = 68.89.
    assert x.rank == "Worker_PP3" and x.term("available KV").predicted == pytest.approx(68.89, abs=0.01)


@pytest.mark.parametrize("row", [r for r in ROWS if r["status"] == "ok"], ids=lambda r: r["log_file"][:60])
def test_blocks_tokens_and_concurrency_exact_from_the_logged_memory(row):
    e = exact_from_logged(row, D / "configs", STANDINS)
    if e is None:
        return
    lo, hi = e["blocks_range"]
    assert lo <= e["logged_blocks"] <= hi
    assert (e["tokens"], e["concurrency"]) == (e["logged_tokens"], e["logged_concurrency"])
