"""simulate on a session workload says when its sessions are too few to reach the steady turn rate their starts
promise, and names a KV tipping point with its figures (a user trial: one replica at 3.5 sessions/s collapsed while
two at 7 sessions/s, the same per-replica rate over half the time, did not)."""

from __future__ import annotations

from cli_run import MODEL, cli_json


def test_too_few_sessions_for_their_rate_are_named_with_the_count_that_reaches_it():
    # 8 chat sessions at seed 0 send 61 turns (7.625 per session); 90% of the turns are sent within 421.7 s of their
    # session's start (think times alone). Steady 1 × 7.625 = 7.625 turns/s needs starts lasting 2 × 421.7 s:
    # ⌈2 × 7.625 × 421.7 ÷ 7.625⌉ = 844 sessions; 8 at 1/s start within 8 s
    d = cli_json("simulate", MODEL, "--gpu", "H100", "--workload", "chat", "--sessions", "8", "--session-rate", "1")
    (note,) = [n for n in d["notes"] if n.startswith("sessions: too few to reach a steady state")]
    assert "8 sessions starting at 1/s start within 8 s, less than twice the 422 s" in note
    assert "never hold the steady 7.625/s (1 × 7.625 turns per session)" in note
    assert note.endswith("844 sessions (2 × 7.625/s × 422 s ÷ 7.625) reach one: raise --sessions to 844 before "
                         "reading its latencies as the steady load's")


def test_a_session_run_that_fills_its_kv_pool_names_the_tipping_point():
    # 300 chat sessions at 0.5/s on one L4 (1,946 usable blocks at max_model_len 16,384): the pool fills 102 s in,
    # 191 preemptions follow and TTFT jumps from 1.5 s to minutes (≥ 3× the turns sent before it)
    d = cli_json("simulate", MODEL, "--gpu", "L4", "--max-model-len", "16384", "--workload", "chat", "--sessions",
                 "300", "--session-rate", "0.5", "--gemm-efficiency", "flat")  # figures of the flat roofline
    (note,) = [n for n in d["notes"] if n.startswith("sessions: a KV tipping point")]
    first, count = d["preemptions"]["first"]["t_s"], d["summary"]["num_preemptions"]
    assert count == 191 and round(first) == 102
    assert f"before the first preemption (t = {first:,.0f} s after the first arrival)" in note
    assert f"{count:,} preemptions recomputed running turns" in note
    assert "prefix hit rate 36.0% of the prompt tokens of the turns sent before, 18.0% after" in note
    assert "so TTFT mean went from 1.5 s to 292 s" in note
    # no tipping point where nothing was preempted
    light = cli_json("simulate", MODEL, "--gpu", "H100", "--workload", "chat", "--sessions", "8", "--session-rate",
                     "1")
    assert light["summary"]["num_preemptions"] == 0
    assert not [n for n in light["notes"] if "tipping point" in n]
