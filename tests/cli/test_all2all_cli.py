"""--all2all-backend on plan, simulate, goodput, cost, report and search, and kvledger.cost's parameter:
refused in vLLM's argparse words, carried into the DP ranks' memory plan (accounting/vllm_all2all.py).

Qwen3-30B-A3B, 2 DP ranks × TP 1 + EP on an H100 under vLLM 0.19.0: the default all2all backend gathers 2 × 8,192 =
16,384 profile rows; deepep_low_latency runs DP-chunked, 2 × min(8,192, 256) = 512 rows, so the fused-MoE workspace
shrinks and the pool grows (25,910 → 26,571 blocks of 16 tokens, as plan and simulate both say).
"""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli

MOE = "Qwen/Qwen3-30B-A3B"
DP = ("--gpu", "H100", "-dp", "2", "--enable-expert-parallel", "--engine-version", "0.19.0")
BOGUS = "argument --all2all-backend: invalid choice: 'bogus' (choose from 'naive', 'pplx', "


@pytest.mark.parametrize("cmd", [
    ("plan", MOE), ("simulate", MOE, "--num-requests", "5"), ("goodput", "--simulate", MOE, "--slo", "ttft=1s"),
    ("cost", "--simulate", MOE, "--slo", "ttft=1s"), ("report", MOE, "--slo", "ttft=1s", "--api", "openai:gpt-4o-mini"),
])
def test_an_unknown_choice_is_refused_in_vllm_s_words(cmd):
    assert BOGUS in refused(*cmd, *DP, "--all2all-backend", "bogus")


def test_search_refuses_it_before_any_candidate():
    assert BOGUS in refused("search", MOE, "--slo", "ttft=1s", "--gpus", "H100", "-dp", "1,2", "--all2all-backend",
                            "bogus", "--engine-version", "0.19.0")


def test_plan_and_simulate_count_the_chunked_rows():
    default = cli_json("plan", MOE, *DP)
    ll = cli_json("plan", MOE, *DP, "--all2all-backend", "deepep_low_latency")
    assert default["data_parallel"]["moe_profile_tokens"] == 16_384  # 2 × 8,192
    assert ll["data_parallel"]["moe_profile_tokens"] == 512  # 2 × min(8,192, 256)
    assert ll["settings"]["all2all_backend"] == "deepep_low_latency" and "all2all_backend" not in default["settings"]
    assert (default["memory"]["num_gpu_blocks"], ll["memory"]["num_gpu_blocks"]) == (25_910, 26_571)
    out = run_cli("simulate", MOE, *DP, "--all2all-backend", "deepep_low_latency", "--num-requests", "5",
                  "--rate", "2").stdout
    assert "engine: 26,571 KV blocks × 16 tokens" in out


def test_the_cost_api_takes_it_as_the_command_does():
    import kvledger
    from kvledger.errors import InputError

    with pytest.raises(InputError, match="invalid choice: 'bogus'"):
        kvledger.cost(simulate=MOE, gpu="H100", slo="ttft=1s", data_parallel_size=2, enable_expert_parallel=True,
                      engine_version="0.19.0", all2all_backend="bogus", cache=False)


def test_search_carries_it_to_its_dp_candidates_only():
    from kvledger.analyses.search import SearchSpec
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.search.spec import Candidate
    from kvledger.cli.search_flags import with_all2all

    spec = SearchSpec(model=MOE, slo="ttft=1s", engine_version="0.19.0")
    assert with_all2all(spec, None) is spec and "all2all_backend" not in spec.to_dict()  # older ledgers unchanged
    ll = with_all2all(spec, "deepep_low_latency")
    assert ll.to_dict()["all2all_backend"] == "deepep_low_latency"
    dp2 = Candidate("nvidia_h100_sxm5", 1, enable_expert_parallel=True, data_parallel_size=2)
    assert sim_args(ll, dp2).all2all_backend == "deepep_low_latency"
    assert sim_args(ll, Candidate("nvidia_h100_sxm5", 2, enable_expert_parallel=True)).all2all_backend is None


def _a2a_notes(doc: dict) -> list[str]:
    notes = doc["simulation"]["notes"] if "simulation" in doc else doc["notes"]
    return [n for n in notes if "all2all" in n and not n.startswith("data parallel:")]


SIM = ("--num-requests", "5", "--rate", "2")


@pytest.mark.parametrize("cmd", [("simulate", MOE), ("goodput", "--simulate", MOE, "--slo", "ttft=1s"),
                                 ("cost", "--simulate", MOE, "--slo", "ttft=1s", "--at-offered-load")])
def test_the_simulations_carry_plan_s_all2all_note(cmd, monkeypatch):
    # deepep_low_latency under 0.19.0 runs DP-chunked: DP 2 × min(8,192, 256) = 512 rows per GPU, as plan counts them;
    # the lock-step step cost still prices allgather_reducescatter's collectives, so its own kernels are not modelled
    monkeypatch.setenv("KVLEDGER_NO_CACHE", "1")
    (note,) = _a2a_notes(cli_json(*cmd, *DP, "--all2all-backend", "deepep_low_latency", *SIM))
    assert note.startswith("all2all backend deepep_low_latency: the memory plan's profile run")
    assert "DP 2 × min(8,192, 256) = 512 rows per GPU" in note
    assert "not deepep_low_latency's dispatch and combine kernels, whose time and buffers are not modelled" in note


def test_simulate_says_the_default_backend_and_an_unused_one():
    # the default allgather_reducescatter gathers DP 2 × 8,192 = 16,384 rows, the collectives the step cost prices
    (note,) = _a2a_notes(cli_json("simulate", MOE, *DP, *SIM))
    assert "allgather_reducescatter" in note and "DP 2 × 8,192 = 16,384 rows per GPU" in note
    assert "the step cost prices its all-gather and reduce-scatter" in note
    # no DP: vLLM runs no all2all backend (use_all2all_kernels), as plan says
    (note,) = _a2a_notes(cli_json("simulate", MOE, "--gpu", "H100", "--engine-version", "0.19.0", "--all2all-backend",
                                  "mori", *SIM))
    assert note.startswith("--all2all-backend mori: vLLM runs an all2all backend only with DP > 1")
    assert _a2a_notes(cli_json("simulate", MOE, "--gpu", "H100", "--engine-version", "0.19.0", *SIM)) == []
