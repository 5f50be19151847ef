"""``kvledger doctor`` judges the ledger's available KV memory by the plan's own range for it, and words its block
count by the figures (analyses/doctor/startup_verdicts.py :: kv_judgement, analyses/doctor/blocks_words.py).

The log: vLLM 0.19.0's Llama-3.1-8B-Instruct start-up at max_model_len 8192 on one H100 (tests/fixtures/
vllm_startups_0_19/logs/, from ../shared/data/vllm-startups-0.19/). The ledger's own plan for it: device total
85,029,615,043 B × 0.95 (ceil) less weights 16,094,076,928 B, activation peak 2,027,193,139 B and non-torch memory
268,435,456 B = 62,388,428,768 B = 58.10 GiB of KV memory; its range, each term's low/high and the device total's
(accounting/kv_range.py, as `kvledger plan` prints "58.10 GiB (58.01–58.20)"): 62,283,599,196 – 62,492,905,218 B =
58.0061 – 58.2011 GiB, −0.168% / +0.167% of the figure, both "0.17%".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import cli_json, run_cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_startups_0_19"
REAL = str(FIXTURES / "logs" / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
MOVED = str(FIXTURES / "altered" / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.kv-plus-0.5gib.log")
_ROOT = next((p for p in Path(__file__).resolve().parents if (p / "shared" / "data").is_dir()), Path("/nonexistent"))
SHARED = _ROOT / "shared" / "data" / "vllm-startups-0.19" / "logs"  # beside the clone (or a worktree's parent)
PP2 = SHARED / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp2dp1--8192.log"
TP4 = SHARED / "meta-llama-llama-3-1-8b---h100-80gb--tp4pp1dp1--8192.log"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/vllm-startups-0.19 not beside the clone")
RANGE = "the plan's range 58.01–58.20 GiB (±0.17%, from its terms' and the device's ranges)"


def test_a_log_inside_the_plans_range_is_a_match_said_by_that_range():
    # the log's 58.11 GiB (line 52) against the ledger's 58.10 GiB: inside 58.0061–58.2011 GiB. Before: "within the 2%
    # its memory plan is validated to", a criterion 12 times wider than the plan's own ±0.17%
    s = cli_json("doctor", REAL)["startup"]
    assert s["memory_miss"] is None and s["memory_match"] == "inside " + RANGE
    out = run_cli("doctor", REAL).stdout
    assert ("start-up: available KV memory: log 58.11 GiB (line 52), kvledger 58.10 GiB (-0.01 GiB, -0.0%; inside "
            + RANGE + ")") in out.splitlines()
    assert "2%" not in out


def test_a_log_outside_the_range_but_within_two_percent_is_a_miss_by_its_distance_to_the_range():
    # the same log with one figure moved (line 52: 58.61 GiB): −0.51 GiB = −0.9% of it, within 2% (where the two
    # criteria disagree), but 58.61 − 58.2011 = 0.41 GiB above the plan's range: a miss. Before: "within the 2%".
    s = cli_json("doctor", MOVED)["startup"]
    assert s["memory_match"] is None
    assert s["memory_miss"] == ("the ledger's own memory plan gives 58.10 GiB of KV memory against the log's 58.61 GiB "
                                "(-0.51 GiB, -0.9%; the log's figure lies 0.41 GiB above " + RANGE + ", so a miss "
                                "though within the 2% used only where no range applies)")


@needs_shared
def test_a_pipeline_stage_the_plan_gives_no_range_for_falls_back_to_two_percent_and_says_so():
    # PP 2: the log prints stage 0's 66.54 GiB (line 673); the ledger's stage 0 gives 71,478,177,432 B = 66.57 GiB
    # (+0.03 GiB), but the plan's range is the binding stage's (stage 1, 65.64 GiB: 65.35–65.73): no range for stage 0,
    # so the 2%, said with why
    s = cli_json("doctor", str(PP2))["startup"]
    assert s["memory_miss"] is None
    assert s["memory_match"] == ("within the 2% the memory plan is validated to, used as no range applies: the plan "
                                 "ranges its binding pipeline stage only, and the log's figure is another stage's "
                                 "(66.57 GiB in the ledger)")


def test_the_block_count_is_reproduced_only_where_equal_and_a_rounding_gap_is_derived():
    # 58.11 GiB taken as exact: floor(62,395,137,392.64 B / 2,097,152 B) = floor(29,752.32) = 29,752; the log's 476,016
    # tokens / 16 = 29,751 blocks, +1. The log's count takes 29,751 × 2 MiB = 58.1074 GiB up to 29,752 × 2 MiB =
    # 58.1094 GiB, all of which prints as 58.11: the rounding. Before: "the ledger reproduces the log's block count"
    s = cli_json("doctor", REAL)["startup"]
    blocks = next(r for r in s["rows"] if r["term"] == "GPU blocks")
    assert (blocks["log_value"], blocks["ledger_value"], blocks["agrees"]) == (29751, 29752, True)
    assert s["reproduced"] == (
        "the ledger reproduces the log's printed tokens and concurrency from the log's block count; from the log's KV "
        "memory it gives 29,752 blocks, +1 against the log's 29,751: the log prints its KV memory rounded to 2 "
        "decimals, and the ledger takes 58.11 GiB as exact (floor(58.11 GiB / 2,097,152 B) = 29,752); the log's 29,751 "
        "blocks take 58.1074–58.1094 GiB, which prints as 58.11 GiB: the rounding, not a miss")
    assert "start-up: " + s["reproduced"] in " ".join(run_cli("doctor", REAL).stdout.split())
    # equal counts keep the old words: the constructed log's 420,896 tokens / 16 = 26,306 blocks, and 51.38 GiB /
    # 2 MiB = 26,306.6 → 26,306
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
    d = cli_json("doctor", str(logs / "constructed_v1_preemptions_at_full_kv.log"), "--gpu", "H100")["startup"]
    assert d["reproduced"] == ("the ledger reproduces the log's block count, printed tokens and concurrency from the "
                               "log's KV memory")


@needs_shared
def test_a_gap_of_several_blocks_on_a_tp4_log_is_the_rounding_too():
    # TP 4, 524,288 B per block: 67.44 GiB as exact gives floor(72,413,148,610.56 B / 524,288 B) = floor(138,117.12);
    # the log's 138,112 blocks take 138,112 × 0.5 MiB = 67.4375 GiB up to 67.4380 GiB, which prints as 67.44: +5,
    # the rounding
    said = cli_json("doctor", str(TP4))["startup"]["reproduced"]
    assert "it gives 138,117 blocks, +5 against the log's 138,112" in said
    assert said.endswith("the log's 138,112 blocks take 67.4375–67.4380 GiB, which prints as 67.44 GiB: the rounding, "
                         "not a miss")
