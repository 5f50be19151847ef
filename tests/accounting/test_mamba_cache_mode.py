"""Mamba / linear-attention state pages per request under vLLM's prefix-caching ("align" and "all") Mamba cache modes.

Engine code read (vLLM 0.33.0 wheel; 0.19.0, 0.24.0 and 0.28.0 for the version switch):
``vllm/model_executor/models/config.py : MambaModelConfig.verify_and_update_config`` (prefix caching → "align";
"all" for SupportsMambaPrefixCaching models in 0.19–0.27, whose ``HybridAttentionMambaModelConfig`` aligns blocks to
the Mamba chunk),
``vllm/config/model.py : ModelConfig.is_prefix_caching_supported`` (hybrid default on from 0.28),
``vllm/v1/kv_cache_interface.py : MambaSpec.max_memory_usage_bytes`` (2 + spec + checkpoint pages in align),
``vllm/platforms/interface.py : Platform._align_hybrid_block_size`` (block a multiple of the checkpoint grid),
``vllm/v1/core/kv_cache_utils.py : get_max_concurrency_for_kv_cache_config`` (the printed figure: blocks ÷ Σ pages).
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_rules import mamba_cache_rule
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("H100-SXM")
AVAIL_30_GIB = 32_212_254_720  # 30 GiB of KV memory per GPU, given, so only the layout rule moves the figures
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def plan(model, gpu=H100, **kw):
    s = make_settings(tp=4, max_model_len=8192, available_kv_memory_bytes=AVAIL_30_GIB, **kw)
    return build_plan(load_model(model, allow_hub=False), gpu, s, with_roofline=False)


def test_qwen3_next_tp4_8k_align_mode_vllm_033():
    # Qwen3-Next at TP 4: 36 GDN layers, state page (3 × 8192 conv + 32 × 128 × 128 SSM) × 2 B / 4 = 274,432 B;
    # 12 full-attention layers, 1 KV head × 256 × 2 (K,V) × 2 B = 1,024 B per token per layer.
    # Prefix caching is on by default (hybrid) → mamba_cache_mode "align". On Hopper the GDN prefill runs on
    # FlashInfer, which declares 1 prefill-checkpoint page on a 64-token grid, so the block size is
    # lcm(16, 64) × cdiv(274,432, 64 × 1,024) = 64 × 5 = 320 tokens (not 16 × cdiv(268, 16) = 272).
    # bytes_per_block = 12 slots × 320 × 1,024 = 3,932,160 B; n = 32,212,254,720 / 3,932,160 = 8,192 blocks.
    # Groups: 1 full (12 layers) + 3 state groups of 12. R(8192) = cdiv(8192, 320) + 3 × (2 + 0 spec + 1 ckpt)
    # = 26 + 9 = 35 (kvledger said 31 + 3 × 1 = 34 before). Printed: 8,192 / 35 = 234.06x,
    # int(234.057… × 8,192) = 1,917,396 tokens.
    p = plan(QWEN3_NEXT)
    assert (p.memory.block_size, p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (320, 3_932_160, 8_192)
    assert [g.state_pages for g in p.layout.groups if g.kind == "state"] == [3, 3, 3]
    assert p.at_max_model_len.blocks_per_request == 35
    assert p.memory.printed_lines == ("GPU KV cache size: 1,917,396 tokens, Maximum concurrency for 8,192 tokens per "
                                      "request: 234.06x",)
    # a running request still holds 1 state page per group between steps: 26 attention blocks + 3 at 8,192 tokens
    assert p.blocks_for_tokens(8192) == 26 + 3


@pytest.mark.parametrize("kw", [{"enable_prefix_caching": False}, {"engine_version": "0.24.0"}])
def test_qwen3_next_no_prefix_caching_keeps_the_old_figure(kw):
    # "none" mode: block 16 × cdiv(274,432, 16 × 1,024) = 272 tokens; bytes_per_block 12 × 272 × 1,024 = 3,342,336 B;
    # n = floor(32,212,254,720 / 3,342,336) = 9,637; R(8192) = cdiv(8192, 272) + 3 × 1 = 31 + 3 = 34; 9,637 / 34 =
    # 283.44x.
    # vLLM 0.24 leaves prefix caching off for hybrid models by default, so it is "none" there too.
    p = plan(QWEN3_NEXT, **kw)
    assert (p.memory.block_size, p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (272, 3_342_336, 9_637)
    assert p.at_max_model_len.blocks_per_request == 34
    assert round(p.at_max_model_len.max_concurrency, 2) == 283.44


def test_qwen3_next_align_before_checkpoints_and_on_triton_gdn():
    # vLLM 0.28: hybrid prefix caching on by default, Qwen3-Next lacks SupportsMambaPrefixCaching → "align" with
    # 2 + spec pages and no checkpoint grid: block 272, R = 31 + 3 × 2 = 37; 9,637 / 37 = 260.46x.
    p = plan(QWEN3_NEXT, engine_version="0.28.0")
    assert (p.memory.block_size, p.at_max_model_len.blocks_per_request) == (272, 37)
    assert round(p.at_max_model_len.max_concurrency, 2) == 260.46
    # vLLM 0.33 on an A100 (sm80): GDN prefill on Triton/FLA declares no checkpoint → block 272, R = 31 + 3 × 2 = 37.
    a = plan(QWEN3_NEXT, gpu=get_gpu("A100-SXM4-80GB"))
    assert (a.memory.block_size, a.at_max_model_len.blocks_per_request) == (272, 37)


def test_jamba_and_nemotron_h_align_mode():
    # Jamba (Mamba-1, no checkpoint page) at TP 4: 4 attention + 28 Mamba layers in groups of 4 → 1 full + 7 state
    # groups; block 80, bytes_per_block 4 × 81,920 = 327,680 B; n = 32,212,254,720 / 327,680 = 98,304.
    # align: R = cdiv(8192, 80) + 7 × 2 = 103 + 14 = 117 → 840.21x; none: 103 + 7 = 110 → 893.67x.
    j, j0 = plan("ai21labs/Jamba-v0.1"), plan("ai21labs/Jamba-v0.1", enable_prefix_caching=False)
    assert (j.memory.num_gpu_blocks, j.at_max_model_len.blocks_per_request,
            j0.at_max_model_len.blocks_per_request) == (98_304, 117, 110)
    assert (round(j.at_max_model_len.max_concurrency, 2), round(j0.at_max_model_len.max_concurrency, 2)) == (840.21,
        893.67)
    # Nemotron-H-56B (Mamba-2: 1 checkpoint page, grid 1): 10 attention + 54 Mamba-2 layers in groups of 10 → 1 full +
    # 6 state groups; block 2,080, bytes_per_block 21,299,200 B; n = floor(32,212,254,720 / 21,299,200) = 1,512.
    # align: R = cdiv(8192, 2080) + 6 × 3 = 4 + 18 = 22 → 68.73x; none: 4 + 6 = 10 → 151.20x.
    # (SSM state in bf16, as given: vLLM's own default for Nemotron-H from 0.20 is float32, test_vllm_ssm_dtype.py)
    bf16 = {"mamba_ssm_cache_dtype": "bfloat16"}
    n = plan("nvidia/Nemotron-H-56B-Base-8K", **bf16)
    n0 = plan("nvidia/Nemotron-H-56B-Base-8K", enable_prefix_caching=False, **bf16)
    assert (n.memory.num_gpu_blocks, n.at_max_model_len.blocks_per_request,
            n0.at_max_model_len.blocks_per_request) == (1_512, 22, 10)
    assert (round(n.at_max_model_len.max_concurrency, 2), round(n0.at_max_model_len.max_concurrency, 2)) == (68.73,
        151.20)


def test_jamba_and_nemotron_h_all_mode_vllm_019_to_027():
    # vLLM 0.19–0.27 "all" mode (Jamba and Nemotron-H implement SupportsMambaPrefixCaching), with prefix caching on:
    # HybridAttentionMambaModelConfig sets attention and Mamba block size to
    # lcm(chunk, 16) × cdiv(cdiv(state page, attention bytes per token), lcm(chunk, 16)), and
    # MambaSpec.max_memory_usage_bytes = cdiv(max_model_len, block) pages per state group.
    # Jamba at TP 4: no chunk_size key → get_mamba_chunk_size 2048. State page (8192 × 3 conv + 8192 × 16 SSM) × 2 B / 4
    # = 77,824 B; attention 2 × 2 KV heads × 128 × 2 B = 1,024 B per token → cdiv(77,824, 1,024) = 76 tokens →
    # block 2,048 × cdiv(76, 2,048) = 2,048 (not 80). Page 2,048 × 1,024 = 2 MiB; groups of 4 (1 full + 7 state):
    # bytes_per_block 8 MiB; n = 30 GiB / 8 MiB = 3,840. R(8192) = 4 + 7 × cdiv(8192, 2048) = 32 → 120.00x; vLLM 0.19
    # prints (3,840 // 8 groups) × 2,048 = 983,040 tokens. (0.28 "align": block 80, R = 103 + 7 × 2 = 117, 840.21x.)
    j = plan("ai21labs/Jamba-v0.1", engine_version="0.19.0", enable_prefix_caching=True)
    assert (j.memory.block_size, j.memory.bytes_per_block, j.memory.num_gpu_blocks) == (2048, 8_388_608, 3_840)
    assert j.at_max_model_len.blocks_per_request == 32
    assert j.memory.printed_lines == ("GPU KV cache size: 983,040 tokens", "Maximum concurrency for 8,192 tokens per "
                                                                           "request: 120.00x")
    assert j.blocks_for_tokens(8192) == 4 + 7  # between steps a state group keeps only the last computed token's page
    # Nemotron-H-56B at TP 4: chunk_size 128. State page (20,480 × 3 conv + 256 × 64 × 256 SSM) × 2 B / 4 = 2,127,872 B;
    # attention 1,024 B per token → 2,078 tokens → block 128 × cdiv(2,078, 128) = 2,176 (align: 2,080). Groups of 10
    # (1 full + 6 state): bytes_per_block 10 × 2,176 × 1,024 = 22,282,240 B; n = floor(30 GiB / that) = 1,445;
    # R = cdiv(8192, 2176) + 6 × 4 = 28 → 1,445 / 28 = 51.61x.
    # (SSM state in bf16, as given: vLLM 0.20+ defaults Nemotron-H to float32, test_vllm_ssm_dtype.py)
    n = plan("nvidia/Nemotron-H-56B-Base-8K", engine_version="0.27.0", enable_prefix_caching=True,
             mamba_ssm_cache_dtype="bfloat16")
    assert (n.memory.block_size, n.memory.bytes_per_block, n.memory.num_gpu_blocks) == (2176, 22_282_240, 1_445)
    assert (n.at_max_model_len.blocks_per_request, round(n.at_max_model_len.max_concurrency, 2)) == (28, 51.61)
    assert any("mamba_cache_mode all" in x for x in n.memory.notes)
    # vLLM 0.19 leaves hybrid prefix caching off by default: "none", block 80, R = 103 + 7 = 110 (893.67x)
    assert plan("ai21labs/Jamba-v0.1", engine_version="0.19.0").at_max_model_len.blocks_per_request == 110


def test_mamba_cache_rule_by_version():
    # pure Mamba (attention-free): prefix caching off by default in every version → "none", 1 page
    assert mamba_cache_rule((0, 33, 0), None, False, {"mamba2"}, "sm90").state_pages_per_request == 1
    # forced on for a pure Mamba-2 model in 0.33: align, 2 + 1 checkpoint
    r = mamba_cache_rule((0, 33, 0), True, False, {"mamba2"}, "sm90")
    assert (r.mode, r.state_pages_per_request, r.checkpoint_alignment_tokens) == ("align", 3, 1)
    # Mamba-family models (SupportsMambaPrefixCaching) with prefix caching: "all" in 0.19–0.27, "align" from 0.28
    # (MambaModelConfig.verify_and_update_config: 0.27 picks "all" if supports_mamba_prefix_caching, 0.28 "align").
    jamba = {"architectures": ("JambaForCausalLM",), "mamba_chunk_tokens": 2048}
    # (hybrid prefix caching is on by default from 0.26: ModelConfig.is_prefix_caching_supported returns False for
    # "hybrid" in 0.25 and True in 0.26)
    r = mamba_cache_rule((0, 27, 0), None, True, {"mamba"}, "sm90", **jamba)
    assert (r.mode, r.page_per_block, r.checkpoint_alignment_tokens, r.enable_prefix_caching) == ("all", True, 2048,
        True)
    assert mamba_cache_rule((0, 25, 0), None, True, {"mamba"}, "sm90", **jamba).mode == "none"
    assert mamba_cache_rule((0, 19, 0), True, True, {"mamba"}, "sm90", **jamba).mode == "all"
    assert mamba_cache_rule((0, 28, 0), None, True, {"mamba"}, "sm90", **jamba).mode == "align"
    # a pure Mamba-2 model asked for prefix caching in 0.19: "all", a page per block, no chunk alignment (no attention
    # layers to align: MambaModelConfig sets mamba_block_size = block_size)
    r = mamba_cache_rule((0, 19, 0), True, False, {"mamba2"}, "sm90", architectures=("Mamba2ForCausalLM",))
    assert (r.mode, r.page_per_block, r.checkpoint_alignment_tokens) == ("all", True, None)
    # a Mamba-2 hybrid vLLM gives no SupportsMambaPrefixCaching (e.g. Plamo2) stays "align" in 0.19
    assert mamba_cache_rule((0, 19, 0), True, True, {"mamba2"}, "sm90", architectures=("Plamo2ForCausalLM",
                                                                                       )).mode == "align"
    # before 0.19 nothing changes
    assert mamba_cache_rule((0, 15, 0), True, True, {"gated_deltanet"}, "sm90").state_pages_per_request == 1


def test_cli_no_enable_prefix_caching(capsys):
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    args = ["plan", QWEN3_NEXT, "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "8192", "--available-kv-memory",
            f"{AVAIL_30_GIB}B"]  # bytes need their unit: a bare number on a size flag is GiB
    on = CliRunner().invoke(app, args)
    off = CliRunner().invoke(app, args + ["--no-enable-prefix-caching"])
    assert "234.06x" in on.output and "283.44x" in off.output


def test_simulate_sizes_its_pool_with_the_prefix_caching_flag():
    # the simulator's KV pool is the plan under the same flag: Qwen3-Next-80B at TP 4, 8K, vLLM 0.33 — caching on by
    # default (align mode, 320-token blocks: 8,192 blocks), off with --no-enable-prefix-caching (272-token blocks:
    # 9,637 blocks), the figures of kvledger plan for the same settings
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    def engine(*flags):
        out = CliRunner().invoke(app, ["simulate", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H100", "--tp", "4",
                                       "--num-requests", "5", "--max-model-len", "8K", *flags, "--json"]).stdout
        return json.loads(out)["engine"]

    def plan(*flags):
        out = CliRunner().invoke(app, ["plan", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H100", "--tp", "4",
                                       "--max-model-len", "8K", *flags, "--json"]).stdout
        return json.loads(out)["memory"]

    on, off = engine(), engine("--no-enable-prefix-caching")
    assert (on["block_size"], off["block_size"]) == (320, 272)
    assert (
        on["num_gpu_blocks"] == plan()["num_gpu_blocks"]
        and off["num_gpu_blocks"] == plan("--no-enable-prefix-caching")["num_gpu_blocks"]
    )


def test_the_sliding_window_note_only_for_models_with_windowed_groups():
    # fresh-user trial: Nemotron-H (Mamba, MLP and full-attention blocks; no window) was told that "sliding-window
    # groups hold a prefill chunk's blocks"; Gemma-2 (half its layers windowed at 4,096 tokens) keeps the note
    from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare

    def notes(model, **kw):
        return prepare(SimRequestArgs(model=model, gpu="H100", num_requests=5, **kw)).notes

    said = "sliding-window groups hold a prefill chunk's blocks"
    assert any(n.startswith(said) for n in notes("google/gemma-2-9b-it"))
    assert not any(n.startswith(said) for n in notes("nvidia/Nemotron-H-56B-Base-8K", tp=2, max_model_len=4096))
