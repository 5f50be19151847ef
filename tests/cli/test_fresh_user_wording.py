"""Wording a fresh user read wrong: goodput's TPOT length on inference-perf files, spec-decode's flip table, disagg's
whole-trace replay."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.disagg_view import replay_line

IPERF = Path(__file__).parents[1] / "evidence" / "data" / "inference-perf"


def test_goodput_says_which_output_length_tpot_and_token_goodput_use():
    r = CliRunner().invoke(app, ["goodput", str(IPERF / "stage_2_lifecycle_metrics.json"), "--slo",
                                 "ttft=200ms,tpot=50ms"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    # config.yaml: ignore_eos with output_len 64; the file's successes.output_len mean is 62.75
    assert ("output from config.yaml: every request generated to 64 tokens (ignore_eos)" in out)
    assert ("the file's output_len (mean 62.75) re-tokenizes each response's text, which under-counts what the engine "
            "generated: TPOT divides by the 64 generated, token goodput keeps the file's count") in out


def test_spec_decode_flip_table_does_not_read_as_a_contradiction():
    r = CliRunner().invoke(app, ["spec-decode", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "-k", "4",
                                 "--acceptance", "0.7"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    rows = [" ".join(x.split()) for x in r.stdout.splitlines() if x.startswith("│")]
    flips = {x.split("│")[1].strip(): [c.strip() for c in x.split("│")[2:-1]] for x in rows if x.count("│") == 5}
    # 256 tokens flips at batch 247, inside the 1,024-request pool; 2,048 tokens never flips up to max_num_seqs
    assert flips["256"] == ["247", "1,024 requests", "yes"]
    assert flips["2,048"] == ["none up to max_num_seqs", "218 requests", "— (no flip)"]
    assert "never (≤ max_num_seqs)" not in r.stdout and "flip within the pool" in r.stdout


def test_disagg_says_it_replays_the_whole_trace_and_how_to_go_faster():
    assert replay_line("azure-conv", 19366, True) == (
        "disagg: replaying 19,366 requests of azure-conv on every deployment (the whole trace; --num-requests N "
        "replays only the first N, faster)")
    assert replay_line("azure-conv", 200, False) == "disagg: replaying 200 requests of azure-conv on every deployment"
    r = CliRunner().invoke(app, ["disagg", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "12",
                                 "--no-tune", "--prefill-gpus", "1", "--decode-gpus", "1"])
    assert r.exit_code == 0, r.output
    assert "trace azure-conv, 12 requests at" in " ".join(r.stdout.split()) and "the whole trace" not in r.output
