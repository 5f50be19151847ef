"""Sliding-window models: plan keeps vLLM's start-up check (the × its log prints) and adds what runs at once while
decoding, when SlidingWindowManager has freed the blocks before each request's window (vLLM 0.33.0,
vllm/v1/core/single_type_kv_cache_manager.py: get_num_skipped_tokens = computed − window + 1, and
remove_skipped_blocks frees the whole blocks below it; a request allocates for computed + 1 tokens, so a sliding group
holds at most cdiv(window − 1, 16) + 1 blocks)."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("H100-SXM")
# The user's Gemma-3-27B config (/work/trial59c/myconfigs/gemma3-27b/config.json) is key for key the fixture's.
GEMMA3 = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "google--gemma-3-27b-it.json")


def _row(model: str, **kw):
    p = build_plan(load_model(model), H100, make_settings(max_model_len=8192, **kw), with_roofline=False)
    return p, p.row_at(8192)


def test_gpt_oss_20b_start_up_check_and_decoding():
    # gpt-oss-20b: 12 full + 12 sliding (window 128) layers → 2 groups of 12; 153,309 blocks of 16 tokens (the plan).
    # Start-up check (SlidingWindowSpec.max_memory_usage_bytes): full cdiv(8,192, 16) = 512; sliding
    #   cdiv(min(127 + 16,384 in flight, 8,192), 16) + 1 = 513 → 1,025 blocks; 153,309 / 1,025 = 149.57x.
    # While decoding: full 512 + sliding cdiv(127, 16) + 1 = 9 → 521 blocks; 153,309 / 521 = 294.26x;
    #   usable 153,308 // 521 = 294 requests.
    p, r = _row("openai/gpt-oss-20b")
    assert p.memory.num_gpu_blocks == 153_309
    assert (r.blocks_per_request, r.max_requests) == (1025, 149)
    assert round(r.max_concurrency, 2) == 149.57
    assert (r.decode_blocks_per_request, r.decode_requests) == (521, 294)
    assert round(r.decode_concurrency, 2) == 294.26
    assert "≈294 at once while decoding (sliding layers hold ≤ 128 tokens + a block)" in p.advice.message
    assert "at vLLM's start-up check (the engine's printed 149.57x" in p.advice.message


def test_gemma3_27b_decoding_and_the_hybrid_manager_comparison():
    # Gemma-3-27B: 52 sliding (window 1,024) + 10 full layers → groups of 10: 1 full + 6 sliding (8 padding slots);
    # 13,866 blocks of 16 tokens at 8,192 (the plan). Start-up: 512 + 6 × (cdiv(min(1,023 + 16,384, 8,192), 16) + 1 =
    # 513) = 3,590 blocks → 13,866 / 3,590 = 3.86x, 3 requests. While decoding: 512 + 6 × (cdiv(1,023, 16) + 1 = 65)
    # = 902 blocks → 13,866 / 902 = 15.37x; 13,865 // 902 = 15 requests.
    p, r = _row(GEMMA3)
    assert (r.blocks_per_request, r.max_requests, round(r.max_concurrency, 2)) == (3590, 3, 3.86)
    assert (r.decode_blocks_per_request, r.decode_requests, round(r.decode_concurrency, 2)) == (902, 15, 15.37)
    # --disable-hybrid-kv-cache-manager: one group of 62 layers, 2,236 blocks, 512 per request → 4.37x at start-up and
    # while decoding (no layer frees): 4 requests, fewer than the hybrid manager's ≈15.
    q, u = _row(GEMMA3, disable_hybrid_kv_cache_manager=True)
    assert (q.memory.num_gpu_blocks, u.blocks_per_request, u.max_requests, u.decode_requests) == (2236, 512, 4, None)
    assert ("--disable-hybrid-kv-cache-manager would print 4.37x at start-up, but with its sliding layers allocated "
            "as full it holds 4 at once while decoding too, against ≈15 here: keep the hybrid manager"
            ) in p.advice.message
    assert "without it ≈15 would run at once while decoding (3.86x at vLLM's start-up check)" in q.advice.message
    assert "only 3 at once" not in p.advice.message  # 15 run while decoding: not a low concurrency


def test_full_attention_rows_carry_no_decode_figure():
    p, r = _row("meta-llama/Llama-3.1-8B")
    assert r.decode_blocks_per_request is None and "decode_requests" not in p.to_dict()["concurrency"][0]


def test_plan_summary_labels_the_start_up_check():
    out = run_cli("plan", "openai/gpt-oss-20b", "--gpu", "H100-SXM", "--max-model-len", "8192").output
    # the short plan: the rows' ≈ figures in one list after them (1,119 at 2,048, 294 at 8,192); each on its row in the
    # full ledger
    assert ("8,192 tokens: 149 requests (149.57x, range 144.08–151.12x) — the requests and × are vLLM's start-up "
            "check; ≈1,119/294 at once while decoding") in " ".join(out.split())
    full = run_cli("plan", "openai/gpt-oss-20b", "--gpu", "H100-SXM", "--max-model-len", "8192", "--verbose").output
    assert "8,192 tokens: 149 requests (149.57x, range 144.08–151.12x), ≈294 while decoding" in full
    assert "the requests and × are vLLM's start-up check" in full


def test_all_sliding_model_ignores_disable_hybrid():
    # Mistral-7B-v0.1: all 32 layers sliding (window 4,096): the spec is uniform, so vLLM's
    # _promote_local_kv_cache_specs returns it unchanged and the flag allocates nothing as full.
    # 29,401 blocks of 16 at 32,768 either way. Start-up: cdiv(min(4,095 + 16,384, 32,768), 16) + 1 = 1,281 blocks
    # → 29,401 / 1,281 = 22.95x, 22 requests; decoding: cdiv(4,095, 16) + 1 = 257 → 29,400 // 257 = 114.
    # (Laid out as full, as before, it would be 2,048 blocks → 14 requests.)
    mk = lambda **kw: build_plan(load_model("mistralai/Mistral-7B-v0.1"), H100, make_settings(**kw),  # noqa: E731
                                 with_roofline=False)
    for p in (mk(), mk(disable_hybrid_kv_cache_manager=True)):
        r = p.row_at(32768)
        assert (p.memory.num_gpu_blocks, r.blocks_per_request, r.max_requests) == (29401, 1281, 22)
        assert (r.decode_blocks_per_request, r.decode_requests) == (257, 114)
    assert any("has no effect here" in n for n in p.layout.notes)


def test_low_concurrency_fixes_judged_by_the_decoding_figure():
    # Gemma-3-27B at 32,768: 13,866 blocks; decoding 2,048 + 6 × 65 = 2,438 blocks → 13,865 // 2,438 = 5 ("only 5").
    # --kv-cache-dtype fp8: 27,733 blocks → 27,732 // 2,438 = 11 while decoding (start-up 27,733 / 8,582 = 3.23x,
    # 3 requests): the fix is shown and judged by its 11, not by the start-up 3 (which is below 5).
    out = run_cli("plan", GEMMA3, "--gpu", "H100-SXM", "--max-model-len", "32768").output
    assert ("only 5 at once at max_model_len (under 8, kvledger lists fixes)"
            in " ".join(out.split()))
    assert ("--kv-cache-dtype fp8: ≈11 at once while decoding (3 concurrent 32,768-token requests at vLLM's start-up "
            "check, 3.23x)") in out


def test_no_keep_the_hybrid_manager_when_the_flag_costs_nothing_while_decoding():
    # Gemma-2-9B at 2,048: 21 sliding (window 4,096) + 21 full layers, 19,899 blocks. Start-up: 128 +
    # (cdiv(min(4,095 + in flight, 2,048), 16) + 1 = 129) = 257 → 77.43x; decoding: 128 + min(128, 257) = 256 →
    # 19,898 // 256 = 77. The flag: one group of 42 layers, 9,949 blocks, 128 per request → 77.73x, 77 at once:
    # as many as the hybrid manager runs, so no "keep the hybrid manager".
    p = build_plan(load_model("google/gemma-2-9b-it"), H100, make_settings(max_model_len=2048), with_roofline=False)
    assert "keep the hybrid manager" not in p.advice.message
    assert ("would print 77.73x at start-up, and with its sliding layers allocated as full it holds 77 at once while "
            "decoding too, as many as the ≈77 here") in p.advice.message


def test_chunked_local_layers_hold_their_chunk_and_name_their_manager():
    # Llama-4-Scout, TP 4 on H200 at 32,768: 36 chunked-local (chunk 8,192) + 12 full layers → groups of 12:
    # 3 chunked + 1 full, 379,525 blocks of 16. ChunkedLocalAttentionManager skips ⌊n / 8,192⌋ · 8,192 tokens, so a
    # chunked group holds ≤ 8,192 tokens = 8,192 / 16 = 512 blocks (not 513). Decoding: 2,048 + 3 × 512 = 3,584 →
    # 379,524 // 3,584 = 105.
    p = build_plan(load_model("meta-llama/Llama-4-Scout-17B-16E-Instruct"), get_gpu("H200"),
                   make_settings(max_model_len=32768, tp=4), with_roofline=False)
    r = p.row_at(32768)
    assert (p.memory.num_gpu_blocks, r.decode_blocks_per_request, r.decode_requests) == (379525, 3584, 105)
    assert next(g for g in p.layout.groups if g.kind == "chunked_local").blocks_for_tokens(32768) == 512
    assert "chunked-local layers hold ≤ their 8,192-token chunk" in p.advice.message
    out = run_cli("plan", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "--gpu", "H200", "--tp", "4",
                  "--max-model-len", "32768", "--verbose").output  # the manager is named in the full ledger
    assert "ChunkedLocalAttentionManager" in out and "SlidingWindowManager" not in out


def test_decode_clause_says_where_max_num_seqs_caps():
    # gpt-oss-20b on H100 at its default max_model_len: at 2,048 tokens about 1,119 fit while decoding, above
    # max_num_seqs = 1,024, so the cap is said with its context; the short plan's list of ≈ figures says the ≈1,119
    # (its row under --verbose), the full ledger says it again with the cap
    out = " ".join(run_cli("plan", "openai/gpt-oss-20b", "--gpu", "H100-SXM").output.split())
    assert "max_num_seqs = 1,024 still caps what runs while decoding at 2,048 tokens" in out
    assert "≈1,119/294/74/18 at once while decoding" in out and "would fit" not in out
    full = " ".join(run_cli("plan", "openai/gpt-oss-20b", "--gpu", "H100-SXM", "--verbose").output.split())
    assert "≈1,119 while decoding;" in full
    assert "max_num_seqs = 1,024 still caps what runs while decoding at 2,048 tokens (≈1,119 would fit)" in full


def test_gpt_oss_120b_short_plan_keeps_to_26_lines():
    # gpt-oss-120b at TP 4 on an H100: the sliding-window concurrency line ran to 11 of 30 lines at 80 columns (the
    # managers' words, and max_num_seqs's cap said twice); the short plan names the start-up check and the decode
    # figure, the cap once ("still caps … at 2,048 tokens", ≈2,705 would fit: 1,024 < 2,705), the rest under --verbose
    res = run_cli("plan", "openai/gpt-oss-120b", "--gpu", "H100-SXM", "--tp", "4", columns=80)
    lines = res.output.splitlines()
    assert len(lines) <= 26 and max(len(line) for line in lines) <= 80, res.output
    flat = " ".join(res.output.split())
    assert "the requests and × are vLLM's start-up check" in flat
    assert "max_num_seqs = 1,024 still caps what runs while decoding at 2,048 tokens" in flat
    assert "≈2,705/711/180/45 at once while decoding" in flat  # in one list; on its row, and "(≈2,705 would fit)"
    # with the cap, under --verbose
    full = " ".join(run_cli("plan", "openai/gpt-oss-120b", "--gpu", "H100-SXM", "--tp", "4",
                            "--verbose").output.split())
    assert "max_num_seqs = 1,024 still caps what runs while decoding at 2,048 tokens (≈2,705 would fit)" in full
    assert "SlidingWindowManager" in full and "the engine runs at most max_num_seqs = 1,024 at once" in full
    assert "≈2,705 while decoding;" in full
