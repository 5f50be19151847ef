"""What the second new-user trial found, each pinned: roofline flags in the simulating commands, an engine's memory
fraction only with that engine, the max_num_seqs cap in the headline, --out folders that hold one run, readable for
the team, and a --plot that --force may replace."""

from __future__ import annotations

import json
import os
import stat

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.sim_ledgers import prepare_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.cli.main import app
from kvledger.errors import KvLedgerError

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def _refused(*args: str) -> str:
    """The message of the error the command ends with (the console entry prints it and exits with status 2)."""
    with pytest.raises(KvLedgerError) as err:
        _run(*args)
    return str(err.value)


def test_simulate_takes_the_roofline_fractions_and_a_pure_decode_step_scales_with_bandwidth():
    # Llama-3.1-8B decode on an H100 is bandwidth-bound in every term but the layer kernels (weights and KV reads; TP 1,
    # no all-reduce, no CPU overhead; the 8-token step's norm, RoPE, activation and add kernels run at their floors,
    # which no bandwidth sets): halving the achievable bandwidth fraction from 0.8 to 0.4 doubles the rest exactly.
    from kvledger.accounting.stepcost import StepShape

    costs = {f: prepare_run(SimRequestArgs(model=MODEL, gpu="H100", num_requests=10,
                                           achievable_bandwidth_fraction=f)).cost
             for f in (0.8, 0.4)}
    assert costs[0.4].bandwidth_fraction == 0.4 and costs[0.8].bandwidth_fraction == 0.8
    shape = StepShape(num_decode_seqs=8, decode_kv_tokens=8 * 2048)
    k = costs[0.8].layer_kernels_s(8)
    assert k == costs[0.4].layer_kernels_s(8) > 0
    assert costs[0.4].step_time_s(shape) - k == pytest.approx(2.0 * (costs[0.8].step_time_s(shape) - k), rel=1e-12)
    assert "--achievable-flops-fraction" in _refused("simulate", MODEL, "--gpu", "H100", "--num-requests", "5",
                                                     "--achievable-flops-fraction", "1.5")


@pytest.mark.parametrize("engine,flag", [("sglang", "--gpu-memory-utilization"), ("trtllm", "--mem-fraction-static"),
                                         ("vllm", "--free-gpu-memory-fraction")])
def test_another_engines_memory_fraction_is_refused_not_ignored(engine, flag):
    msg = _refused("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine", engine, flag, "0.5")
    assert flag in msg and "ignored" in msg


def test_the_headline_says_when_max_num_seqs_caps_the_running_batch():
    # 225 requests of 2,048 tokens fit in the KV cache (docs/engine-model.md §1), but --max-num-seqs 8 lets 8 run:
    # the verdict's first figure is what runs, min(225, 8) = 8, and the KV-limited 225 comes second.
    out = _run("plan", MODEL, "--gpu", "H100", "--max-num-seqs", "8", "--max-model-len", "2K").stdout
    assert ("fits: 8 concurrent 2,048-token requests run at once (max_num_seqs=8, the engine's limit; the rest "
            "wait); the KV cache holds 225 concurrent 2,048-token requests") in out
    plain = _run("plan", MODEL, "--gpu", "H100", "--max-model-len", "2K").stdout
    assert "max_num_seqs" not in plain.split("fits:")[1].split("\n")[0]


def test_a_low_concurrency_under_max_num_seqs_names_it_and_lists_fixes_that_raise_what_runs():
    # Llama-3.1-8B on an H100 at max_model_len 131,072 with --max-num-seqs 2: 28,877 blocks of 16 tokens, 28,876
    # usable (less the null block); a 131,072-token request takes 8,192 blocks: the KV holds 28,876 // 8,192 = 3
    # (3.53x), the scheduler runs min(3, 2) = 2. Before, the line said "only 3 at once … each fix below raises it"
    # and listed --tp 2 / fp8 KV (7 each), which still run 2. Now: 2 run, max_num_seqs named; --max-num-seqs 3 lets
    # the 3 run, and each KV fix comes with the max_num_seqs that runs what it holds (--tp 2: 7.80x → 7)
    d = json.loads(_run("plan", MODEL, "--gpu", "H100", "--max-model-len", "128K", "--context", "128K",
                        "--max-num-seqs", "2", "--json").stdout)
    assert d["memory"]["num_gpu_blocks"] == 28_877
    assert d["advice"]["message"].endswith(
        "only 2 run at once at max_model_len (under 8, kvledger lists fixes), the limit set by "
        "max_num_seqs=2 (the KV cache holds 3): each fix below raises it")
    opts = {o["action"]: o["max_requests"] for o in d["advice"]["options"]}
    assert opts["--max-num-seqs 3"] == 3 and opts["--tp 2 --max-num-seqs 7"] == 7
    assert opts["--kv-cache-dtype fp8 --max-num-seqs 7"] == 7 and "--tp 2" not in opts
    assert all(n > 2 for n in opts.values())  # every fix listed runs more than the 2 that run now


