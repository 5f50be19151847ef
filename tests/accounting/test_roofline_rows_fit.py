"""The plan's "decode step vs concurrency" rows stop at the KV pool's concurrency, and a context of which not one
request fits gets a single row marked as not fitting (a fresh-user trial: Qwen3-32B on an H100 listed 40,960-token
decode steps at batches 1 … 1,024 beside a concurrency table saying not one such request fits); bfloat16 where vLLM
refuses it."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_a_context_that_does_not_fit_gets_one_row_marked_as_such():
    p = build_plan(load_model("Qwen/Qwen3-32B"), get_gpu("h100"), make_settings())
    fits = {r.context_tokens: r.max_requests for r in p.concurrency}
    # Qwen3-32B: 64 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 262,144 B a token; its default max_model_len 40,960
    # needs 10.00 GiB for one request, more than the 8.61 GiB the pool holds beside 61 GiB of bf16 weights
    assert fits[40960] == 0 and fits[8192] > 0
    rows = [r for r in p.roofline.decode if r.context_tokens == 40960]
    assert [(r.batch, r.fits) for r in rows] == [(1, False)]
    ok = [r for r in p.roofline.decode if r.context_tokens == 8192]
    # every row within the pool's concurrency at 8,192 tokens, the last one at it
    assert all(r.fits for r in ok) and max(r.batch for r in ok) == int(next(
        c.max_running for c in p.concurrency if c.context_tokens == 8192))


def test_bfloat16_on_a_gpu_below_compute_capability_8_is_refused_for_vllm():
    # vLLM's CUDA platform refuses bfloat16 below compute capability 8.0 (the T4 is sm75); auto serves float16 there
    import pytest

    from kvledger.errors import InputError

    model, t4 = load_model("meta-llama/Llama-3.2-3B"), get_gpu("t4")
    with pytest.raises(InputError, match=r"--dtype bfloat16: NVIDIA Tesla T4 \(sm75\) is below compute capability"):
        build_plan(model, t4, make_settings(dtype="bfloat16", max_model_len=4096))
    assert build_plan(model, t4, make_settings(max_model_len=4096)).memory.fits
