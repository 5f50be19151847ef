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
    # TP ≥ 4); the breakable prefill graphs (on by default on CUDA) capture 4–32 by 4 (8) + 48–256 by 16 (14)
    # + 288–512 by 32 (8) + 576–1,024 by 64 (8) + 1,280–4,096 by 256 (12) + 4,608–16,384 by 512 (24) = 74 sizes,
    # 8 MiB each = 592 MiB (reserve_for_graph_mb): reserved = 512 + 1.5 × 16,384 + 2 × 512 + 592 + 4/8 × 1,024
    # = 512 + 24,576 + 1,024 + 592 + 512 = 27,216 MiB (above the 10 GiB floor); fraction = round((143,771 − 27,216)
    # / 143,771, 3) = round(0.81070, 3) = 0.811 (without the prefill graphs 26,624 MiB and 0.815).
    p = _plan(max_num_batched_tokens=16384)
    assert (p.memory.fraction, p.memory.max_num_batched_tokens) == (0.811, 16384)
    # free before load 147,416,070,225 B (device total less 2.67 GiB held, as the default plan); reserve = that ×
    # (1 − 0.811) = 27,861,637,272.5; available = 147,416,070,225 − 27,861,637,272.5 − 35,278,831,616 (weights)
    # − 67,108,864 (RoPE) − 3,653,632 (segment tails) − 69,793,218.56 (load rest) = 84,135,045,621.9 → 84,135,045,622
    # (the plan truncates its float sum); #tokens = floor(84,135,045,622 / 81,920 B) = 1,027,039.
    assert p.memory.requested_bytes == 147_416_070_225
    assert (p.memory.available_kv_bytes, p.memory.pool_tokens) == (84_135_045_622, 1_027_039)
    assert any(n.startswith("mem_fraction_static 0.811:") and "27,216 MiB reserved" in n for n in p.memory.notes)
    assert any(n.startswith("prefill CUDA graphs on by default in SGLang 0.5.23 (breakable")
               and "74 sizes captured" in n and "reserves 592 MiB" in n for n in p.memory.notes)
    assert "chunked_prefill_size 16384 (given: --chunked-prefill-size, kvledger's --max-num-batched-tokens)" in (
        p.memory.notes)


def test_the_default_chunk_keeps_the_default_fraction():
    # no flag: 58 prefill sizes up to 8,192 (74 less the 16 of 8,704–16,384) × 8 = 464 MiB; reserved = 512
    # + 1.5 × 8,192 + 2 × 512 + 464 + 512 = 14,800 MiB → round(128,971 / 143,771, 3) = round(0.89706, 3) = 0.897;
    # available = 147,416,070,225 × 0.897 − 35,419,387,330.56 (weights, RoPE, tails, load rest) = 96,812,827,661.3
    # → #tokens floor(96,812,827,661 / 81,920) = 1,181,797
    p = _plan()
    assert (p.memory.fraction, p.memory.max_num_batched_tokens, p.memory.pool_tokens) == (0.897, 8192, 1_181_797)


def test_a_given_decode_graph_cap_and_graphs_off_change_the_reserve():
    # --cuda-graph-max-bs 1,024: reserved = 512 + 1.5 × 8,192 + 2 × 1,024 + 464 (prefill graphs) + 512 = 15,824 MiB
    # → round(127,947 / 143,771, 3) = round(0.88994, 3) = 0.89
    p = _plan(cuda_graph_max_batch_size=1024)
    assert (p.memory.fraction, p.memory.cuda_graph_max_bs) == (0.89, 1024)
    assert any(n.startswith("cuda_graph_max_bs 1024 (given, --cuda-graph-max-bs)") for n in p.memory.notes)
    # --disable-cuda-graph: both graph terms leave (cuda_graph_hook.py parse_cuda_graph_config sets both phases to
    # disabled; reserve_for_graph_mb adds each only while on): 512 + 12,288 + 0 + 0 + 512 = 13,312 MiB →
    # round(130,459 / 143,771, 3) = round(0.90741, 3) = 0.907
    off = _plan(no_cuda_graph=True)
    assert (off.memory.fraction, off.memory.cuda_graph_max_bs) == (0.907, None)
    assert any(n.startswith("decode CUDA graphs off (--disable-cuda-graph)") for n in off.memory.notes)
    assert "prefill CUDA graphs off (--disable-cuda-graph turns both phases off in SGLang 0.5.23, arg_groups/" \
           "cuda_graph_hook.py)" in off.memory.notes
    # --disable-prefill-cuda-graph alone: the 464 MiB leave, the decode term stays: 14,336 MiB → round(129,435 /
    # 143,771, 3) = round(0.90029, 3) = 0.9
    pre_off = _plan(disable_prefill_cuda_graph=True)
    assert (pre_off.memory.fraction, pre_off.memory.cuda_graph_max_bs) == (0.9, 512)