def test_an_asked_contexts_first_figure_is_what_runs_at_once_under_max_num_seqs():
    # Llama-3.1-8B on an A100 40GB at max_model_len 8,192: 10,552 blocks of 16 tokens; a 2,048-token request takes
    # 128 blocks, so 10,551 usable (less the null block) // 128 = 82 fit, and 8,192 tokens take 512 blocks: 20 fit.
    # --max-num-seqs 16 lets min(82, 16) = 16 and min(20, 16) = 16 run; each KV-limited figure follows its 16.
    out = " ".join(_run("plan", MODEL, "--gpu", "a100-40gb", "--max-model-len", "8192", "--context", "2048",
                        "--max-num-seqs", "16").stdout.split())  # the console wraps the verdict at 200 columns
    assert " blocks of 16 tokens" in out and "10,552 blocks" in out
    assert ("fits: 16 concurrent 2,048-token requests run at once (max_num_seqs=16; the KV cache "
                           "holds 82, as few as 78 at the range's low end); at max_model_len, 16 concurrent "
                           "8,192-token requests run at once (max_num_seqs=16, the engine's limit; the rest wait); "
                           "the KV cache holds 20 concurrent 8,192-token requests") in out


def test_out_folder_holds_one_run_readable_by_the_team_and_goodput_reads_its_records(tmp_path):
    out = tmp_path / "run"
    assert _run("simulate", MODEL, "--gpu", "H100", "--num-requests", "20", "--out", str(out),
                "--chrome-trace").exit_code == 0
    assert (out / "trace.json").is_file()
    assert _run("simulate", MODEL, "--gpu", "H100", "--num-requests", "10", "--out", str(out), "--force").exit_code == 0
    assert not (out / "trace.json").exists()  # the earlier run's trace is not left beside the new records
    mask = os.umask(0)
    os.umask(mask)
    for name in ("records.parquet", "steps.parquet", "summary.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o666 & ~mask, name
    # goodput given the folder reads its records file
    assert json.loads(_run("goodput", str(out), "--slo", "ttft=1s",
                           "--json").stdout)["file"] == str(out / "records.parquet")


def test_goodput_plot_is_replaced_only_with_force(tmp_path):
    plot = tmp_path / "b.png"
    plot.write_bytes(b"mine")
    args = ["goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "50", "--slo", "ttft=1s",
            "--target", "0.9", "--plot", str(plot)]
    assert "--force" in _refused(*args) and plot.read_bytes() == b"mine"
    assert _run(*args, "--force").exit_code == 0 and plot.read_bytes()[:4] == b"\x89PNG"


def test_unknown_model_type_and_skipped_deductions_are_said_in_the_summary(tmp_path):
    # An unknown model_type with standard decoder fields plans, and the summary (not only --verbose) says how it was
    # read; for vLLM 0.19 the CUDA-graph estimate is logged, not subtracted, so the summary does not list it.
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "foobar", "hidden_size": 2048, "num_hidden_layers": 16,
                               "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 5632,
                               "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))
    out = " ".join(_run("plan", str(cfg), "--gpu", "H100").stdout.split())
    # KV per token: 2 (K, V) × 16 layers × 4 KV heads × 128 head_dim × 2 B = 32,768 B
    assert "32,768 B" in out and "note: model_type 'foobar': read as a standard decoder" in out
    old = " ".join(_run("plan", MODEL, "--gpu", "H100", "--engine-version", "0.19.0").stdout.split())
    assert "less weights, activation peak, non-torch memory)" in old
    new = " ".join(_run("plan", MODEL, "--gpu", "H100").stdout.split())
    assert "non-torch memory, CUDA graphs (estimate))" in new


def test_a_token_budget_below_max_num_seqs_is_refused_as_vllm_does():
    # vLLM 0.19 config/scheduler.py verify_max_model_len: max_num_batched_tokens < max_num_seqs raises at start-up.
    msg = _refused("plan", MODEL, "--gpu", "H100", "--max-num-batched-tokens", "1", "--max-num-seqs", "1024")
    assert "max_num_batched_tokens (1) must be at least max_num_seqs (1,024)" in msg
    # with --max-num-seqs unset, 0.19's engine/arg_utils.py lowers the default 1,024 to min(1,024, 1) = 1 (≥0.11);
    # 0.9.0 keeps 1,024 and so refuses
    assert "max_num_seqs 1\n" in _run("plan", MODEL, "--gpu", "H100", "--max-num-batched-tokens", "1").stdout
    assert "(1,024)" in _refused("plan", MODEL, "--gpu", "H100", "--max-num-batched-tokens", "1", "--engine-version",
                                 "0.9.0")
    assert _run("plan", MODEL, "--gpu", "H100", "--max-num-batched-tokens", "256", "--max-num-seqs",
                "256").exit_code == 0


def test_a_think_time_without_a_closed_loop_is_refused_and_a_rate_paces_one():
    assert "add --concurrency" in _refused("simulate", MODEL, "--gpu", "H100", "--think-time", "1")
    # --rate with --concurrency is `vllm bench serve --request-rate R --max-concurrency N`: a paced closed loop
    d = json.loads(_run("simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths",
                        "fixed:128", "--num-requests", "200", "--rate", "40", "--concurrency", "4", "--json").stdout)
    assert d["workload"]["mode"] == "closed loop, paced" and d["workload"]["concurrency"] == 4
    # 4 in flight of ~1 s each (128 tokens at ~7 ms) draw ~4 req/s of the 40 offered: the clients fell behind, said
    # so, and banded as a closed loop (no queue-growth overload: the engine never held more than 4)
    behind = "the clients fell behind their rate: with 4 requests in flight at most"
    assert any(n.startswith(behind) for n in d["notes"])
    assert d["overload"]["num_users"] == 4 and d["overload"]["sent_per_s"] < 0.95 * d["overload"]["offered_per_s"]
    assert d["overload"]["kind"] == "paced_behind"  # each overload record names its kind (overloads.py)
    # 4 in flight is within what the engine runs at once (max_num_seqs 1,024): the cap held the load, so the
    # throughput is no capacity and has no band
    assert d["overload"]["cap_held"] and "throughput" not in d["error_bands"]
    assert any("The cap, not the engine, held the load: 4 in flight is within what the engine runs at once "
               "(max_num_seqs × replicas = 1,024)" in n for n in d["notes"])
    assert d["summary"]["throughput_req_per_s"] < 0.2 * d["workload"]["offered_rate_req_per_s"]
    # a cap that never binds (64 in flight for 20 requests) is the open loop it then was: too short to tell, no band
    short = json.loads(_run("simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths",
                            "fixed:128", "--num-requests", "20", "--rate", "20", "--concurrency", "64",
                            "--json").stdout)
    assert short["overload"] is None and short["too_short"]["kind"] == "short_run" and short["error_bands"] == {}
    # what no benchmark client does: a think time in a paced loop; a concurrency search at one request rate
    assert "with --rate or --rate-scale the requests follow the rate" in _refused(
        "simulate", MODEL, "--gpu", "H100", "--concurrency", "8", "--rate", "2", "--think-time", "1")
    assert "would pace every probe at one request rate" in _refused(
        "goodput", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=1s", "--target", "0.9", "--axis",
        "concurrency", "--rate", "5")


def test_an_old_vllm_version_says_which_scheduling_rule_it_runs():
    # vLLM made V1 its default engine in 0.8; a 0.5 run is V0 with V0's defaults (chunked prefill off up to 32K,
    # prefix caching off: engine/arg_utils.py), so V0's prefill-first rule replays it, and says so
    out = " ".join(_run("simulate", MODEL, "--gpu", "H100", "--engine-version", "0.5.0", "--num-requests",
                        "10").stdout.split())
    # 131,072 > 32K and no sliding window: chunked prefill on, so V1's mixed steps
    assert ("chunked prefill on (V0's default: on only above a 32K context without a sliding window, max_model_len "
            "131,072)") in out
    assert "replayed by V1's mixed steps, the closest rule modelled (V0's chunked-prefill scheduler is not)" in out
    short = " ".join(_run("simulate", MODEL, "--gpu", "H100", "--engine-version", "0.5.0", "--max-model-len", "8192",
                          "--num-requests", "10").stdout.split())
    assert ("chunked prefill off (V0's default: on only above a 32K context without a sliding window, max_model_len "
            "8,192)") in short
    # gpt-oss-20b (128-token sliding-window layers) is not in vLLM 0.5.0's registry (GptOssForCausalLM from 0.10.1,
    # and no Transformers fallback before 0.7.2), so 0.5.0 cannot load it: refused (V0's sliding-window rule is
    # tests/analyses/test_sched_defaults.py's, on 0.9.0)
    assert "vLLM lists it from 0.10.1" in _refused("simulate", "openai/gpt-oss-20b", "--gpu", "H100",
                                                   "--engine-version", "0.5.0", "--num-requests", "10")
    assert "prefix caching off" in short and "replayed by V0's default scheduler, prefill-first" in short
    cached = " ".join(_run("simulate", MODEL, "--gpu", "H100", "--engine-version", "0.5.0", "--max-model-len", "8192",
                           "--enable-prefix-caching", "--num-requests", "10").stdout.split())
    assert "prefix caching on (as given)" in cached and "(V0's prefix caching is not)" in cached
    new = " ".join(_run("simulate", MODEL, "--gpu", "H100", "--num-requests", "10").stdout.split())
    assert "V0 engine" not in new
    assert "--no-enable-chunked-prefill" in _refused("simulate", MODEL, "--gpu", "H100", "--batching", "vllm_v0")
