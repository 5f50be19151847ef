"""Plans against the public bug reports of old vLLM versions (issue 22 item 6), each worked from the report's printed
figures and the version's code (wheels of 0.6.3, 0.6.4.post1, 0.6.5 and 0.7.2 read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_profile import ACTIVATION_FIXED_BYTES, PPStage, activation_peak, forward_peak_bytes
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB

R1_QWEN_14B = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "DeepSeek-R1-Distill-Qwen-14B.json"
V072, V064 = (0, 7, 2), (0, 6, 4)


def _plan(model, gpu: str, **kw):
    return build_plan(model, get_gpu(gpu), make_settings(**kw), with_roofline=False, with_advice=False)


def _term(p, name: str):
    return next(d for d in p.memory.deductions if d.name == name)


def test_r1_distill_qwen_14b_tp2_rtx4090_v072_binds_on_the_sampling_driver():
    # https://github.com/vllm-project/vllm/issues/13061 (vLLM 0.7.2, 2× RTX 4090, --tensor_parallel_size 2
    # --gpu_memory_utilization=0.98, max_model_len 131,072 from the config). A non-driver worker prints weights
    # 13.9476 GiB, non_torch 0.25, activation 0.19, "the rest ... for KV Cache is 8.69GiB" of 23.08 (= 23.55 × 0.98);
    # the engine then refuses: "max seq len (131072) is larger than ... KV cache (81536)". 81,536 tokens = 5,096 blocks
    # of 16 × 98,304 B (48 layers × 2 × 4 KV heads/GPU × 128 × 2 B) = 7.46 GiB: the driver's figure, since
    # executor_base.determine_num_available_blocks keeps the minimum over workers and only the driver samples
    # (model_runner.ModelRunner.execute_model returns before self.model.sample when not is_driver_worker).
    # Code (0.7.2): max_model_len > 32K turns chunked prefill on (engine/arg_utils.py), SchedulerConfig.__post_init__
    # sets 2,048 tokens; worker.determine_num_available_blocks: total × util − (weights + torch peak increase
    # + non-torch increase); CUDA graphs are captured after the KV cache (not subtracted); GeForce cards have no peer
    # access, so custom all-reduce is off (no buffers).
    m = load_model(str(R1_QWEN_14B))
    p = _plan(m, "rtx-4090", engine_version="0.7.2", tp=2, gpu_memory_utilization=0.98)
    assert p.memory.max_num_batched_tokens == 2048 and p.kv.bytes_per_token == 98_304
    assert _term(p, "weights").bytes / GiB == pytest.approx(13.9476, abs=0.005)
    # non-driver (no sampler): forward over 2,048 tokens, V0 keeps 3 hidden copies: 2,048 × (3·5,120 + 3·13,824/2)
    # × 2 B = 0.138 GiB + 0.05 fixed = 0.188 → printed 0.19 (4 copies would give 0.21)
    rank1 = PPStage(0, 2, 0, m.num_layers)  # a stage that is not last: the forward without the sampler
    fwd = activation_peak(m, V072, 2048, 256, 2, rank1)[0] - 2 * 2048 * m.hidden_size * 2  # less the PP buffers
    assert forward_peak_bytes(m, 2048, 2, V072) == 2048 * 36_096 * 2
    assert fwd / GiB == pytest.approx(0.19, abs=0.005)
    # driver: sort sampler 256 × 152,064 × (2 + 35.95) B = 1.376 GiB + hidden 2,048 × 5,120 × 2 B + 0.05 = 1.445 GiB
    # (the log implies 23.08 − 13.95 − 0.25 − 7.46 ≈ 1.42 if the driver's non-torch is the non-driver's 0.25)
    assert _term(p, "activation peak").bytes / GiB == pytest.approx(1.445, abs=0.005)
    # 23.52 × 0.98 − 13.95 − 1.445 − 0.33 = 7.32 GiB (printed 7.46, −1.9%: device total 23.52 vs the poster's 23.55,
    # non-torch 0.33 vs 0.25, activation +0.03), 4,996 blocks against 5,096; the range holds the engine's figure
    assert p.memory.available_kv_bytes / GiB == pytest.approx(7.32, abs=0.01)
    lo, hi = p.memory.ranges["num_gpu_blocks"]
    assert lo <= 5096 <= hi
    # and, as vLLM did, the plan refuses max_model_len 131,072 (4,996 × 16 = 79,936 tokens < 131,072)
    assert not p.fits


def test_v064_llama8b_rtx3090_profile_terms_match_the_printed_ones():
    # https://github.com/vllm-project/vllm/issues/10517 (comment of 2024-12-02; the "Memory profiling results:" line
    # exists only in 0.6.4.x's worker.py): weights 14.9888 GiB, peak_torch_memory 17.06 (20K) and 17.98 (29K),
    # non_torch_memory 0.35 at both. No chunking below 32K: the forward over max_model_len tokens dominates:
    # 20,000 × (3·4,096 + 3·14,336) × 2 B = 2.060 GiB (printed 17.06 − 14.99 = 2.07),
    # 29,000 × 55,296 × 2 B = 2.987 GiB (printed 2.99). 0.6.4 subtracts all non-torch memory: 0.35.
    m = load_model("meta-llama/Llama-3.1-8B")
    for length, printed in ((20_000, 2.07), (29_000, 2.99)):
        p = _plan(m, "rtx-3090", engine_version="0.6.4", max_model_len=length)
        act = _term(p, "activation peak").bytes - ACTIVATION_FIXED_BYTES
        assert act == length * 55_296 * 2 and act / GiB == pytest.approx(printed, abs=0.011)
        assert _term(p, "non-torch memory").bytes / GiB == pytest.approx(0.35)


def test_v064_llama8b_rtx3090_at_45k_the_sampler_decides():
    # Same thread: "I can run 20k, 35k, or 45k". Above 32K, 0.6.3 and 0.6.4 turn chunked prefill on
    # (engine/arg_utils.py use_long_context) and SchedulerConfig gives 512 tokens; profile_run then samples
    # max_num_seqs = 256 dummy requests of 2 tokens, so the sort sampler (sampler._apply_top_k_top_p, the same code
    # as 0.7.2's) binds: 256 × 128,256 × 37.95 B = 1.160 GiB + 512 × 4,096 × 2 B + 0.05 = 1.214 GiB, where the
    # 512-token forward is 0.053. 0.6.5 (vllm PR #10511: 1.26 GiB at 8K) and 0.7.3 (vllm#13882: 1.42 GiB at 4K) print
    # this 256-request sampler. At the defaults: 23.58 × 0.9 − 14.99 − 1.21 − 0.35 = 4.67 GiB → 2,390 blocks →
    # 38,240 tokens < 45,000: the plan refuses 45K, its range reaching 2,994 blocks (47,904 tokens).
    m = load_model("meta-llama/Llama-3.1-8B")
    p = _plan(m, "rtx-3090", engine_version="0.6.4", max_model_len=45_000)
    assert (p.memory.max_num_batched_tokens, p.memory.max_num_seqs) == (512, 256)
    assert _term(p, "activation peak").bytes / GiB == pytest.approx(1.214, abs=0.001)
    assert p.memory.num_gpu_blocks == 2390 and not p.fits
    assert p.memory.ranges["num_gpu_blocks"][1] * 16 >= 45_000
    # The poster's 35K line prints peak_torch_memory 15.05 GiB: 0.06 above the weights, the 512-token forward alone;
    # profile_run's sampler over 256 requests cannot fit in that, so those runs sampled a handful of requests
    # (the thread does not show the command). With the printed terms the plan starts 45K, as the poster saw:
    # 23.58 × 0.9 − 14.99 − 0.06 − 0.35 = 5.82 GiB → 2,981 blocks → 47,696 tokens ≥ 45,000 (1.06x).
    given = _plan(m, "rtx-3090", engine_version="0.6.4", max_model_len=45_000, activation_peak_bytes=int(0.06 * GiB))
    assert given.memory.num_gpu_blocks == 2981 and given.fits
    # and so does a plan with few sequences: --max-num-seqs 8 leaves the forward binding (0.053 + 0.05 GiB)
    few = _plan(m, "rtx-3090", engine_version="0.6.4", max_model_len=45_000, max_num_seqs=8)
    assert _term(few, "activation peak").bytes / GiB == pytest.approx(0.103, abs=0.001) and few.fits


def test_45k_advice_names_the_profile_runs_lever():
    # When the dummy sampler sets the peak, fewer --max-num-seqs free KV memory (advice_seqs.py). 128 requests:
    # 128 × 128,256 × 37.95 B = 0.580 GiB + 0.004 + 0.05 = 0.634 → 4.67 + 1.214 − 0.634 = 5.25 GiB → 2,687 blocks →
    # 42,992 tokens < 45,000; 64 requests: 0.290 + 0.004 + 0.05 = 0.344 GiB → 5.54 GiB → 2,836 blocks → 45,376 tokens:
    # one 45,000-token request (1.01x), the first value tried that fits
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("rtx-3090"),
                   make_settings(engine_version="0.6.4", max_model_len=45_000), with_roofline=False)
    fix = next(o for o in p.advice.options if o.action.startswith("--max-num-seqs"))
    assert fix.action == "--max-num-seqs 64" and fix.max_requests == 1 and round(fix.max_concurrency, 2) == 1.01
    # a plan whose forward sets the peak gets no such option: at 29K (no chunking) the forward over 29,000 tokens binds
    q = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("rtx-3090"),
                   make_settings(engine_version="0.6.4", max_model_len=29_000), with_roofline=False)
    assert not q.fits and not any(o.action.startswith("--max-num-seqs") for o in q.advice.options)
