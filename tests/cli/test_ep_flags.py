"""The EP-size refusals (ep_flags.py) name what applies to the model: a dense model has no experts in any engine,
and TensorRT-LLM's own EP flag is trtllm-serve's --ep_size; SGLang's --ep-size 1 (its default) simulates as without
it."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused

DENSE = "meta-llama/Llama-3.1-8B"  # bundled config: no routed experts (num_experts 0)
MOE = "Qwen/Qwen3-30B-A3B"  # 128 routed experts, top 8


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
def test_ep_size_on_a_dense_model_says_it_has_no_experts_not_use_vllms_ep(engine):
    # Llama-3.1-8B is dense: no engine's expert parallelism applies (vLLM refuses --enable-expert-parallel for it,
    # config/model.py::_verify_with_expert_parallelism). Before, every engine's refusal advised "kvledger's equivalent
    # is vLLM's --enable-expert-parallel", which vLLM itself refuses for this model.
    msg = refused("plan", DENSE, "--gpu", "H100", "--engine", engine, "--tp", "2", "--ep-size", "2")
    assert msg.startswith(f"--ep-size 2: {DENSE} (config of meta-llama/Meta-Llama-3.1-8B) has no routed experts, so "
                          "expert parallelism has nothing to place in any engine")
    assert "drop --ep-size: at --tp 2 its weights are already split over 2 GPUs; for more GPUs, raise --tp" in msg
    assert "kvledger's equivalent" not in msg and "pass --enable-expert-parallel" not in msg
    # the replicas each engine's plan takes: vLLM's --data-parallel-size; SGLang's --dp-size without DP attention
    assert ("add --data-parallel-size N" in msg) == (engine == "vllm")
    assert ("SGLang's --dp-size without DP attention" in msg) == (engine == "sglang")


def test_enable_ep_moe_on_a_dense_70b_under_sglang_says_it_has_no_experts():
    # a dense 70B at TP 4 (SGLang 0.4.x's --enable-ep-moe: EP = TP): same facts, at --tp 4.
    msg = refused("plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "H100", "--engine", "sglang", "--tp", "4",
                  "--enable-ep-moe")
    assert msg.startswith("--enable-ep-moe: meta-llama/Llama-3.3-70B-Instruct (config of meta-llama/Meta-Llama-3.1-70B)"
                          " has no routed experts")
    assert "at --tp 4 its weights are already split over 4 GPUs" in msg and "drop --enable-ep-moe" in msg


def test_simulate_ep_size_on_a_dense_model_says_simulation():
    msg = refused("simulate", DENSE, "--gpu", "H100", "--engine", "sglang", "--ep-size", "2", "--num-requests", "5")
    assert msg.startswith(f"--ep-size 2: {DENSE} (config of meta-llama/Meta-Llama-3.1-8B) has no routed experts")
    assert "at --tp 1 it is whole on one GPU" in msg and "each replica's simulation is this one's" in msg


def test_trtllm_ep_size_on_a_moe_model_names_trtllm_serves_ep_size():
    # trtllm-serve takes --moe_expert_parallel_size / --ep_size (tensorrt_llm/commands/serve.py); before, the refusal
    # said "TensorRT-LLM has no EP size". kvledger's TensorRT-LLM plan splits each expert by tensor over TP.
    msg = refused("plan", MOE, "--gpu", "H100", "--engine", "trtllm", "--tp", "2", "--ep-size", "2")
    assert msg.startswith("--ep-size 2: TensorRT-LLM's expert parallelism (trtllm-serve's --ep_size) is not modelled")
    assert "plan with --engine vllm --tp 2 --enable-expert-parallel, or drop --ep-size to plan TensorRT-LLM" in msg
    assert "no EP size" not in msg
    # --ep-size 1 is no expert parallelism (experts TP-sliced), what the plan models: it plans as without it
    base = (MOE, "--gpu", "H100", "--engine", "trtllm", "--tp", "2")
    assert cli_json("plan", *base, "--ep-size", "1")["memory"] == cli_json("plan", *base)["memory"]


def test_simulate_and_goodput_take_sglangs_ep_size_1_as_without_it():
    # SGLang's --ep-size 1 is its default (no expert parallelism). Before: sim_request passed ep_size on to
    # SimRequestArgs, and simulate / goodput ended in a TypeError traceback ("unexpected keyword argument 'ep_size'").
    base = ("simulate", DENSE, "--gpu", "H100", "--engine", "sglang", "--num-requests", "5")
    one, without = cli_json(*base, "--ep-size", "1"), cli_json(*base)
    assert one["summary"] == without["summary"]
    good = cli_json("goodput", "--simulate", DENSE, "--gpu", "H100", "--slo", "ttft=1s", "--engine", "sglang",
                    "--ep-size", "1", "--num-requests", "5")
    plain = cli_json("goodput", "--simulate", DENSE, "--gpu", "H100", "--slo", "ttft=1s", "--engine", "sglang",
                     "--num-requests", "5")
    assert (good["num_completed"], good["goodput_req_per_s"]) == (plain["num_completed"], plain["goodput_req_per_s"])
    assert good["num_completed"] == 5


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_enable_expert_parallel_off_vllm_on_a_dense_model_does_not_advise_vllm(engine):
    # Before: "--enable-expert-parallel is vLLM's flag; sglang takes --enable-ep-moe / --ep-size ...: drop
    # --enable-expert-parallel, or model vLLM", though vLLM refuses the flag for a dense model; now the model's fact
    # comes first, whatever the engine.
    msg = refused("plan", DENSE, "--gpu", "H100", "--engine", engine, "--tp", "2", "--enable-expert-parallel")
    assert msg.startswith(f"--enable-expert-parallel: {DENSE} (config of meta-llama/Meta-Llama-3.1-8B) has no routed "
                          "experts, so no engine's expert parallelism applies to it")
    assert "model vLLM" not in msg


def test_enable_expert_parallel_under_trtllm_names_trtllm_serves_ep_size():
    # Before: "trtllm takes its own expert-parallel settings"; trtllm-serve's flag is --ep_size (serve.py).
    msg = refused("plan", MOE, "--gpu", "H100", "--engine", "trtllm", "--tp", "2", "--enable-expert-parallel")
    assert msg == ("--enable-expert-parallel is vLLM's flag; TensorRT-LLM takes trtllm-serve's --ep_size, which "
                   "kvledger does not model: drop --enable-expert-parallel, or model vLLM")
