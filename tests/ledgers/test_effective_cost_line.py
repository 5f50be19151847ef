"""The effective-cost line prints the throughput and goodput it divides with enough digits that the printed ratio gives
the printed price (ledgers.decision_notes.effective_cost_line)."""

from __future__ import annotations

from kvledger.ledgers.decision_notes import effective_cost_line


def test_the_printed_ratio_gives_the_printed_price():
    # `kvledger cost tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json --slo ttft=500ms,tpot=50ms
    # --api OpenAI:gpt-4.1 --gpu H100 --gpu-provider Nebius --num-gpus 4 --monthly-requests 1e6`, its sticker (--json):
    # 207.52121 ÷ 206.09957 = 1.0068978; × $134.462008 = $135.38946. Whole tokens/s printed "× 208 ÷ 206", a ratio of
    # 1.0097 that gives $135.77, not the $135.3895 printed beside it.
    sticker = {"usd_per_mtok_output": 134.462008101745, "multiplier_output": 1.0068978118861638,
               "throughput_output_tok_per_s": 207.52121071152493, "good_output_tok_per_s": 206.09957461600544}
    assert effective_cost_line(sticker) == (
        "effective cost = sticker × throughput ÷ goodput: $134.4620/M out × 207.5212 ÷ 206.0996 tok/s = "
        "$135.3895/M out (1.01× the sticker)")
    # 7 significant digits, never fewer than whole tokens/s: 24,066.49 and 1,234,567 tok/s
    big = dict(sticker, throughput_output_tok_per_s=1_234_567.4, good_output_tok_per_s=24_066.49)
    assert "× 1,234,567 ÷ 24,066.49 tok/s" in effective_cost_line(big)
