"""Whether the host tier helps (kvledger offload's first line), on the hand-worked two-turn sessions of
tests/dynamics/test_offload_two_turn.py: once with an HBM too small to keep turn 0's prefix, once with one that keeps
it; and the header names the engine version whose rules apply."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.analyses.judgments.offload import tier_judgment
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn
from kvledger.report.offload_view import tier_verdict_line

# Session A: turn 0 = 1,024 input + 16 output tokens; turn 1, 10 s later, adds 64 input tokens (prompt 1,104, of which
# the first 1,024 are turn 0's prompt). B and C (1,024 + 16 each) arrive at 1 s and 2 s. Prompt tokens at first
# admission: 3 × 1,024 + 1,104 = 4,176. Host tier: 1,000 blocks of Llama-3.1-8B KV (131,072 B/token) at 51.2 GB/s.
HOST = HostTier(1000, 131072, 51.2e9, 51.2e9)
SESSIONS = SessionLoop((Session("A", 0.0, (Turn(1024, 16), Turn(64, 16, think_s=10.0)), 0, 0),
                        Session("B", 1.0, (Turn(1024, 16),), 0, 1), Session("C", 2.0, (Turn(1024, 16),), 0, 2)), 64)


def _run(num_gpu_blocks: int):
    cfg = EngineConfig(num_gpu_blocks=num_gpu_blocks, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    return simulate_offload(SESSIONS, cfg, FixedStepCost(0.01, 1e-5), HOST).tiers


def test_the_tier_helps_when_hbm_evicted_the_reused_prefix():
    # 80 blocks (1,264 tokens usable): B and C evict A's 64 blocks; turn 1 loads its 1,024-token prefix from the host:
    # host hit rate 1,024 / 4,176 = 24.5% ≥ 1%, and HBM held 0 of the 1,024 reused tokens
    j = tier_judgment(_run(80))
    assert j["helps"] and j["host_hit_rate"] == pytest.approx(1024 / 4176)
    assert j["reused_tokens"] == 1024 and j["hbm_share_of_reused"] == 0.0
    assert tier_verdict_line(j).startswith("The host tier helps this workload: it serves 24.5% of prompt tokens")


def test_the_tier_adds_nothing_when_hbm_holds_the_working_set():
    # 400 blocks (6,400 tokens) hold all four requests (≤ 1,120 tokens = 70 blocks each, 280 in all): turn 1 finds its
    # 1,024-token prefix in HBM, the host serves 0 tokens: 0% < 1%, HBM held 100% of the reused prefix
    j = tier_judgment(_run(400))
    assert not j["helps"] and j["host_hit_rate"] == 0.0
    assert j["reused_tokens"] == 1024 and j["hbm_share_of_reused"] == 1.0
    line = tier_verdict_line(j)
    assert line.startswith("The host tier does not help this workload: it served 0.00% of prompt tokens (under 1%)")
    assert "HBM already held 100% of the reused prefix tokens (1,024)" in line
    assert "more sessions in flight" in line and "longer sessions" in line
    # a trace run (simulate --trace ... with tier flags) has no --sessions to turn: the hint names the trace's load
    line = tier_verdict_line(j, sessions=False)
    assert "--sessions" not in line and "--workload" not in line and "more requests in flight (--rate" in line


def test_offload_header_names_the_engine_version():
    # the header used to end in a bare "— vllm"; it names the version whose rules the plan applied (here the one given)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    out = CliRunner().invoke(app, ["offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size",
                                   "256GiB", "--sessions", "20", "--engine-version", "0.19.0"])
    assert out.exit_code == 0, out.output
    assert "vllm 0.19.0 rules" in " ".join(out.output.split())
