"""What the third new-user trial found, each pinned: the arrivals a simulation used, vLLM's null block, model paths in
launch commands, bigger-GPU advice, flag-naming errors, empty advice, goodput on an --out folder, plurals, and the web
app's model rule."""

from __future__ import annotations

import json

import pytest
from cli_run import MODEL
from cli_run import refused as _refused
from cli_run import run_cli as _run


def _mode(*workload: str) -> str:
    out = _run("simulate", MODEL, "--gpu", "H100", "--num-requests", "20", "--json", *workload).stdout
    return json.loads(out)["workload"]["mode"]


@pytest.mark.parametrize("workload,mode", [
    # arxiv has lengths only: traces.load_trace draws Poisson gaps at --rate with --seed
    (("--trace", "arxiv", "--rate", "2"), "open loop (Poisson arrivals at 2 req/s drawn with seed 0; the trace has no "
                                          "arrival times)"),
    # azure-conv has times: --rate scales every gap by one factor (traces._replayed_times)
    (("--trace", "azure-conv", "--rate", "2"), "open loop (trace arrival times rescaled to a mean of 2 req/s, "
                                               "burstiness kept)"),
    (("--trace", "azure-conv", "--rate-scale", "3"), "open loop (trace arrival times, rate ×3)"),
    (("--trace", "azure-conv"), "open loop (trace arrival times)"),
    (("--trace", "azure-conv", "--rate", "inf"), "open loop (every request at t = 0)"),
    (("--prompt-lengths", "fixed:100", "--output-lengths", "fixed:10", "--rate", "1", "--seed", "4"),
     "open loop (synthetic Poisson arrivals at 1 req/s drawn with seed 4)"),
    (("--prompt-lengths", "fixed:100", "--output-lengths", "fixed:10", "--rate", "1", "--arrival-cv", "2"),
     "open loop (synthetic arrivals with Gamma gaps of CV 2 at 1 req/s drawn with seed 0)"),
])
def test_simulate_says_which_arrival_times_it_used(workload, mode):
    assert _mode(*workload) == mode


def test_an_override_of_one_block_names_vllms_null_block_not_a_model_that_does_not_fit():
    # vLLM's BlockPool pops block 0 as null_block (vllm/v1/core/block_pool.py), so num_gpu_blocks 1 leaves 0 usable.
    # Llama-3.1-8B at max_model_len 131,072 needs 131,072 / 16 = 8,192 blocks, + the null block = 8,193.
    msg = _refused("simulate", MODEL, "--gpu", "H100", "--num-requests", "5", "--num-gpu-blocks-override", "1")
    assert "null block" in msg and "--num-gpu-blocks-override 2 or more" in msg and "does not fit" not in msg
    res = _run("plan", MODEL, "--gpu", "H100", "--num-gpu-blocks-override", "1")
    assert res.exit_code == 3
    text = " ".join(res.stdout.split())
    assert "null block" in text and "must be ≥ 2" in text and "needs 8,193 (8,192 blocks + the null block)" in text
    assert "short by" not in text


@pytest.mark.parametrize("change,served", [
    ({"_name_or_path": "my-org/llama-3b-ft"}, "my-org/llama-3b-ft"),  # the config names its checkpoint
    ({}, "meta-llama/Llama-3.2-3B"),  # a copy of the bundled config: its Hub id
    # the bundled config but for a context-length key: its Hub id, the key passed at launch (test_longctx_launch)
    ({"max_position_embeddings": 65536}, "meta-llama/Llama-3.2-3B"),
    ({"num_hidden_layers": 20}, None),  # neither (another architecture): a placeholder, the note says to fill it in
])
def test_search_serves_a_checkpoint_not_a_bare_config_file(tmp_path, change, served):
    # vllm serve and SGLang's --model-path load a Hub id or a checkpoint folder, never a lone config .json
    from importlib.resources import files

    raw = json.loads((files("kvledger.catalog") / "data" / "models" / "meta-llama--Llama-3.2-3B.json").read_text())
    cfg = tmp_path / "llama3b.json"
    cfg.write_text(json.dumps({**raw, **change}))
    res = _run("search", str(cfg), "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1", "--max-model-len",
               "8K", "--show-command", "H100:tp1:kv-auto", "--json")
    launch = json.loads(res.stdout)["launch"]
    shown = served or f"'<checkpoint of {cfg}>'"  # no Hub id to be known: a placeholder, never the weightless folder
    assert launch["vllm"].startswith(f"vllm serve {shown} ") and f"--model-path {shown} " in launch["sglang"]
    assert launch["check"].startswith(f"kvledger plan {cfg} ") and f"serve {tmp_path} " not in launch["vllm"]
    assert "config file standing in for a checkpoint" in launch["note"]
    assert ("its Hub id cannot be known" in launch["note"]) == (served is None)


