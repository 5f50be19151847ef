"""vLLM's online ``--quantization fp8`` in the roofline: the steps read the FP8 weights the memory plan loads."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

MODEL = "meta-llama/Llama-3.1-8B"


def test_online_fp8_weights_are_what_a_step_reads():
    # Llama-3.1-8B: 8,030,261,248 params = embedding 128,256 × 4,096 = 525,336,576, an untied LM head of the same size,
    # 65 RMSNorms × 4,096 = 266,240 and 6,979,321,856 linear weights. A step reads everything but the embedding:
    # bf16: 7,504,924,672 × 2 B = 15,009,849,344 B; online FP8 (linear layers 1 B, LM head and norms bf16):
    # 6,979,321,856 + 2 × (525,336,576 + 266,240) = 8,030,527,488 B (+ a few fp32 scales).
    # FLOPs per token 2 × (6,979,588,096 matmul params + 525,336,576 head) = 15,009,849,344, so the matmuls turn
    # compute-bound where tokens × 15,009,849,344 / peak ≥ bytes / 3.35 TB/s: bf16 at 989.5 TFLOP/s, tokens ≥ 295.4 →
    # 296;
    # FP8 at 1,979 TFLOP/s (vLLM's W8A8 on Hopper), tokens ≥ 590.75 × 8,030,527,488 / 15,009,849,344 = 316.06 → 317.
    h100, m = get_gpu("H100"), load_model(MODEL)
    bf16 = build_plan(m, h100, make_settings()).roofline
    fp8 = build_plan(m, h100, make_settings(quantization="fp8")).roofline
    assert (bf16.compute_dtype, bf16.weight_matmul_crossover_tokens) == ("bf16", 296)
    assert (fp8.compute_dtype, fp8.weight_matmul_crossover_tokens) == ("fp8", 317)
    # the 8,192-token prefill chunk reads those weights plus 8,192 × 131,072 B = 1,073,741,824 B of new KV
    assert bf16.prefill["bytes"] == pytest.approx(15_009_849_344 + 1_073_741_824, rel=1e-6)
    assert fp8.prefill["bytes"] == pytest.approx(8_030_527_488 + 1_073_741_824, rel=1e-6)
    # the simulator's step cost is the same model: a batch-1 decode at 2,048 tokens reads about half the bytes
    plan = build_plan(m, h100, make_settings(quantization="fp8"))
    assert plan.step_cost().dense_weight_bytes == pytest.approx(8_030_527_488, rel=1e-6)


def test_quantization_is_refused_where_it_is_not_modelled():
    for engine in ("sglang", "trtllm"):
        with pytest.raises(InputError, match=f"--quantization fp8 is modelled for vLLM only.*--engine {engine}"):
            build_plan(load_model(MODEL), get_gpu("H100"), make_settings(engine=engine, quantization="fp8"))
