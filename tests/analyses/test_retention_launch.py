"""The launch words for --prefix-cache-retention-interval (retention_flag.launch_words), by release."""

from __future__ import annotations

from kvledger.analyses.serving.retention_flag import launch_words


def test_zero_is_launched_as_the_variable_before_0_29_and_left_out_after():
    # 0.26–0.28 read VLLM_PREFIX_CACHE_RETENTION_INTERVAL (envs.py): set to 0 it is not the default (unset: None),
    # so the launch line must carry it; from 0.29 the flag's default is 0 (config/cache.py), nothing to add
    assert launch_words(0, "0.28.0") == (["VLLM_PREFIX_CACHE_RETENTION_INTERVAL=0"], [])
    assert launch_words(0, "0.29.0") == ([], [])
    assert launch_words(256, "0.29.0") == ([], ["--prefix-cache-retention-interval", "256"])
    assert launch_words(None, "0.28.0") == ([], [])
