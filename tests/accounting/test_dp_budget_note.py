"""A vLLM DP + EP plan that fits, with fewer max_model_len requests than max_num_seqs while its MoE profile rows are
DP × the token budget, says in one note what the smaller budget max(budget ÷ DP, max_num_seqs) frees and the
concurrency it gains (advice_mnbt.dp_budget_note); the verdict stays "fits".

Qwen3-235B-A22B (bf16, hidden 4,096, top-8) on an H100 SXM5, vLLM 0.33.0, DP 8 × TP 1 with --enable-expert-parallel,
--max-model-len 4,096 (the hand-worked terms of test_advice_mnbt.py): near these budgets the sampler sets the
activation peak and the KV left is 2,084,858,266 − 1,056,768 × T B (T: max_num_batched_tokens; 1,056,768 B a token =
8,192 B hidden + DP 8 × top-8 × (4,096 + 4,096) × 2 B kept fused-MoE workspace).
"""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model

QWEN = "Qwen/Qwen3-235B-A22B"


def _plan(tokens: int, **kw):
    return build_plan(load_model(QWEN), resolve_gpu("H100-SXM"),
                      make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True, max_model_len=4096,
                                    max_num_batched_tokens=tokens, **kw), with_roofline=False)


def _note(p) -> list[str]:
    return [n for n in p.memory.notes if n.startswith("DP + EP token budget:")]


def test_the_smaller_budget_s_blocks_and_concurrency_hand_worked():
    # T = 1,100: 2,084,858,266 − 1,162,444,800 = 922,413,466 B → floor(/ 3,080,192 B a block) = 299 blocks,
    # 299 × 16 / 4,096 = 1.17× (one whole 4,096-token request: 256 blocks + the null block).
    # The smaller budget: max(1,100 // 8, max_num_seqs 1,024) = 1,024 → 2,084,858,266 − 1,082,130,432 =
    # 1,002,727,834 B → 325 blocks, 325 × 16 / 4,096 = 1.27×; rows DP 8 × 1,100 = 8,800 → DP 8 × 1,024 = 8,192
    p = _plan(1100)
    assert p.memory.available_kv_bytes == 922_413_466 and p.memory.num_gpu_blocks == 299
    assert p.advice.verdict == "fits"  # the note does not change it
    (note,) = _note(p)
    assert "gather DP 8 × 1,100 = 8,800 rows at --max-num-batched-tokens 1,100" in note
    assert "max(1,100 ÷ 8, max_num_seqs 1,024) = 1,024 they gather DP 8 × 1,024 = 8,192 rows" in note
    assert "299 → 325 KV blocks and 1.17× → 1.27× concurrent 4,096-token requests per rank (1 → 1 whole" in note
    assert note.endswith("The plan keeps --max-num-batched-tokens 1,100")
    assert _plan(1024).memory.num_gpu_blocks == 325  # the re-plan the note quotes


def test_no_note_at_the_floor_nor_for_chunked_rows():
    assert _note(_plan(1024)) == []  # max(1,024 // 8, 1,024) = 1,024: no smaller budget within vLLM's rule
    # deepep_low_latency (0.19.0) runs DP-chunked: 8 × min(T, 256) rows whatever T, so not DP × the budget
    p = build_plan(load_model("Qwen/Qwen3-30B-A3B"), resolve_gpu("H100-SXM"),
                   make_settings(data_parallel_size=2, enable_expert_parallel=True, engine_version="0.19.0",
                                 all2all_backend="deepep_low_latency"), with_roofline=False)
    assert p.data_parallel.moe_profile_tokens == 512 and _note(p) == []

