"""Which LMCache load rule `offload` runs and says, by vLLM version: before 0.33.0 LMCacheConnectorV1 loads in the
step (load_async False); 0.33.0's LMCacheMPConnector loads asynchronously, off the step."""

from __future__ import annotations

from cli_run import cli_json

L8 = "meta-llama/Llama-3.1-8B"
LMCACHE = ["--kv-offloading-size", "64GiB", "--kv-offloading-backend", "lmcache", "--sessions", "4"]


def _offload(*args: str) -> dict:
    """``offload``'s JSON for Llama-3.1-8B on an H100 with LMCache's 64 GiB tier, ``args`` added."""
    return cli_json("offload", L8, "--gpu", "H100", *LMCACHE, *args)


def test_lmcache_loads_in_the_step_before_vllm_0_33():
    d = _offload("--engine-version", "0.19.0")
    assert d["rules"]["lmcache_load"]["value"] == "in the step"
    assert "LMCacheConnectorV1 (load_async False)" in d["rules"]["lmcache_load"]["source"]
    note = d["kv_tiers"]["notes"][0]
    assert "Before 0.33.0, vLLM runs LMCache as LMCacheConnectorV1, and LMCache 0.5.6 loads in the step" in note
    assert "LMCacheMPConnector" not in note


def test_lmcache_loads_off_the_step_in_vllm_0_33():
    d = _offload()  # the default version, 0.33.0
    assert d["engine_version"] == "0.33.0" and d.get("rules") is None
    note = d["kv_tiers"]["notes"][0]
    assert "vLLM 0.33.0 runs LMCache as LMCacheMPConnector, which loads asynchronously" in note
    assert "so the load is on its TTFT, not on the step" in note and "LMCacheConnectorV1" not in note


def test_simulate_names_the_load_rule_it_ran():
    def rule(*version: str) -> dict:
        return cli_json("simulate", L8, "--gpu", "H100", "--workload", "agent", *LMCACHE, *version)["kv_tiers"]

    old, new = rule("--engine-version", "0.19.0"), rule()
    assert old["host_tier"]["load_in_step"] is True and new["host_tier"]["load_in_step"] is False
    assert old["rule"].startswith("LMCache under vLLM before 0.33.0 (LMCacheConnectorV1, load_async False)")
    assert "loaded in the step that schedules the request, the load added to that step's time" in old["rule"]
    assert new["rule"].startswith("LMCache under vLLM 0.33.0 (LMCacheMPConnector)")
    assert "loaded before the request is scheduled" in new["rule"]
