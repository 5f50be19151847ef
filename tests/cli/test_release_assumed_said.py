"""The short plan (and simulate's notes) say when a release's rules were not its own: a pre-release planned as the
release it precedes, or a rule whose code was not read in this release and was taken from the nearest release read.
Before, both were silent outside --verbose (``0.33.0rc1`` printed "vllm 0.33.0" and nothing else)."""

from __future__ import annotations

from cli_run import MODEL, run_cli

from kvledger.accounting.vllm_releases import assumed_rules_note, prerelease_note

# vllm_inflight.py's note from 0.26 (max_concurrent_batches, read in the 0.26–0.29 and 0.33 wheels)
INFLIGHT = ("vLLM 0.26+ rule: 2 × max_num_batched_tokens in flight (config/vllm.py::max_concurrent_batches; V2 model "
            "runner, PP 1: PP + 1 = 2; read in 0.26–0.29 and 0.33, 0.30–0.32 not read; assumed the same)")


def test_a_pre_release_is_said_in_the_short_plan():
    out = run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.33.0rc1").stdout
    assert ("note: vLLM 0.33.0rc1 is a pre-release, planned with the rules of 0.33.0, the release it precedes" in out)
    assert "pre-release" not in run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.33.0").stdout
    # a local build tag is no pre-release; a dev build follows the release before it (test_dev_build_*)
    assert prerelease_note("0.11.2+rhai1") is None and prerelease_note("0.10.1.1") is None
    assert "the rules of 0.13.0, the newest release before it" in prerelease_note("v0.13.1.dev8+g2841a84ac")


def test_a_rule_taken_from_a_neighbour_is_counted_only_inside_its_unread_range():
    # 0.31 is inside "0.30–0.32 not read"; 0.28 (read) and 0.33 are not
    assert assumed_rules_note((0, 31, 0), [INFLIGHT]).startswith(
        "vLLM 0.31.0: 1 rule of this plan was not read in this release's code")
    assert assumed_rules_note((0, 28, 0), [INFLIGHT]) is None and assumed_rules_note((0, 33, 0), [INFLIGHT]) is None
    # 0.15: the MoE note's "0.15 not read" counts, the in-flight note's 0.30–0.32 does not
    assert assumed_rules_note((0, 15, 0), ["FP8 MoE: 0.15 not read: 0.14.1's kept workspaces", INFLIGHT]).startswith(
        "vLLM 0.15.0: 1 rule of this plan was")
    assert assumed_rules_note((0, 30, 0), ["x (this version's not read)", INFLIGHT]).startswith(
        "vLLM 0.30.0: 2 rules of this plan were")


def test_the_short_plan_says_a_rule_was_assumed():
    # gpt-oss-20b has sliding-window layers: its plan takes the in-flight rule above
    line = "note: vLLM 0.31.0: 1 rule of this plan was not read in this release's code"
    assert line in run_cli("plan", "openai/gpt-oss-20b", "--gpu", "H100", "--engine-version", "0.31.0").stdout
    for read in ("0.19.0", "0.28.0"):  # the in-flight rule read in both
        assert "not read in this release" not in run_cli("plan", "openai/gpt-oss-20b", "--gpu", "H100",
                                                         "--engine-version", read).stdout
