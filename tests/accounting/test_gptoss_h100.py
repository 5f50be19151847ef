"""gpt-oss-120b on one H100 at TP 1: the MXFP4 layout vLLM 0.10.1 and 0.10.2 load, the profile run's activation peak
derived by hand from vLLM 0.10.2's code, a public 0.10.1 start-up log, and the verdict when the range holds a fit
(GPUStack's performance lab served ``vllm serve openai/gpt-oss-120b --max-model-len 32768`` on one H100 with 0.10.2)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model
from kvledger.units import GiB

H100 = get_gpu("H100-SXM")
OSS = "openai/gpt-oss-120b"


def plan(version: str, **kw):
    return build_plan(load_model(OSS), H100, make_settings(engine_version=version, max_model_len=32768, **kw),
                      with_roofline=False)


def term(p, name):
    return next(d for d in p.memory.deductions if d.name == name)


# Hand derivation, vLLM 0.10.2 (the wheel's code):
#  * gpu_worker.py::determine_available_memory subtracts weights, the torch peak increase and the non-torch increase of
#    gpu_model_runner.py::profile_run; CUDA graphs are captured after the KV pool is sized (not subtracted).
#  * profile_run: _dummy_run(max_num_batched_tokens = 8,192) then _dummy_sampler_run on the last token of
#    min(max_num_seqs, max_num_batched_tokens) = min(1,024, 8,192) = 1,024 dummy requests (server defaults for a
#    ≥70 GiB GPU, engine/arg_utils.py). gpt-oss's config hook (model_executor/models/config.py ::
#    GptOssForCausalLMConfig.verify_and_update_config) changes only the CUDA-graph sizes, not max_num_seqs.
#  * _dummy_sampler_run: temperature 0.5, top_p 0.9, top_k = vocab − 1, max_num_logprobs None, no generators:
#    logits 1,024 × 201,088 in bfloat16 (2 B); v1/sample/ops/topk_topp_sampler.py :: TopKTopPSampler.__init__ takes
#    forward_cuda (FlashInfer) when flashinfer imports and VLLM_USE_FLASHINFER_SAMPLER is not 0 (None = on), else
#    forward_native, whose apply_top_k_top_p sorts the fp32 logits.
#  * PyTorch (sort) point: 1,024 × 201,088 × (2 + 35.95) B = 7,814,440,550 B (35.95 B per logit: the sort era's
#    fitted bytes, vllm_profile.SAMPLER_BYTES_PER_LOGIT_SORT, which reproduces gpt-oss-20b's logged 7.38 GiB) + the
#    forward's final hidden states 8,192 × 2,880 × 2 B = 47,185,920 B + 0.05 GiB fixed = 7.372 GiB.
#  * FlashInfer: 1,024 × 201,088 × (2 + 4 + 4 + 4) B = 2,882,797,568 B + 47,185,920 B + 0.05 GiB = 2.780 GiB.
LOGITS = 1024 * 201_088
HIDDEN = 8192 * 2880 * 2
SORT_PEAK = LOGITS * (2 + 35.95) + HIDDEN + int(0.05 * GiB)
FLASHINFER_PEAK = LOGITS * (2 + 12) + HIDDEN + int(0.05 * GiB)


def test_activation_peak_matches_the_hand_derivation_with_flashinfer_in_the_range():
    act = term(plan("0.10.2"), "activation peak")
    assert act.bytes == pytest.approx(SORT_PEAK, abs=0.01 * GiB) and round(act.bytes / GiB, 2) == 7.37
    assert act.low_bytes <= FLASHINFER_PEAK < act.bytes <= act.high_bytes
    fi = term(plan("0.10.2", sampler_backend="flashinfer"), "activation peak")
    assert fi.bytes == pytest.approx(FLASHINFER_PEAK, abs=0.01 * GiB)


def test_marlin_on_hopper_up_to_0_11_with_triton_as_the_low_end():
    # 0.10.1.1 pins torch 2.7.1: mxfp4.py::_should_use_marlin fails is_torch_equal_or_newer("2.8.0") → Marlin (hidden
    # 2,880 → 3,072, intermediate 2,880 → 2,944) whatever is installed. 0.10.2 pins torch 2.8.0: get_mxfp4_backend
    # takes Triton when triton_kernels is installed (intermediate 2,880 is already a multiple of 64: no padding), Marlin
    # when not, and no 0.10.2–0.11.2 wheel carries triton_kernels: a stock install runs Marlin, Triton is the low end.
    m = load_model(OSS)
    old = loaded_weights(m, gpu_arch="sm90", engine_version=(0, 10, 1), mxfp4=("marlin", ""))
    new = loaded_weights(m, gpu_arch="sm90", engine_version=(0, 10, 2), mxfp4=("marlin", "triton"))
    assert "Marlin" in old.how and "Marlin" in new.how and old.marlin_bytes == 0.0
    assert new.bytes == pytest.approx(old.bytes, rel=1e-9) and new.marlin_bytes < new.bytes
    triton = loaded_weights(m, gpu_arch="sm90", engine_version=(0, 10, 2), mxfp4=("triton", ""))
    assert new.marlin_bytes == triton.bytes and "Triton" in triton.how
    w = term(plan("0.10.2"), "weights")
    assert w.bytes == new.bytes and w.low_bytes == pytest.approx(triton.bytes) and "triton_kernels" in w.range_source
    # from 0.12.0 the wheel bundles triton_kernels (vllm/third_party): Triton, no other end
    w12 = term(plan("0.12.0"), "weights")
    assert w12.bytes == pytest.approx(triton.bytes, rel=1e-9) and w12.low_bytes == w12.bytes


def test_the_public_0_10_1_h100_log_and_the_verdict_that_may_fit():
    # vLLM issue 23278 (0.10.1, H100, defaults, Marlin warning): "Model loading took 65.9651 GiB", "Available KV cache
    # memory: -2.14 GiB" (failed to start; max_model_len 131,072 does not enter the profile run).
    p = plan("0.10.1")
    assert term(p, "weights").bytes / GiB == pytest.approx(65.9651, abs=0.03)
    assert p.memory.available_kv_bytes / GiB == pytest.approx(-2.14, abs=0.1)
    assert p.advice.verdict == "weights_do_not_fit"
    # the range (FlashInfer sampler, as installed images ship it) holds requests: the verdict says it may fit
    assert p.memory.ranges["max_concurrency"][1] >= 1 and "It may fit after all" in p.advice.message


def test_0_10_2_as_gpustack_served_it():
    # a stock 0.10.2 (Marlin layout, the sort sampler) leaves no KV memory at utilization 0.9: 71.27 − 65.95 − 7.37 −
    # 0.13 < 0, as vLLM 0.11.0 logs on one H100 (vllm#27508: "Available KV cache memory: -2.28 GiB"); GPUStack's
    # run started, so its image held triton_kernels (the Triton layout fits) or flashinfer (its sampler's 2.78 GiB
    # peak: 71.27 − 65.95 − 2.78 − 0.13 ≈ 2.4 GiB even in the Marlin layout)
    assert plan("0.10.2").memory.available_kv_bytes < 0
    p = plan("0.10.2", mxfp4_backend="triton")
    assert p.advice.verdict == "fits" and p.memory.available_kv_bytes > 0
    fi = plan("0.10.2", sampler_backend="flashinfer")
    assert fi.memory.available_kv_bytes > 2 * GiB