def test_max_running_requests_cuts_the_default_graph_cap():
    # 0.5.23 memory_hook.py: a default max_bs (512) above a given --max-running-requests 128 becomes 128:
    # 512 + 12,288 + 2 × 128 + 464 (prefill graphs) + 512 = 14,032 MiB → round(129,739 / 143,771, 3)
    # = round(0.90240, 3) = 0.902
    p = _plan(max_num_seqs=128)
    assert (p.memory.fraction, p.memory.cuda_graph_max_bs, p.memory.max_num_seqs) == (0.902, 128, 128)


def test_the_default_graph_cap_its_captures_and_the_scheduler_line():
    p = _plan()
    # H200 (140.4 GiB, 60–160 GiB tier) at TP 4: max_bs 512; captured: 1, 2, 4, 8, 12 (5) + 16–256 by 8 (31)
    # + 272–496 by 16 (15) + 512 (1) = 52 sizes
    note = next(n for n in p.memory.notes if n.startswith("cuda_graph_max_bs 512 (SGLang 0.5.23 default"))
    assert "captures 52 decode batch sizes: 1, 2, 4, 8, 12, 16, …, 480, 496, 512" in note
    # SGLang's scheduler.py start-up line: #tokens 1,181,797; max_running_requests = min(clamp(1,181,797 / 131,072
    # × 512 = 4,616, 2,048, 4,096), 1,181,797 // 2) = 4,096; max_prefill_tokens its 16,384 default
    assert p.memory.printed_lines[-1] == ("max_total_num_tokens=1181797, chunked_prefill_size=8192, "
                                          "max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, "
                                          "available_gpu_mem=… GB")
    assert p.memory.cuda_graph_max_bs == 512


def test_sglang_words_in_the_header_and_its_own_fp8_kernel():
    import io

    from rich.console import Console

    from kvledger.report.plan_view import render_plan

    buf = io.StringIO()
    render_plan(_plan(), Console(file=buf, width=400))
    head = buf.getvalue().splitlines()[0]
    # SGLang's names for the two limits (its scheduler.py start-up line), the JSON keeps vLLM's
    assert head.endswith("max_model_len 131,072, chunked_prefill_size 8,192, max_running_requests 4,096, "
                         "cuda_graph_max_bs 512")
    # DeepSeek-V3 (FP8 blocks 128×128) on H200 (sm90): SGLang's own kernel choice, not vLLM's file
    dsv3 = build_plan(load_model("deepseek-ai/DeepSeek-V3"), H200, make_settings(engine="sglang", tp=8))
    fp8 = next(n for n in dsv3.roofline.notes if n.startswith("FP8 block-quantized linears"))
    assert "SGLang runs DeepGEMM" in fp8 and "SGLang 0.5.23 layers/quantization/fp8_utils.py" in fp8
    assert "vLLM" not in fp8
    # on Ada (L40S, sm89) SGLang runs Triton's FP8 × FP8 block GEMM where vLLM runs Marlin's BF16 MMAs: said
    qwen = build_plan(load_model("Qwen/Qwen3-30B-A3B-FP8"), get_gpu("l40s"), make_settings(engine="sglang", tp=2))
    fp8 = next(n for n in qwen.roofline.notes if n.startswith("FP8 block-quantized linears"))
    assert "SGLang runs Triton w8a8 block FP8" in fp8 and "the roofline prices vLLM 0.33's choice instead" in fp8
