"""A model-scope profile simulated under other engine settings than it was fitted on is said, with the flags that
restore them (a fresh-user trial ran ``simulate --step-cost prof.json`` at vLLM 0.33's defaults with no word)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.analyses.serving.profile_settings import profile_settings_warning

PROFILE = {"engine": {"max_num_seqs": 128, "max_num_batched_tokens": 2048},
           "engine_flags": {"engine_version": "0.19.0", "max_num_batched_tokens": "2048"}}


def plan(version: str, seqs: int, tokens: int) -> SimpleNamespace:
    return SimpleNamespace(memory=SimpleNamespace(engine_version=version, max_num_seqs=seqs,
                                                  max_num_batched_tokens=tokens))


def test_other_settings_are_named_with_the_flags_that_restore_them():
    w = profile_settings_warning("p.json", PROFILE, plan("0.33.0", 1024, 8192))
    assert "engine_version: fitted 0.19.0, simulated 0.33.0" in w
    assert "max_num_seqs: fitted 128, simulated 1024; max_num_batched_tokens: fitted 2048, simulated 8192" in w
    assert w.endswith("pass --engine-version 0.19.0 --max-num-seqs 128 --max-num-batched-tokens 2048 to simulate "
                      "the engine it was fitted on")


def test_the_fitted_settings_say_nothing():
    assert profile_settings_warning("p.json", PROFILE, plan("0.19.0", 128, 2048)) is None


def test_a_profile_recording_none_says_nothing():
    assert profile_settings_warning("p.json", {}, plan("0.33.0", 1024, 8192)) is None