@pytest.mark.parametrize("change", [{}, {"_name_or_path": "meta-llama/Llama-3.2-3B"}])
def test_a_checkpoints_config_json_serves_its_folder_not_the_base_it_copies(tmp_path, change):
    # a fine-tune keeps its base's config.json byte for byte (and often its _name_or_path): serving the bundled Hub id
    # it matches, or the base it names, would serve the base's weights (a fresh user's trial); a file named config.json
    # is its checkpoint folder's own, so the engine commands name that folder
    from importlib.resources import files

    raw = json.loads((files("kvledger.catalog") / "data" / "models" / "meta-llama--Llama-3.2-3B.json").read_text())
    ckpt = tmp_path / "acme-ft-3b"
    ckpt.mkdir()
    cfg = ckpt / "config.json"
    cfg.write_text(json.dumps({**raw, **change}))
    (ckpt / "model.safetensors").write_bytes(b"")  # the checkpoint's weights beside it
    argv = ["search", str(cfg), "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1", "--max-model-len", "8K",
            "--show-command", "H100:tp1:kv-auto", "--json"]
    launch = json.loads(_run(*argv).stdout)["launch"]
    assert launch["vllm"].startswith(f"vllm serve {ckpt} ") and f"--model-path {ckpt} " in launch["sglang"]
    assert "is a checkpoint's config.json" in launch["note"] and "meta-llama/Llama-3.2-3B" not in launch["vllm"]
    # a config.json alone (no weights beside it): `vllm serve <its folder>` would fail to load, so the commands hold a
    # placeholder for the checkpoint, and the note says to put its path or Hub id there
    (ckpt / "model.safetensors").unlink()
    launch = json.loads(_run(*argv).stdout)["launch"]
    assert launch["vllm"].startswith(f"vllm serve '<checkpoint of {cfg}>' ")
    assert f"--model-path '<checkpoint of {cfg}>' " in launch["sglang"]
    assert (f"{cfg} is a config.json alone (its folder {ckpt} holds no weights): in the engine commands put the "
            f"checkpoint's path or Hub id in place of <checkpoint of {cfg}>") in launch["note"]
    assert f"kvledger plan {cfg} " in launch["check"]  # the check line plans the file itself


def test_bigger_gpu_advice_ranks_memory_first_and_says_what_the_memory_buys():
    # Qwen3-32B at its 40,960-token max_model_len misses on an H100 (79.19 GiB). "Bigger" needs ≥ 5% more memory, so
    # the A100-80GB (79.25 GiB) is out; the 5% steps group H100 NVL (93.14), RTX PRO 6000 (94.97) and H20 (95.14:
    # highest
    # HBM bandwidth of the three, 4.0 vs 3.9 vs 1.8 TB/s), then H200 (139.96; SXM first of the SXM/NVL tie), then B200
    # (178.62); Grace superchips (GH200) are another server, left out for a plain H100.
    res = _run("plan", "Qwen/Qwen3-32B", "--gpu", "H100", "--json")
    assert res.exit_code == 3
    gpus = [o for o in json.loads(res.stdout)["advice"]["options"] if o["action"].startswith("--gpu ")]
    # named as the hints name GPUs (catalog.gpus.cli_name), each a name --gpu answers to
    assert [o["action"] for o in gpus] == ["--gpu h20", "--gpu h200-sxm", "--gpu b200"]
    from kvledger.catalog.gpus import get_gpu

    assert [get_gpu(o["action"].split()[1]).gpu_id for o in gpus] == ["nvidia_h20", "nvidia_h200_sxm", "nvidia_b200"]
    # 95.14 − 79.19 = 15.95 GiB more (catalog CUDA totals, gpu_cuda.csv)
    assert "95.14 GiB device memory, 15.95 GiB more than the NVIDIA H100 80GB SXM5" in gpus[0]["detail"]
    assert [o["max_requests"] for o in gpus] == sorted(o["max_requests"] for o in gpus) and gpus[0]["max_requests"] >= 1


def test_errors_name_the_flag_and_the_allowed_values():
    msg = _refused("cost", MODEL, "--gpu", "H100", "--gpu-provider", "Nowhere", "--slo", "ttft=1s", "--api",
                   "OpenAI:gpt-4.1", "--utilization", "0.5")
    assert "unknown GPU price provider 'Nowhere'." in msg and "providers with a nvidia_h100_sxm row: AWS" in msg
    assert _refused("plan", MODEL, "--gpu", "H100", "--gpu-memory", "0").startswith(
        "--gpu-memory: GPU memory 0 B is not plausible")
    # vLLM's --dtype choices (ModelConfig dtype): the literal the settings accept, not pydantic's "Input should be"
    assert _refused("plan", MODEL, "--gpu", "H100", "--dtype", "float8") == (
        "invalid setting: --dtype must be one of 'auto', 'bfloat16', 'float16', 'float32', 'half' or 'float', "
        "got 'float8'")


