"""What a fresh user found in goodput, simulate's host KV tier and kv-eviction's help, each pinned: a file of several
runs answers first with its best run's goodput; a host tier planned as vLLM 0.19.0 cites the capacity rule and the
options of that release, not 0.14.0's or 0.33.0's; kv-eviction's help says --evict is required, as its error does."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvledger.accounting.kv_tier_rules import vllm_host_tokens
from kvledger.cli.main import app
from kvledger.errors import InputError

GUIDELLM = str(Path(__file__).resolve().parents[1] / "evidence" / "data" / "guidellm"
               / "llmd_fixture_guidellm_report_v2_mockserver.json")
runner = CliRunner()


def test_a_file_of_two_runs_answers_first_with_its_best_runs_goodput():
    # was: no answer line at all (only a lone run, or --target's boundary, had one)
    res = runner.invoke(app, ["goodput", GUIDELLM, "--slo", "ttft=500ms,tpot=50ms"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    # run 2: 2 good of 2 over 2.519 s (0.794 req/s) against run 1's 2 over 5.020 s (0.398)
    assert first == ("answer: 0.794 good req/s (100.0% of 2 requests within the SLO) — e2e-mock-model; the best of 2 "
                     "runs: #2 llmd_fixture_guidellm_report_v2_mockserver.json [benchmark 1 (constant @ 4.0 req/s)] "
                     "(each run in the table)")
    assert res.output.count("answer:") == 1
    boundary = runner.invoke(app, ["goodput", GUIDELLM, "--slo", "ttft=500ms,tpot=50ms", "--target", "0.9"])
    assert boundary.output.startswith("answer: SLO boundary on request_rate")  # --target's answer, not the best run's
    assert "the best of 2 runs" not in boundary.output


def test_the_native_capacity_rule_is_cited_for_the_release_planned():
    # 64 GiB over 2 MiB blocks (Llama-3.1-8B, 16 tokens): 32,768 blocks by either rule; 0.19.0's CPUOffloadingSpec
    # words it as cpu_bytes_to_use // (bytes per block × world_size), 0.14.0 as a per-rank share
    new = vllm_host_tokens(64, "native", (0, 19, 0), 2_097_152, 16, 1)
    old = vllm_host_tokens(64, "native", (0, 14, 0), 2_097_152, 16, 1)
    assert new[:2] == old[:2] == (32_768 * 16, 16)
    assert new[2] == ("num_blocks = 64 × 2^30 B // (2,097,152 B per block × 1 rank) = 32,768 CPU blocks (vLLM "
                      "CPUOffloadingSpec as read in 0.19.0 and 0.20.0: cpu_bytes_to_use over every rank's copy of a "
                      "block, one CPU block per GPU block)")
    assert old[2].endswith("= 32,768 CPU blocks (vLLM 0.11.1–0.14.0: one CPU block per GPU block)")


def test_simulate_as_vllm_0_19_cites_that_releases_offload_rules():
    # was: "vllm 0.19.0 rules" above a capacity rule of 0.11.1–0.14.0 and a note on "opt-in extra_config in 0.33.0"
    res = runner.invoke(app, ["simulate", "llama-3.1-8b", "--gpu", "h100", "--num-requests", "20",
                              "--kv-offloading-size", "64", "--engine-version", "0.19.0"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "vllm 0.19.0 rules" in text
    assert "(vLLM CPUOffloadingSpec as read in 0.19.0 and 0.20.0: cpu_bytes_to_use over every rank's copy" in text
    assert "write-through, kv_offload LRU; ARC is opt-in extra_config, eviction_policy, as from vLLM 0.11.1)" in text
    assert "0.14.0" not in text and "0.33.0" not in text


def test_kv_eviction_help_marks_evict_required_as_its_error_does():
    res = runner.invoke(app, ["kv-eviction", "--help"], env={"COLUMNS": "200"})
    block = " ".join(res.output.split("--evict ", 1)[1].split("--layout <str>", 1)[0].split())
    # required except with --layout sink-window --window W (a later trial: "[required]" alone hid that exception)
    assert block == ("<float> Share of the sequence's tokens evicted, 0–1 (e.g. 0.9). Required, except with --layout "
                     "sink-window --window W, which fixes the share instead (give one, not both).")
    bare = runner.invoke(app, ["kv-eviction", "llama-3.1-8b", "--gpu", "h100"])
    # the console entry prints this one paragraph and exits with status 2
    assert isinstance(bare.exception, InputError)
    assert str(bare.exception) == "give --evict (the share of tokens evicted)"
