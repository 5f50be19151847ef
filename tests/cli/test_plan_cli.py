"""`kvledger plan`, `models`, `gpus` through the CLI: JSON keys scripts rely on, tables, exit codes and error
messages."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})  # wide enough that rich does not wrap table cells


def run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_json_has_the_documented_keys_and_values():
    r = run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--gpu-memory-utilization", "0.9", "--context",
            "8K,128K", "--json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["model"]["kv_bytes_per_token"] == 131_072 and d["model"]["num_params"] == 8_030_261_248
    assert d["model"]["weight_bytes"] == 16_060_522_496  # 8,030,261,248 × 2 B = 16.06 GB = 14.96 GiB
    assert d["gpu"]["memory_bytes"] == 81_090 * 2**20  # 79.19 GiB, the total the vLLM 0.19 H100 logs print
    assert (
        d["memory"]["block_size"] == 16 and d["memory"]["num_gpu_blocks"] > 0 and d["memory"]["available_kv_bytes"] > 0
    )
    assert [c["context_tokens"] for c in d["concurrency"]] == [8192, 131072]
    assert 50 <= d["concurrency"][0]["max_concurrency"] <= 56 and d["concurrency"][1]["max_requests"] == 3
    assert round(d["roofline"]["ridge_flops_per_byte"]) == 295


def test_human_output_shows_units_sources_and_engine_lines():
    r = run("plan", "llama-3.1-8b", "--gpu", "h100", "--available-kv-memory", "51.38GiB", "--engine-version", "0.11.0",
            "--verbose")
    assert r.exit_code == 0
    out = " ".join(r.stdout.split())
    for text in ("131,072 B/token", "14.96 GiB (16.06 GB)", "GPU KV cache size:", "Maximum concurrency for 131,072 "
        "tokens", "ridge point", "4× too high"):
        assert text in out, text


def test_does_not_fit_exits_3_with_the_fix():
    r = run("plan", "meta-llama/Llama-3.1-70B", "--gpu", "h100")
    assert r.exit_code == 3
    assert "does not fit" in r.stdout and "--tp 4" in r.stdout


def test_bad_input_is_a_clear_error_not_a_traceback():
    from kvledger.errors import KvLedgerError
    for args, text in [
        (("plan", "llama-3.1-8", "--gpu", "h100"), "did you mean"),
        (("plan", "llama-3.1-8b", "--gpu", "h1000"), "unknown GPU"),
        (("plan", "llama-3.1-8b", "--gpu", "h100", "--gpu-memory-utilization", "1.5"), "gpu-memory-utilization"),
        (("plan", "llama-3.1-8b", "--gpu", "h100", "--available-kv-memory", "lots"), "cannot read"),
        (("plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "1M"), "exceeds the 131,072 tokens"),
        (("plan", "llama-3.1-8b", "--gpu", "h100", "--tp", "3"), "not divisible by 3"),
    ]:
        try:
            runner.invoke(app, list(args), catch_exceptions=False)
        except KvLedgerError as err:  # main.run() prints these without a traceback (exit 2)
            assert text in str(err), (args, str(err))
        else:
            raise AssertionError(f"no error for {args}")


def test_entry_point_prints_message_and_exits_2(capsys, monkeypatch):
    import sys

    import pytest

    from kvledger.cli.main import run as entry
    monkeypatch.setattr(sys, "argv", ["kvledger", "plan", "llama-3.1-8", "--gpu", "h100"])
    with pytest.raises(SystemExit) as e:
        entry()
    assert e.value.code == 2 and "did you mean" in capsys.readouterr().err


def test_catalog_listings():
    models = json.loads(run("models", "--json").stdout)
    assert any(m["hf_id"] == "deepseek-ai/DeepSeek-V3" and m["kv_bytes_per_token"] == 70_272 for m in models)
    # The README's `meta-llama/Llama-3.1-8B` is a release of the bundled Meta-Llama-3.1-8B config: the listing names it.
    llama = next(m for m in models if m["hf_id"] == "meta-llama/Meta-Llama-3.1-8B")
    assert "meta-llama/Llama-3.1-8B" in llama["twins"] and "llama-3.1-8b" in llama["aliases"]
    gpus = json.loads(run("gpus", "--json").stdout)
    assert any(g["gpu_id"] == "nvidia_h200_sxm" for g in gpus)
    assert "GPU catalog" in run("gpus").stdout


def test_custom_gpu_flags_and_roofline_fractions():
    # A GPU with 3.0 TB/s and 600 TFLOP/s dense BF16: ridge = 600e12 / 3.0e12 = 200 FLOP/B.
    d = json.loads(run("plan", "llama-3.1-8b", "--gpu", "h100", "--gpu-bandwidth", "3.0", "--gpu-bf16-tflops", "600",
                       "--achievable-bandwidth-fraction", "0.5", "--json").stdout)
    assert d["roofline"]["ridge_flops_per_byte"] == 200.0 and d["roofline"]["bandwidth_fraction"] == 0.5


def test_pp_shows_every_stage_and_the_binding_one():
    # Llama-3.1-8B, vLLM 0.19, PP 4 on the catalog H100 (79.22 GiB), util 0.95: ceil(total × 0.95) = 75.26 GiB;
    # PP3 (layers 24–31, LM head, sampler): 75.26 − 4.26 − 2.01 − 0.07 = 68.91 GiB → 141,137 blocks of 0.5 MiB,
    # fewer than PP0 (69.85 GiB, 1.08 GiB activation) and PP1/PP2 (3.28 GiB weights): PP3 binds.
    args = ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--pp", "4", "--engine-version", "0.19.0",
            "--gpu-memory-utilization", "0.95", "--max-model-len", "8192"]
    d = json.loads(run(*args, "--json").stdout)
    st = d["memory"]["stages"]
    assert [s["layers"] for s in st] == [[0, 7], [8, 15], [16, 23], [24, 31]]
    # H100 total 81,090 MiB (was 81,120): ceil(total × 0.95) is 29,884,416 B less, 57 blocks of 524,288 B at PP 4
    assert [s["binds"] for s in st] == [False, False, False, True]
    assert d["memory"]["num_gpu_blocks"] == st[3]["num_gpu_blocks"] == 141_080
    out = " ".join(run(*args, "--verbose").stdout.split())
    assert "Pipeline stages" in out and "binding stage PP3" in out and "binds" in out
    assert "the binding stage PP3 (layers 24–31, LM head + sampler)" in out
    # the short plan: the KV line names the binding stage; the stages' line is --verbose's (a plan across nodes ran
    # to 42 lines at 80 columns)
    short = " ".join(run(*args).stdout.split())
    assert "per GPU of the binding pipeline stage PP3 (layers 24–31 only)" in short and "LM head" not in short


def test_pp_errors():
    from kvledger.errors import KvLedgerError
    for args, text in [(("plan", "llama-3.1-8b", "--gpu", "h100", "--pp", "2", "--engine", "sglang"), "vLLM only"),
                       (("plan", "llama-3.1-8b", "--gpu", "h100", "--pp", "64"), "more pipeline stages")]:
        try:
            runner.invoke(app, list(args), catch_exceptions=False)
        except KvLedgerError as err:
            assert text in str(err), (args, str(err))
        else:
            raise AssertionError(f"no error for {args}")


def test_dtype_and_online_fp8_follow_the_logged_startups():
    # vLLM 0.19.0 on H100 (79.19 GiB, util 0.95), Llama-3.1-8B-Instruct: "--dtype float32" logs weights 29.98 GiB,
    # activation 2.21 and 42.8 GiB available; "--quantization fp8" logs 8.49 GiB of weights and 64.61 GiB available
    # (shared/data/vllm-startups-0.19). fp32: every weight 4 B (+ RoPE buffer in fp32), the sampler's logits 4 B.
    from pathlib import Path
    configs = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "configs"
    cfg = str(configs / "meta-llama--Llama-3.1-8B-Instruct.json")
    base = ["plan", cfg, "--gpu", "H100", "--gpu-memory", "79.19GiB", "--engine-version", "0.19.0",
            "--gpu-memory-utilization", "0.95", "--max-model-len", "8192", "--json"]
    for extra, weights, avail in ((["--dtype", "float32"], 29.98, 42.8), (["--quantization", "fp8"], 8.49, 64.61)):
        m = json.loads(run(*base, *extra).stdout)["memory"]
        assert round(m["deductions"][0]["gib"], 2) == weights and abs(m["available_kv_gib"] - avail) < 0.02, extra
    from kvledger.errors import KvLedgerError
    try:
        runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--dtype", "int3"], catch_exceptions=False)
    except KvLedgerError as err:
        assert "dtype" in str(err)
    else:
        raise AssertionError("no error for --dtype int3")


def test_tp_past_one_node_is_planned_on_the_nodes_it_needs_with_a_warning():
    # Mixtral-8x7B at TP 16 on H100 SXM (8 GPUs an HGX board): planned on 2 nodes, custom all-reduce and NVLS off
    # across them, 65.39 GiB of KV per GPU, as with --nnodes 2 (63.59 GiB was one node of 16 GPUs, which no H100 has)
    r = run("plan", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100-SXM", "--tp", "16")
    assert r.exit_code == 0
    # the short plan: the warning's facts in one line; the whole of it under --verbose
    assert r.stdout.splitlines()[1] == "WARNING: 16 GPUs, 8 a node: assumes --nnodes 2; TP all-reduces over NICs"
    lines = run("plan", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100-SXM", "--tp", "16", "--verbose").stdout
    lines = lines.splitlines()
    assert lines[1].startswith("WARNING: --tp 16 is 16 GPUs, more than one node of this GPU holds (8: an 8-GPU SXM5 "
                               "baseboard)") and "the plan assumes 2 nodes of 8 (--nnodes 2)" in lines[1]
    assert "available KV 65.39 GiB" in r.stdout
    d = json.loads(run("plan", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100-SXM", "--tp", "16", "--json").stdout)
    assert d["settings"]["nnodes"] == 2 and any("the plan assumes 2 nodes" in n for n in d["memory"]["notes"])
    given = run("plan", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100-SXM", "--tp", "16", "--nnodes", "2").stdout
    assert "WARNING" not in given and "available KV 65.39 GiB" in given


def test_a_max_model_len_above_the_configs_is_planned_with_vllms_long_flag():
    # Qwen3-8B's config derives 40,960 tokens (max_position_embeddings, no rope_scaling): 131,072 is refused as vLLM
    # refuses it, naming vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and this tool's flag for it (a fresh-user trial set the
    # variable and got the same refusal); with the flag the plan is made, the note says vLLM's warning. 24,755 blocks
    # of 16 tokens (54.39 GiB ÷ 147,456 B × 16, as at 32K: max_model_len moves no memory term here) hold
    # 24,755 × 16 ÷ 131,072 = 3.02 requests of 131,072 tokens
    res = runner.invoke(app, ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "128K"])
    msg = str(res.exception)
    assert "exceeds the 40,960 tokens" in msg and "--allow-long-max-model-len" in msg and "rope_scaling" in msg
    res = runner.invoke(app, ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "128K",
                              "--allow-long-max-model-len", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["memory"]["num_gpu_blocks"] == 24_755 and d["memory"]["max_model_len"] == 131_072
    assert any("above the config's 40,960 (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in n for n in d["memory"]["notes"])


def test_the_long_max_model_len_switch_is_each_engines_own():
    # SGLang refuses a context_length above the config's unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (its
    # model_config); the refusal names that, not vLLM's variable, and with the flag SGLang's and TensorRT-LLM's plans
    # say the length is above the config's (a review found them silent)
    res = runner.invoke(app, ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "128K", "--engine",
                              "sglang"])
    assert "sglang refuses this unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in str(res.exception)
    # TensorRT-LLM's PyTorch backend takes TLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (_torch/pyexecutor/model_engine.py
    # _init_max_seq_len; tests/accounting/test_trtllm_max_seq_len.py)
    for engine, said in (("sglang", "given, above the config's 40,960"),
                         ("trtllm", "given, above the model's 40,960 (TLLM_ALLOW_LONG_MAX_MODEL_LEN=1")):
        res = runner.invoke(app, ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "128K", "--engine",
                                  engine, "--allow-long-max-model-len", "--json"])
        assert res.exit_code == 0, res.output
        notes = json.loads(res.stdout)["memory"]["notes"]
        assert any(n.startswith(f"max_model_len 131,072: {said}") for n in notes), engine
