"""SGLang's default mem_fraction_static from the prefill chunk and decode CUDA-graph cap the user gives, worked by
hand from SGLang 0.5.23's ``arg_groups/memory_hook.py`` (accounting/sglang_graphs.py)."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H200 = get_gpu("h200-sxm")
LLAMA70 = load_model("meta-llama/Llama-3.3-70B-Instruct")


def _plan(**kw):
    return build_plan(LLAMA70, H200, make_settings(engine="sglang", tp=4, **kw), with_roofline=False)


def test_a_given_chunked_prefill_size_enters_the_reserve():
    # H200: nvidia-smi 143,771 MiB, TP 4. Given chunked_prefill_size 16,384, default decode max_bs 512 (60–160 GiB,
    # TP ≥ 4): reserved = 512 + 1.5 × 16,384 + 2 × 512 + 4/8 × 1,024 = 512 + 24,576 + 1,024 + 512 = 26,624 MiB
    # (above the 10 GiB floor); fraction = round((143,771 − 26,624) / 143,771, 3) = round(0.81482, 3) = 0.815
    # (the default chunk 8,192 gives 14,336 MiB and 0.9).
    p = _plan(max_num_batched_tokens=16384)
    assert (p.memory.fraction, p.memory.max_num_batched_tokens) == (0.815, 16384)
    # free before load 147,416,070,225 B (device total less 2.67 GiB held, as the default plan); reserve = that ×
    # (1 − 0.815) = 27,271,972,991.6; available = 147,416,070,225 − 27,271,972,991.6 − 35,278,831,616 (weights)
    # − 67,108,864 (RoPE) − 3,653,632 (segment tails) − 69,793,218.56 (load rest) = 84,724,709,902.8 → 84,724,709,903
    # (the plan truncates its float sum); #tokens = floor(84,724,709,903 / 81,920 B) = 1,034,237 (not 1,187,195).
    assert p.memory.requested_bytes == 147_416_070_225
    assert (p.memory.available_kv_bytes, p.memory.pool_tokens) == (84_724_709_903, 1_034_237)
    assert any(n.startswith("mem_fraction_static 0.815:") and "26,624 MiB reserved" in n for n in p.memory.notes)
    assert "chunked_prefill_size 16384 (given: --chunked-prefill-size, kvledger's --max-num-batched-tokens)" in (
        p.memory.notes)


def test_the_default_chunk_keeps_the_default_fraction():
    # no flag: reserved = 512 + 1.5 × 8,192 + 2 × 512 + 512 = 14,336 MiB → round(129,435 / 143,771, 3) = 0.9
    p = _plan()
    assert (p.memory.fraction, p.memory.max_num_batched_tokens, p.memory.pool_tokens) == (0.9, 8192, 1_187_195)
