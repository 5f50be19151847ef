"""An AIPerf multi-turn (agentic trace) run's aggregate export (tests/data/public-bench, SOURCES.md): the note that its
replay is a closed loop of synthetic single-turn requests, not its sessions, with the file's own figures for what
that loses. Values read by hand from the file."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.evidence import read_run

AIPERF_08 = Path(__file__).parents[1] / "data" / "public-bench" / \
    "inferencex_aiperf_0_8_kimi_conc4_profile_export_aiperf.json"


def test_agentic_trace_run_says_its_sessions_are_not_replayed():
    note = read_run(AIPERF_08).metadata.extra["multi_turn"]
    # input_config.input.use_end_to_start_delays true, public_dataset semianalysis_cc_traces_weka_062126_256k;
    # branch_stats.children_spawned 67
    assert note.startswith("AIPerf multi-turn run (input.use_end_to_start_delays over the trace dataset "
                           "semianalysis_cc_traces_weka_062126_256k; branch_stats (67 subagent branches spawned))")
    assert "metadata.conversation_id, x_correlation_id, turn_index" in note
    # theoretical_prefix_cache_hit.avg 93.89201036178103 %; effective_concurrency.max 12.0 against loadgen.concurrency 4
    assert "theoretical_prefix_cache_hit 93.9% of input tokens" in note
    assert "up to 12 requests in flight (effective_concurrency max) against a concurrency of 4" in note


def test_single_turn_run_has_no_session_note(tmp_path):
    obj = json.loads(AIPERF_08.read_text())
    # the same file without its multi-turn signs: no end-to-start delays, no branch_stats
    del obj["input_config"]["input"]["use_end_to_start_delays"], obj["branch_stats"]
    p = tmp_path / AIPERF_08.name
    p.write_text(json.dumps(obj))
    assert "multi_turn" not in read_run(p).metadata.extra


def test_conversation_turn_mean_is_multi_turn(tmp_path):
    obj = json.loads(AIPERF_08.read_text())
    del obj["input_config"]["input"]["use_end_to_start_delays"], obj["branch_stats"]
    # aiperf --conversation-turn-mean 3 (input.conversation.turn.mean; multi-turn only above 1)
    obj["input_config"]["input"]["conversation"]["turn"] = {"mean": 3}
    p = tmp_path / AIPERF_08.name
    p.write_text(json.dumps(obj))
    assert read_run(p).metadata.extra["multi_turn"].startswith("AIPerf multi-turn run (input.conversation.turn.mean 3)")
