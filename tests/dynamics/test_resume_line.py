"""simulate's resume line without a host KV tier (``preemptions.resume``), worked by hand on the scenario of
test_resume_reload.py (two requests A and B at t = 0, 8 prompt + 16 output tokens each, 4-token blocks, 8 usable):

* Step 1 computes both prompts: 16 prefill tokens. Steps 2–16 decode A (and B until step 10).
* Step 10: A needs a 5th block; B (newest) is preempted with num_tokens 17 (8 prompt + 9 generated).
* Step 17: B resumes and looks up its 17 tokens. Prefix caching on: its prompt blocks B0, B1 (8 tokens) are still
  in HBM, so 17 − 8 = 9 are recomputed, one prefill chunk of 9 tokens (num_computed_tokens 8 → 17). All prefill
  tokens the engine computed: 16 + 9 = 25; the recompute's share 9 / 25 = 36 %.
  Prefix caching off: nothing is found, 17 recomputed in a chunk of 17; prefill 16 + 17 = 33, share 17 / 33.
"""

from __future__ import annotations

import pytest
from test_resume_reload import COST, _cfg, _reqs

from kvledger.analyses.serving.preemption_resume import resume_facts
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.fast import fast_path, open_stretch
from kvledger.dynamics.simulator import simulate
from kvledger.report.preemption_view import preemption_lines


def test_the_resume_finds_the_prompt_in_hbm_and_recomputes_the_rest():
    cfg = _cfg()
    res = simulate(_reqs(), cfg, COST)
    assert res.summary.num_preemptions == 1
    assert resume_facts(cfg, res.batch) == {"resumes": 1, "resume_tokens": 17, "hbm_hit_tokens": 8,
                                            "recomputed_tokens": 9, "prefill_tokens": 25,
                                            "recomputed_share_of_prefill": 9 / 25}


def test_without_prefix_caching_the_resume_recomputes_everything_and_says_no_hbm_hits():
    cfg = _cfg(enable_prefix_caching=False)
    got = resume_facts(cfg, simulate(_reqs(), cfg, COST).batch)
    assert got == {"resumes": 1, "resume_tokens": 17, "recomputed_tokens": 17, "prefill_tokens": 33,
                   "recomputed_share_of_prefill": 17 / 33}
    line = preemption_lines({"why": "w", "what_to_change": "c", "resume": got})[-1]
    assert "17 tokens of prompt + generated KV): prefix caching off, so 17 recomputed = 51.5% of the 33 " in line


def test_the_line_reads_the_hand_worked_figures():
    facts = resume_facts(_cfg(), simulate(_reqs(), _cfg(), COST).batch)
    lines = preemption_lines({"why": "w", "what_to_change": "c", "resume": facts})
    assert len(lines) == 3 and lines[2].startswith(
        "  on resume after preemption (1 resumes, 17 tokens of prompt + generated KV): 8 found in HBM's prefix "
        "cache, 9 recomputed = 36.0% of the 25 prefill tokens the engine computed")


def test_sglang_runs_have_no_resume_facts():
    assert resume_facts(EngineConfig(batching="sglang", num_gpu_blocks=9, block_size=1, max_model_len=32),
                        [{"resume": {}}]) is None


def test_the_fast_path_keeps_the_same_resume_counts(monkeypatch):
    """An open loop that preempts (80 requests sharing a 32-token prefix, 60 blocks of 16): the arrival stretches
    and fast decode run (counted), and the resume counts and prefill tokens equal the step-by-step run's."""
    ran = {"n": 0}

    def spy(f):
        def g(*a):
            out = f(*a)
            ran["n"] += bool(out[1])
            return out
        return g

    monkeypatch.setattr(open_stretch, "run_arrivals", spy(open_stretch.run_arrivals))
    monkeypatch.setattr(fast_path, "run_open", spy(fast_path.run_open))
    reqs = [RequestSpec(f"r{i}", i * 0.05, 48 + (i * 7) % 32, 40 + (i * 13) % 50, prefix_segments=(1,),
                        segment_tokens=32) for i in range(80)]
    cfg = EngineConfig(num_gpu_blocks=60, block_size=16, max_model_len=256, max_num_batched_tokens=512)
    got = {}
    for ff in (True, False):
        ran["n"] = 0
        res = simulate(reqs, cfg, COST, fast_forward=ff)
        got[ff] = (res.summary.num_preemptions, resume_facts(cfg, res.batch), ran["n"])
    assert got[True][2] > 0 and got[False][2] == 0  # the fast path ran only when on
    assert got[True][:2] == got[False][:2] and got[True][0] > 0 and got[True][1]["resumes"] > 0
    assert got[True][1]["hbm_hit_tokens"] > 0 and got[True][1]["recomputed_share_of_prefill"] == pytest.approx(
        got[True][1]["recomputed_tokens"] / got[True][1]["prefill_tokens"])


def test_a_small_share_is_not_printed_as_zero():
    # the simulate_mooncake_2rep golden's figures: 2,501 recomputed of 10,579,923 prefill tokens = 0.0236 %
    facts = {"resumes": 10, "resume_tokens": 225733, "hbm_hit_tokens": 223232, "recomputed_tokens": 2501,
             "prefill_tokens": 10579923, "recomputed_share_of_prefill": 2501 / 10579923}
    line = preemption_lines({"why": "w", "what_to_change": "c", "resume": facts})[-1]
    assert "223,232 found in HBM's prefix cache, 2,501 recomputed = 0.024% of the 10,579,923 prefill" in line