def test_a_plan_that_does_not_fit_lists_a_fix_or_says_none_works():
    # --gpu-memory-utilization 0.01: 0.79 GiB for 17.85 GiB of deductions. One 131,072-token request needs 8,192 blocks
    # + the null block of 2 MiB each (16 tokens × 128 KiB) = 16.002 GiB; (17.85 + 16.00) / 79.22 = 0.4273 → 0.43.
    out = " ".join(_run("plan", MODEL, "--gpu", "H100", "--gpu-memory-utilization", "0.01").stdout.split())
    assert (
        "→ --gpu-memory-utilization 0.43: 1 concurrent 131,072-token request" in out
        and "re-run with a fix above" in out
    )
    # 405B in BF16 (~756 GiB of weights) on 22 GiB L4s: no single change (TP ≤ 16, FP8 KV, utilization, a bigger GPU)
    # fits
    out = " ".join(_run("plan", "meta-llama/Llama-3.1-405B", "--gpu", "L4").stdout.split())
    assert "→ --" not in out and "re-run with a fix above" not in out and "no single change tried" in out


def test_a_pipeline_of_a_draft_model_prints_no_empty_kv_line_and_no_blocks_to_compare():
    from pathlib import Path

    cfg = Path(__file__).parents[2] / "benchmarks" / "data" / "oracle_configs" / "gemma4_unified_assistant.json"
    out = _run("plan", str(cfg), "--gpu", "H100", "--pp", "2").stdout
    assert "— \n" not in out and "has the fewest blocks" not in out
    assert "no stage keeps a KV cache, so there are no blocks to compare" in " ".join(out.split())


def test_goodput_reads_a_simulate_out_folder(tmp_path):
    out = tmp_path / "run"
    _run("simulate", MODEL, "--gpu", "H100", "--num-requests", "12", "--rate", "2", "--out", str(out))
    from_dir = json.loads(_run("goodput", str(out), "--slo", "ttft=1s", "--json").stdout)
    from_file = json.loads(_run("goodput", str(out / "records.parquet"), "--slo", "ttft=1s", "--json").stdout)
    assert from_dir == from_file and from_dir["file"] == str(out / "records.parquet")
    assert from_dir["num_requests"] == 12


def test_models_table_names_the_quantization_column():
    out = _run("models").stdout
    assert "quantization" in out and "│ weights" not in out
    assert "none (bfloat16)" in out  # an unquantized checkpoint: weights in the config's dtype
    rows = json.loads(_run("models", "--json").stdout)
    fp8 = next(r for r in rows if r["hf_id"] == "Qwen/Qwen3-32B-FP8")
    assert fp8["quantization"] == "fp8" and fp8["dtype"] == "bfloat16"


def test_cost_counts_deployment_units_and_plurals():
    # --replicas 2: the ledger's unit is one deployment unit of 2 engine replicas on 2 GPUs
    out = " ".join(_run("cost", "--simulate", MODEL, "--gpu", "H100", "--replicas", "2", "--slo", "ttft=1s,tpot=100ms",
                        "--api", "OpenAI:gpt-4.1", "--num-requests", "100",
                        "--gpu-usd-per-hour", "3", "--monthly-requests", "1").stdout.split())
    assert "one deployment unit = 2 replicas × TP 1 = 2 GPUs" in out and "replica(s)" not in out
    # the answer first: one priced unit of 2 GPUs even at 1 request a month, the break-even in whole units
    # (the unit says its engines: 2 replicas × 1 GPU, not "1 replica × 2 GPUs", which read as one TP-2 engine)
    assert "self-hosted: 2 replicas × 1 GPU (one deployment unit) rented" in out
    assert "1 deployment unit (2 replicas, 2 GPUs)" in out
    assert "1 requests" not in out and "1 replicas" not in out


def test_search_counts_read_as_reason_then_number():
    # Llama-3.1-70B (~131 GiB of BF16 weights) cannot fit an L4 at TP 1 or 2 nor one H100; two H100s at TP 2 do
    out = _run("search", "meta-llama/Llama-3.1-70B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4,H100", "--tp", "1,2",
               "--max-model-len", "8K", "--num-requests", "60", "--utilization", "0.5").stdout
    assert "4 candidates, 1 feasible" in out and "Top 1 of 1 feasible candidate " in out
    assert "rejected: 3 of 4 — does not fit: 3 (e.g. nvidia_l4:tp1:kv-auto)" in " ".join(out.split())


def test_settings_errors_use_the_flag_name_and_its_unit():
    # --weights-memory fills PlanSettings.weights_bytes (bound 2^45 B = 32,768 GiB); the message names the flag in GiB
    assert _refused("plan", MODEL, "--gpu", "H100", "--weights-memory", "100TiB") == (
        "invalid setting: --weights-memory must be ≤ 32,768 GiB, got 102,400.00 GiB")
    assert _refused("plan", MODEL, "--gpu", "H100", "--context", "999999999").startswith("invalid setting: --context: ")
