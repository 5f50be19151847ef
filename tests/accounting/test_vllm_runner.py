"""vLLM's V2 model runner: which release runs it for which model, and what its profile deducts (vllm_runner.py).

Rules read in the wheels of 0.21.0–0.33.0 (``config/vllm.py::use_v2_model_runner``, ``envs.py``,
``v1/worker/gpu/model_runner.py``, ``v1/worker/gpu/cudagraph_utils.py``); figures checked against the two vLLM 0.27.1
RTX 4090 start-ups of benchmarks/data/vllm_public_startups.csv (P19, P20), which were not used to set anything.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_runner import model_runner
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.quant import online_fp8
from kvledger.errors import InputError
from kvledger.units import GiB

QWEN05 = "benchmarks/data/configs/Qwen2.5-Coder-0.5B-Instruct.json"  # Qwen2ForCausalLM, 896 hidden, 151,936 vocab
LLAMA8 = "meta-llama/Llama-3.1-8B"


def _model(name):
    return load_model(name, allow_hub=False)


def _p19(**kw):
    """P19: vllm serve, vLLM 0.27.1, RTX 4090 under WSL2, utilization 0.85, max_model_len 2,048 (FlashInfer in)."""
    s = make_settings(engine_version="0.27.1", gpu_memory_utilization=0.85, max_model_len=2048, wddm=True,
                      sampler_backend="flashinfer", **kw)
    return build_plan(_model(QWEN05), resolve_gpu("nvidia_rtx_4090"), s, with_roofline=False, with_advice=False).memory


def _p20(**kw):
    """P20: LLM() of vLLM 0.27.1 on the same card: utilization 0.92, 8,192 batched tokens, max_model_len 32,768."""
    s = make_settings(engine_version="0.27.1", gpu_memory_utilization=0.92, max_model_len=32768,
                      max_num_batched_tokens=8192, wddm=True, **kw)
    return build_plan(_model(QWEN05), resolve_gpu("nvidia_rtx_4090"), s, with_roofline=False, with_advice=False).memory


def _items(mem):
    return {d.name.split(" (")[0]: d for d in mem.deductions}


@pytest.mark.parametrize(("name", "ver", "v2"), [
    (LLAMA8, (0, 21, 0), False),  # envs.py: VLLM_USE_V2_MODEL_RUNNER defaults to "0" up to 0.21
    (LLAMA8, (0, 22, 0), False),  # 0.22 lists Qwen3ForCausalLM only
    ("Qwen/Qwen3-8B", (0, 22, 0), True),
    (LLAMA8, (0, 23, 0), True),  # 0.23 adds Llama and Mistral
    ("mistralai/Mixtral-8x7B-v0.1", (0, 24, 0), False),  # 0.24: the listed architectures only (not Mixtral)
    ("mistralai/Mixtral-8x7B-v0.1", (0, 28, 0), False),  # 0.25–0.28: MoE only when listed
    (QWEN05, (0, 25, 0), True),  # 0.25–0.28: every dense model
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", (0, 27, 1), False),  # hybrid (linear attention + attention): V1 to 0.28
    ("mistralai/Mixtral-8x7B-v0.1", (0, 29, 0), True),  # every model from 0.29
    ("deepseek-ai/DeepSeek-V3", (0, 33, 0), True),
])
def test_default_runner_by_release(name, ver, v2):
    assert model_runner(_model(name), ver).v2 is v2


def test_quantized_models_stay_on_v1_in_0_22_and_0_23_only():
    # 0.22/0.23 _is_default_v2_model_runner_model: "not model_config.is_moe and not model_config.is_quantized";
    # --quantization counts (is_quantized is the config's quantization, online or not); 0.24 drops the condition
    llama = _model(LLAMA8)
    assert model_runner(llama, (0, 23, 0), online_quant=True).v2 is False
    assert model_runner(replace(llama, quant=online_fp8()), (0, 23, 0)).v2 is False
    assert model_runner(llama, (0, 24, 0), online_quant=True).v2 is True


def test_rocm_keeps_its_listed_architectures_on_v1():
    # 0.30 ROCM_DEFAULT_MRV1_ARCHITECTURES holds DeepseekV32ForCausalLM; 0.32 has no such list
    m = replace(_model("deepseek-ai/DeepSeek-V3"), architectures=("DeepseekV32ForCausalLM",))
    assert model_runner(m, (0, 30, 0), rocm=True).v2 is False
    assert model_runner(m, (0, 30, 0)).v2 is True and model_runner(m, (0, 32, 0), rocm=True).v2 is True


def test_forcing_a_runner_and_before_its_package_existed():
    llama = _model(LLAMA8)
    assert model_runner(llama, (0, 33, 0), "v1").v2 is False and model_runner(llama, (0, 20, 0), "v2").v2 is True
    with pytest.raises(InputError, match="no V2 model runner"):
        model_runner(llama, (0, 11, 0), "v2")  # v1/worker/gpu/ is absent from the 0.11.2 wheel, first in 0.12.0


def test_p19_v2_profile_hand_worked():
    # V2 profile_run: forward over 2,048 tokens in min(2,048, 256) = 256 dummy requests, then the greedy dummy sampler
    # (temperature 0, so no fp32 copy, no top-k/top-p, no FlashInfer): logits 256 × 151,936 × 2 B = 77,791,232 B,
    # + the forward's final hidden states 2,048 × 896 × 2 B = 3,670,016 B (above the layer transient,
    # 2,048 × (4·896 + 3·4,864) × 2 B = 74,448,896 B), + the fixed 0.05 GiB of vllm_profile.ACTIVATION_FIXED_BYTES.
    items = _items(_p19())
    assert items["activation peak"].bytes == 77_791_232 + 3_670_016 + int(0.05 * GiB)
    assert items["CUDA graphs"].bytes == 0  # gpu/model_runner.py::profile_cudagraph_memory returns 0 in 0.27.1
    assert "V2 model runner" in " ".join(_p19().notes)


def test_p19_p20_available_kv_against_the_logs():
    # P19 prints "Available KV cache memory: 19.06 GiB" from requested 20.39 (0.85 × 23.99 GiB, the whole board under
    # WSL2) − consumed 1.25 − peak activation 0.08. The plan: 20.39 − weights 0.92 − activation 0.13 − non-torch 0.25
    # − CUDA graphs 0 = 19.09 GiB (+0.16 %). P20 prints 20.52 GiB; the plan: 22.07 − 0.92 − forward 8,192 ×
    # (4·896 + 3·4,864) × 2 B + 0.05 GiB (0.33) − 0.25 = 20.57 (+0.23 %). Both printed figures inside the plan's range.
    for mem, printed in ((_p19(), 19.06), (_p20(), 20.52)):
        lo, hi = mem.ranges["available_kv_bytes"]
        assert abs(mem.available_kv_bytes / GiB - printed) < 0.06 and lo / GiB <= printed <= hi / GiB
    assert _items(_p20())["activation peak"].bytes == 8192 * (4 * 896 + 3 * 4864) * 2 + int(0.05 * GiB)


def test_the_same_start_up_on_the_v1_runner_is_the_old_plan():
    # VLLM_USE_V2_MODEL_RUNNER=0: V1's estimate (0.7266 GiB for 51 sizes) and its sampler come back. FlashInfer was
    # 256 × 151,936 × (2 + 12) B, 17.93 GiB (the −5.9 % the corpus showed before the V2 rule); from 0.21 V1's second,
    # seeded dummy pass runs forward_native, adding the Triton buffer 128 SMs × 151,936 × 4 B = 0.0725 GiB: 17.86 GiB.
    mem = _p19(model_runner="v1")
    assert math.isclose(_items(mem)["CUDA graphs"].bytes / GiB, 0.7265625)
    assert round(mem.available_kv_bytes / GiB, 2) == 17.86
    # the forward, 2,048 × (4·896 + 3·4,864) × 2 = 74,448,896 B, is smaller than sampler + hidden states
    want = 256 * 151_936 * 14 + 128 * 151_936 * 4 + 2048 * 896 * 2 + int(0.05 * GiB)
    assert _items(mem)["activation peak"].bytes == want


def test_v2_estimates_cuda_graphs_from_0_29():
    # 0.29 gpu/cudagraph_utils.py::profile_cudagraph_memory measures the captures: the V1 rule's sum is kept
    kw = {"gpu_memory_utilization": 0.85, "max_model_len": 2048}
    gpu, m = resolve_gpu("nvidia_rtx_4090"), _model(QWEN05)
    at = {v: _items(build_plan(m, gpu, make_settings(engine_version=v, **kw), with_roofline=False,
                               with_advice=False).memory)["CUDA graphs"].bytes for v in ("0.28.0", "0.29.0")}
    assert at["0.28.0"] == 0 and math.isclose(at["0.29.0"] / GiB, 0.7265625)


def test_0_33_v2_warm_up_pass_keeps_the_v1_sampler_bytes():
    # 0.33 _dummy_sampler_run adds a pass with SamplingParams.for_sampler_warmup (top-k, top-p, penalties, logprobs):
    # sized with the V1 sampler's bytes, so the default plan is the V1 runner's to the byte
    gpu, m = resolve_gpu("h100"), _model(LLAMA8)
    mems = [build_plan(m, gpu, make_settings(engine_version="0.33.0", model_runner=r), with_roofline=False,
                       with_advice=False).memory for r in ("auto", "v1")]
    assert mems[0].available_kv_bytes == mems[1].available_kv_bytes


def test_cli_flag_errors_are_input_errors():
    # InputError: the CLI's entry point prints its one paragraph and exits 2 (checked by hand: `kvledger plan ...
    # --engine-version 0.11.0 --model-runner v2` prints "error: --model-runner v2: vLLM 0.11.0 has no V2 model
    # runner ..." and returns 2)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    run = CliRunner(env={"COLUMNS": "250"}).invoke
    r = run(app, ["plan", LLAMA8, "--gpu", "h100", "--engine-version", "0.11.0", "--model-runner", "v2"])
    assert isinstance(r.exception, InputError) and "no V2 model runner" in str(r.exception)
    r = run(app, ["plan", LLAMA8, "--gpu", "h100", "--engine", "sglang", "--model-runner", "v1"])
    assert isinstance(r.exception, InputError) and "--model-runner is a vLLM flag" in str(r.exception)
