"""``kvledger.simulate`` and ``kvledger.goodput`` take every flag of ``kvledger simulate`` and ``kvledger goodput
--simulate`` that changes the run, by its name with underscores, as ``kvledger.cost`` takes cost's
(tests/api/test_api_cost.py). Before, they lacked --data-parallel-size, --all2all-backend, --enable-expert-parallel,
--think-time, --num-gpu-blocks-override, --async-scheduling and 20 more engine flags, and goodput --lo/--hi/--tol/
--seeds: a script could not run in Python what the command ran."""

from __future__ import annotations

import inspect

import pytest
from api_cli_json import cli_json, plain

import kvledger
from kvledger import InputError

MOE = "Qwen/Qwen3-30B-A3B"
# tests/cli/test_all2all_cli.py: Qwen3-30B-A3B, 2 DP ranks × TP 1 + EP on an H100 under vLLM 0.19.0
DP = dict(gpu="H100", data_parallel_size=2, enable_expert_parallel=True, engine_version="0.19.0")
DP_FLAGS = ("--gpu", "H100", "-dp", "2", "--enable-expert-parallel", "--engine-version", "0.19.0")
L8 = "meta-llama/Llama-3.1-8B"
SMALL = dict(gpu="H100", prompt_lengths="fixed:512", output_lengths="fixed:64", num_requests=20)
SMALL_FLAGS = ("--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--num-requests", "20")

# the outputs, not settings of the run (and --record-token-times: the figures are the same without it)
OUTPUTS = {"--json", "--out", "--force", "--chrome-trace", "--record-token-times", "--json-lines", "--plot"}
# SGLang's spellings of --tp, --max-model-len, --max-num-seqs, --max-num-batched-tokens, --block-size and 0.4.x's
# --enable-ep-moe (refused): the API takes vLLM's names, as kvledger.cost and kvledger.plan do (--ep-size: ep_size)
SGLANG = {"--tp-size", "--context-length", "--max-running-requests", "--chunked-prefill-size", "--page-size",
          "--enable-ep-moe"}
# the session loop (--workload, --sessions, --session-rate) and the host KV tier flags (--kv-offloading-size and 12
# more) were left out until their reports had a place in the API's results (.sessions, .kv_tiers): every flag but
# the outputs and SGLang's spellings is now a parameter, so a new flag of either command fails these two tests


def _flags(command: str) -> set[str]:
    """The first spelling of each parameter of ``kvledger COMMAND``, as click reads the command."""
    import typer.main

    from kvledger.cli.main import app

    return {p.opts[0] for p in typer.main.get_command(app).commands[command].params
            if p.name not in ("install_completion", "show_completion")}


def _params(flags: set[str]) -> set[str]:
    return {f.lstrip("-").replace("-", "_") for f in flags - OUTPUTS - SGLANG}


def test_simulate_takes_every_flag_of_the_command():
    # MODEL is model, --gpu gpu; cache decides the on-disk store (the command never reads it)
    assert set(inspect.signature(kvledger.simulate).parameters) == _params(_flags("simulate")) | {"cache"}


def test_goodput_takes_every_flag_of_the_command_s_simulate():
    # --simulate MODEL is model; FILEs and --format read measured runs, not a simulation
    flags = _flags("goodput") - {"files", "--format", "--simulate"}
    # goodput's session loop and tier flags are API parameters too (its result is goodput's document either way)
    assert set(inspect.signature(kvledger.goodput).parameters) == _params(flags) | {"model", "cache"}


_cli, _plain = cli_json, plain


