"""`kvledger simulate` with the engine rules: async scheduling by --engine-version, SGLang's scheduler, refusals."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
BASE = ["simulate", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100", "--num-requests", "40", "--json"]


def run(*extra):
    res = runner.invoke(app, BASE + list(extra))
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_async_scheduling_follows_the_engine_version():
    # vLLM 0.14 and later schedule asynchronously by default (0.14.0 config/scheduler.py: async_scheduling None, turned
    # on by config/vllm.py VllmConfig.__post_init__); 0.13 does not (default False); the flag overrides either
    assert run()["engine"]["async_scheduling"] is True
    assert run("--engine-version", "0.20.0")["engine"]["async_scheduling"] is True
    assert run("--engine-version", "0.13.0")["engine"]["async_scheduling"] is False
    assert run("--no-async-scheduling")["engine"]["async_scheduling"] is False
    on, off = run()["summary"], run("--no-async-scheduling")["summary"]
    # the same arrivals: every request waits one step more for its first token under async (same step prices)
    assert on["ttft_s"]["mean"] > off["ttft_s"]["mean"] and on["num_finished"] == off["num_finished"] == 40


def test_sglang_policy_runs_sglangs_scheduler_and_refuses_async():
    d = run("--policy", "sglang")
    assert d["engine"]["batching"] == "sglang" and d["engine"]["scheduling_policy"] == "fcfs"
    assert d["engine"]["async_scheduling"] is False
    res = runner.invoke(app, BASE + ["--policy", "sglang", "--async-scheduling"])
    # a clear InputError (the CLI's entry point turns it into one paragraph and exit status 2)
    assert isinstance(res.exception, InputError) and "batching='continuous'" in str(res.exception)


QWEN = ["Qwen/Qwen3-8B", "--gpu", "H100"]


def _sim(*extra):
    res = runner.invoke(app, ["simulate", *QWEN, "--num-requests", "40", "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_sglang_policy_serves_from_the_token_pool_that_plan_engine_sglang_prints():
    # SGLang 0.5.23's rule (accounting/plan_other.py : sglang_plan), Qwen3-8B on an H100, worked by hand:
    #   nvidia-smi 81,559 MiB (< 90 GiB): chunked_prefill_size 8,192, decode cuda_graph_max_bs 256 (TP 1);
    #   reserved = 512 + 1.5 × 8,192 + (1/8) × 1,024 + 2 × 256 + 464 (the prefill CUDA graphs: 58 sizes up to
    #   8,192 × 8 MiB) = 13,904 MiB (above the 10 GiB floor);
    #   mem_fraction_static = round((81,559 − 13,904) / 81,559, 3) = round(0.82952, 3) = 0.83;
    #   free before load = 85,029,027,840 B (CUDA total) − 450,971,566.08 B (0.42 GiB held at TP 1,
    #   sglang_rules.SGLANG_PRELOAD_GIB) = 84,578,056,273.92 B;
    #   weights = 8,190,735,360 params × 2 B = 16,381,470,720 B; the float32 RoPE buffer 40,960 × 128 × 4 B =
    #   20,971,520 B; segment tails 3,577,856 B (embedding and lm_head 1,187 → 1,188 MiB: 2 MiB; 72 q/k norms of 256 B
    #   booked as 512: 18,432; 145 norms (634,880 B booked) in one 2 MiB small segment: 1,462,272);
    #   69,793,218.56 B (0.065 GiB measured load rest, sglang_rules.SGLANG_LOAD_EXTRA_GIB);
    #   KV memory = 84,578,056,273.92 × 0.83 − 16,381,470,720 − 20,971,520 − 3,577,856 − 69,793,218.56
    #   = 53,723,973,392 B; cell = 36 layers × 8 KV heads × (128 + 128) × 2 B = 147,456 B per token;
    #   #tokens = floor(53,723,973,392 / 147,456) = 364,339 (364,339 × 147,456 = 53,723,971,584; 1,808 B left);
    #   max_running_requests = min(clamp(int(364,339 / 40,960 × 512) = 4,554, 2,048, 4,096), 364,339 // 2) = 4,096.
    # The vLLM 0.33 plan this run used before held 24,767 blocks × 16 = 396,272 tokens (7.9 % more).
    res = runner.invoke(app, ["plan", *QWEN, "--engine", "sglang", "--json"])
    plan = json.loads(res.output)["memory"]
    assert plan["pool_tokens"] == 364_339 and plan["max_num_seqs"] == 4_096
    d = _sim("--policy", "sglang")
    e = d["engine"]
    # page size 1; one more block than token slots: the simulator's null block (block 0) is never handed out
    assert (e["num_gpu_blocks"], e["block_size"]) == (364_339 + 1, 1)
    assert (e["max_num_seqs"], e["max_num_batched_tokens"], e["max_model_len"]) == (4_096, 8_192, 40_960)
    pool = d["notes"][0]
    assert pool.startswith("KV pool: 364,339 token slots in 364,339 pages of 1 token from the SGLang memory plan")
    assert "floor(50.03 GiB for KV / 147,456 B per token)" in pool and "mem_fraction_static 0.83" in pool
    assert "chunked_prefill_size 8,192" in pool and "max_running_requests 4,096" in pool


def test_sglang_policy_takes_the_page_size_fraction_and_limits_given():
    # --block-size 16 is SGLang's page: 364,339 // 16 = 22,771 pages (364,336 token slots), + the null block.
    e = _sim("--policy", "sglang", "--block-size", "16")["engine"]
    assert (e["num_gpu_blocks"], e["block_size"]) == (22_771 + 1, 16)
    # --mem-fraction-static 0.8: 84,578,056,273.92 × 0.8 − 16,381,470,720 − 20,971,520 − 3,577,856 − 69,793,218.56
    # = 51,186,631,704 B → floor(/147,456) = 347,131 tokens; --max-num-seqs 64 = min(64, 347,131 // 2) and
    # --max-num-batched-tokens 2048 replace SGLang's defaults.
    d = _sim("--policy", "sglang", "--mem-fraction-static", "0.8", "--max-num-seqs", "64", "--max-num-batched-tokens",
             "2048")
    e = d["engine"]
    assert (e["num_gpu_blocks"], e["max_num_seqs"], e["max_num_batched_tokens"]) == (347_131 + 1, 64, 2_048)
    assert "mem_fraction_static 0.8 (given)" in d["notes"][0]


def _refusal(*args):
    res = runner.invoke(app, list(args))
    assert isinstance(res.exception, InputError), res.output
    return str(res.exception)


def test_each_engines_memory_flags_only_with_its_own_pool():
    sim = ["simulate", *QWEN, "--num-requests", "5"]
    msg = _refusal(*sim, "--policy", "sglang", "--gpu-memory-utilization", "0.8")
    assert "--gpu-memory-utilization is vLLM's" in msg and "use --mem-fraction-static" in msg
    msg = _refusal(*sim, "--policy", "sglang", "--num-gpu-blocks-override", "100")
    assert msg.startswith("--num-gpu-blocks-override") and "SGLang's memory plan" in msg and "ignored" in msg
    # --engine-version names the SGLang release with --policy sglang (tests/cli/test_sglang_release_cli.py); one newer
    # than the newest read runs on 0.5.23's rules and says so, as `kvledger plan --engine sglang` does
    res = runner.invoke(app, [*sim, "--policy", "sglang", "--engine-version", "0.6.0"], env={"COLUMNS": "250"})
    assert res.exit_code == 0 and "SGLang 0.6.0 is newer than the newest release whose code was read (0.5.23)" in (
        " ".join(res.output.split()))
    for policy in ([], ["--policy", "vllm"], ["--policy", "static"]):
        msg = _refusal(*sim, *policy, "--mem-fraction-static", "0.8")
        assert msg.startswith("--mem-fraction-static is SGLang's") and "add --policy sglang" in msg
    # the simulating ledgers share the rule (cli.flag_groups.EngineFlags → sim_opts.sim_request → the same plan)
    msg = _refusal("goodput", "--simulate", *QWEN, "--num-requests", "5", "--slo", "ttft=1s", "--mem-fraction-static",
                   "0.8")
    assert msg.startswith("--mem-fraction-static is SGLang's")


def test_models_sglangs_plan_refuses_fail_the_same_way_under_the_sglang_policy():
    from pathlib import Path

    configs = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs"
    for name, extra in (("mamba.json", []), ("deepseek_v4.json", ["--tp", "8", "--max-model-len", "8192"])):
        cfg = str(configs / name)
        planned = _refusal("plan", cfg, "--gpu", "H200", "--engine", "sglang", *extra)
        assert "not modelled here" in planned
        assert _refusal("simulate", cfg, "--gpu", "H200", "--num-requests", "5", "--policy", "sglang",
                        *extra) == planned
