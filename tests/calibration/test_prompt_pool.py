"""An inference-perf ``shared_prefix`` client re-sends a fixed pool of whole prompts (``client_prompt_pool``): a stage
is replayed with that reuse, so an engine with prefix caching computes only a repeat's last partial block."""

from __future__ import annotations

import shutil
from pathlib import Path

from kvledger.calibration.stage_launch import client_prompt_pool
from kvledger.calibration.sweep import pool_prefix, read_stage, stage_comparison, stage_run

STAGE = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_0_lifecycle_metrics.json"


def _stage_under(tmp_path: Path, config: str | None, up: int = 0) -> Path:
    """A copy of the bundled kubecon stage with ``config`` as its client config ``up`` folders above its folder."""
    d = tmp_path / "sweep" / "launch" / "results"
    d.mkdir(parents=True)
    stage = Path(shutil.copy(STAGE, d / STAGE.name))
    if config is not None:
        (d.parents[up - 1] if up else d).joinpath("config.yaml").write_text(config, encoding="utf-8")
    return stage


def test_kubecon_client_states_a_pool_of_one_hundred_whole_prompts():
    # the bundled kubecon config.yaml: data.type shared_prefix, num_unique_system_prompts 10 ×
    # num_users_per_system_prompt 10 (inference-perf's aliases of num_groups, num_prompts_per_group) = 100 prompts
    pool = client_prompt_pool(STAGE)
    assert pool is not None and pool.prompts == 100 and not pool.multi_turn
    st = read_stage(STAGE)
    # the stage's prompt quantiles run 194–208 tokens: every request shares its first 194 with one of the 100
    assert pool_prefix(st)[0] == {"prefix_groups": 100, "prefix_tokens": 194}
    run = stage_run(st, "s0", seed=0)
    assert len(run.requests) == 60  # the stage's 60 successes
    assert all(len(r.prefix_segments) == 1 and 0 <= r.prefix_segments[0] < 100 and r.segment_tokens == 194
               for r in run.requests)
    assert "pool of 100 whole prompts" in run.measured.metadata.extra["prompt_pool"]
    assert any("pool of 100 whole prompts" in n for n in stage_comparison("s0", st, run.measured).notes)


def test_pool_keys_defaults_and_what_states_no_pool(tmp_path):
    # the short keys, two folders up (kubecon's sweep layout): 4 × 25 = 100; a missing key takes inference-perf's
    # default of 10: 4 × 10 = 40
    s = _stage_under(tmp_path, "data:\n  type: shared_prefix\n  shared_prefix:\n    num_groups: 4\n"
                               "    num_prompts_per_group: 25\n", up=2)
    assert client_prompt_pool(s).prompts == 100
    (tmp_path / "sweep" / "config.yaml").write_text("data:\n  type: shared_prefix\n  shared_prefix:\n"
                                                     "    num_groups: 4\n", encoding="utf-8")
    assert client_prompt_pool(s).prompts == 40
    # another data type, a non-integer count, or no config: no pool, and the replay draws independent prompts
    for cfg in ("data:\n  type: random\n", "data:\n  type: shared_prefix\n  shared_prefix:\n    num_groups: ten\n"):
        (tmp_path / "sweep" / "config.yaml").write_text(cfg, encoding="utf-8")
        assert client_prompt_pool(s) is None
    assert stage_run(read_stage(s), "s").requests[0].prefix_segments == ()
    (tmp_path / "sweep" / "config.yaml").unlink()
    assert client_prompt_pool(s) is None


def test_multi_turn_sessions_are_named_not_replayed_as_a_pool(tmp_path):
    s = _stage_under(tmp_path, "data:\n  type: shared_prefix\n  shared_prefix:\n    enable_multi_turn_chat: true\n")
    pool = client_prompt_pool(s)
    assert pool.multi_turn and pool.prompts == 100
    prefix, note = pool_prefix(read_stage(s))
    assert prefix == {} and "grows its context by round" in note


def test_explicit_groups_override_the_pool():
    run = stage_run(read_stage(STAGE), "s0", seed=0, prefix_groups=10, prefix_tokens=128)
    assert {r.segment_tokens for r in run.requests} == {128} and "prompt_pool" not in run.measured.metadata.extra