def test_simulate_runs_the_dp_ranks_and_their_all2all_backend():
    # deepep_low_latency runs DP-chunked: 2 × min(8,192, 256) = 512 profile rows instead of 2 × 8,192 = 16,384, so the
    # fused-MoE workspace shrinks and the pool grows from 25,910 to 26,571 blocks of 16 tokens (plan's figures)
    d = kvledger.simulate(MOE, all2all_backend="deepep_low_latency", num_requests=5, rate=2.0, **DP).to_dict()
    assert d["engine"]["num_gpu_blocks"] == 26_571 and d["data_parallel"]["gpus"] == 2
    assert d["data_parallel"]["kv_tokens_total"] == 2 * 26_571 * 16
    assert _plain(d) == _cli("simulate", MOE, *DP_FLAGS, "--all2all-backend", "deepep_low_latency", "--num-requests",
                             "5", "--rate", "2")
    default = kvledger.simulate(MOE, num_requests=5, rate=2.0, **DP).to_dict()
    assert default["engine"]["num_gpu_blocks"] == 25_910
    with pytest.raises(InputError, match=r"^kvledger\.simulate: .*invalid choice: 'bogus'"):
        kvledger.simulate(MOE, all2all_backend="bogus", num_requests=5, **DP)
    # vLLM 0.33 runs Qwen3-30B-A3B on its V2 model runner: its PP loop (pipeline_v2.py) runs, P + 1 = 3 in flight
    pp = kvledger.simulate(MOE, pp=2, num_requests=5, gpu="H100").to_dict()["pipeline"]
    assert pp["loop"] == "vLLM 0.33.0 V2 model runner pipeline loop (async scheduling)"
    assert pp["batches_in_flight_max"] == 3
    # 0.22 runs dense Qwen3 on the V2 runner too, whose PP path then passed tokens back each batch: refused
    with pytest.raises(InputError, match=r"^kvledger\.simulate: pp 2 on vLLM 0\.22\.0's V2 model runner"):
        kvledger.simulate("Qwen/Qwen3-8B", pp=2, num_requests=5, gpu="H100", engine_version="0.22.0")


def test_goodput_runs_the_dp_ranks_as_the_command():
    g = kvledger.goodput(MOE, slo="ttft=1s", num_requests=5, rate=2.0, cache=False, **DP).to_dict()
    assert g["num_gpus"] == 2  # 2 ranks × TP 1
    assert _plain(g) == _cli("goodput", "--simulate", MOE, *DP_FLAGS, "--slo", "ttft=1s", "--num-requests", "5",
                             "--rate", "2")


def test_engine_flags_reach_the_engine():
    # vLLM 0.33: async scheduling on by default from 0.14 (VllmConfig.__post_init__); off when asked
    # --num-gpu-blocks-override 2000 with max_model_len 8,192: one request needs 8,192 / 16 = 512 of the 2,000 blocks
    d = kvledger.simulate(L8, async_scheduling=False, num_gpu_blocks_override=2000, max_model_len=8192, rate=5.0,
                          **SMALL).to_dict()
    assert d["engine"]["async_scheduling"] is False and d["engine"]["num_gpu_blocks"] == 2000
    assert _plain(d) == _cli("simulate", L8, *SMALL_FLAGS, "--rate", "5", "--no-async-scheduling",
                             "--num-gpu-blocks-override", "2000", "--max-model-len", "8192")


def test_goodput_search_takes_its_bounds_and_seeds():
    args = dict(slo="ttft=200ms,tpot=50ms", target=0.9, lo=1.0, hi=8.0, tol=1.0, seeds=2, cache=False,
                **{**SMALL, "num_requests": 50})
    g = kvledger.goodput(L8, **args).to_dict()
    cli = _cli("goodput", "--simulate", L8, *SMALL_FLAGS[:-1], "50", "--slo", "ttft=200ms,tpot=50ms", "--target",
               "0.9", "--lo", "1", "--hi", "8", "--tol", "1", "--seeds", "2")
    assert _plain(g) == cli
    # the search probes lo = 1 then hi = 8 req/s; 8 req/s of 512 + 64 tokens meets the SLO on an H100 (its capacity
    # bound is ~76 req/s), so hi itself is the boundary, for seed 0 and seed 1 alike
    assert [p["value"] for p in g["probes"]] == [1.0, 8.0] and g["boundary"]["boundary_value"] == 8.0
    assert g["seed_boundaries"] == [{"seed": 0, "boundary_value": 8.0}, {"seed": 1, "boundary_value": 8.0}]
    with pytest.raises(InputError, match=r"^kvledger\.goodput: seeds repeats the SLO-capacity search per seed: add "
                                         r"target"):
        kvledger.goodput(L8, slo="ttft=200ms", seeds=2, cache=False, **SMALL)
