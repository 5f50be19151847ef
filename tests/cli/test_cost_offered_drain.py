"""`cost --simulate --at-offered-load` says what `simulate` says of the same run: DeepSeek-V3 on 8 H200s, SGLang 0.5.23
DP attention 8 with DeepEP, 200 requests of 2,000 + 300 tokens at 4 req/s (seed 0: 3.54 req/s offered over a 56.5 s
arrival span). `simulate` reads no rank's queue growing; the run's 200 requests over 66.9 s (first arrival → last
finish, the last requests' ~20 s E2E after the last arrival) are 2.988 req/s, 84.4% of 3.54, below the fell-behind
rule's 90% drain tolerance, and cost warned that the run FELL BEHIND with "its queue grew all run". The simulator's own
queue read now decides for a simulated run; a run it cannot read (too short to tell) keeps the warning."""

from __future__ import annotations

from cli_run import run_cli

RUN = ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8",
       "--enable-dp-attention", "--dp-size", "8", "--moe-a2a-backend", "deepep", "--prompt-lengths", "2000",
       "--output-lengths", "300", "--num-requests", "200", "--max-model-len", "32768")
COST = ("--slo", "ttft=300ms,tpot=70ms", "--gpu-usd-per-hour", "3.5", "--at-offered-load")


def _words(*args: str) -> str:
    r = run_cli(*args)
    assert r.exit_code == 0, r.stdout
    return " ".join(r.stdout.split())


def test_a_run_simulate_reads_as_kept_up_is_not_called_fallen_behind():
    sim = _words("simulate", *RUN, "--rate", "4")
    assert "no rank's queue grew" in sim and "throughput: 2.99 req/s" in sim
    cost = _words("cost", "--simulate", *RUN, "--rate", "4", *COST)
    assert "1.987 good req/s per replica" in cost  # 133 of 200 good over 66.9 s, as goodput --simulate gives
    assert "FELL BEHIND" not in cost and "queue grew" not in cost


def test_a_run_too_short_to_read_keeps_the_warning():
    # at 12 req/s (10.62 offered): 200 requests span 18.7 s, less than the 27.8 s to the first finish: simulate says
    # too short to tell; served 6.119 req/s, 57.6% of offered
    assert "too short to tell whether the engine kept up" in _words("simulate", *RUN, "--rate", "12")
    cost = _words("cost", "--simulate", *RUN, "--rate", "12", *COST)
    assert "the run FELL BEHIND its offered load: offered 10.62 req/s, served 6.119 completed req/s (57.6%" in cost
