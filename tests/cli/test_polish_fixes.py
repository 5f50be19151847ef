"""What the third new-user trial found, each pinned: the arrivals a simulation used, vLLM's null block, model paths in
launch commands, bigger-GPU advice, flag-naming errors, empty advice, goodput on an --out folder, plurals, and the web
app's model rule."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "250"})


def _refused(*args: str) -> str:
    """The message of the error the command ends with (the console entry prints it and exits with status 2)."""
    with pytest.raises(KvLedgerError) as err:
        _run(*args)
    return str(err.value)


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


@pytest.mark.parametrize("name_or_path", [None, "meta-llama/Llama-3.2-3B"])
def test_search_serves_a_checkpoint_not_a_bare_config_file(tmp_path, name_or_path):
    # vllm serve and SGLang's --model-path load a Hub id or a checkpoint folder, never a lone config .json
    from importlib.resources import files

    raw = json.loads((files("kvledger.catalog") / "data" / "models" / "meta-llama--Llama-3.2-3B.json").read_text())
    if name_or_path:
        raw["_name_or_path"] = name_or_path
    cfg = tmp_path / "llama3b.json"
    cfg.write_text(json.dumps(raw))
    res = _run("search", str(cfg), "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1", "--max-model-len",
               "8K", "--show-command", "H100:tp1:kv-auto", "--json")
    launch = json.loads(res.stdout)["launch"]
    served = name_or_path or str(tmp_path)
    assert launch["vllm"].startswith(f"vllm serve {served} ") and f"--model-path {served} " in launch["sglang"]
    assert launch["check"].startswith(f"kvledger plan {cfg} ") and str(cfg) not in launch["vllm"]
    assert "config file standing in for a checkpoint" in launch["note"]


def test_bigger_gpu_advice_ranks_memory_first_and_says_what_the_memory_buys():
    # Qwen3-32B at its 40,960-token max_model_len misses on an H100 (79.22 GiB). "Bigger" needs ≥ 5% more memory, so
    # the A100-80GB (79.57 GiB) is out; the 5% steps group RTX PRO 6000 (89.41) with H100 NVL (93.16: highest HBM
    # bandwidth of the two, 3.9 vs 1.8 TB/s), then H200 (139.97; SXM first of the SXM/NVL tie), then B200 (178.63);
    # Grace superchips (GH200) are another server, left out for a plain H100.
    res = _run("plan", "Qwen/Qwen3-32B", "--gpu", "H100", "--json")
    assert res.exit_code == 3
    gpus = [o for o in json.loads(res.stdout)["advice"]["options"] if o["action"].startswith("--gpu")]
    assert [o["action"] for o in gpus] == ["--gpu nvidia_h100_nvl", "--gpu nvidia_h200_sxm", "--gpu nvidia_b200"]
    # 93.16 − 79.22 = 13.94 GiB more (catalog CUDA totals)
    assert "93.16 GiB device memory, 13.94 GiB more than the NVIDIA H100 80GB SXM5" in gpus[0]["detail"]
    assert [o["max_requests"] for o in gpus] == sorted(o["max_requests"] for o in gpus) and gpus[0]["max_requests"] >= 1


def test_errors_name_the_flag_and_the_allowed_values():
    msg = _refused("cost", MODEL, "--gpu", "H100", "--gpu-provider", "Nowhere", "--slo", "ttft=1s", "--api",
                   "OpenAI:gpt-4.1", "--utilization", "0.5")
    assert "unknown GPU price provider 'Nowhere'." in msg and "providers with a nvidia_h100_sxm row: AWS" in msg
    assert _refused("plan", MODEL, "--gpu", "H100", "--gpu-memory", "0").startswith(
        "--gpu-memory: GPU memory 0 GiB is not plausible")
    # vLLM's --dtype choices (ModelConfig dtype): the literal the settings accept, not pydantic's "Input should be"
    assert _refused("plan", MODEL, "--gpu", "H100", "--dtype", "float8") == (
        "invalid setting: --dtype must be one of 'auto', 'bfloat16', 'float16', 'float32', 'half' or 'float', "
        "got 'float8'")
