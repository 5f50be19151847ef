"""The Qwen-Bailian trace reader (session ids from parent_chat_id, 16-token hash ids) and routing its sessions across
replicas: hand-worked prefix hits under round robin, session affinity and sgl-router's cache-aware rule."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.dynamics.workload.bailian import read_bailian
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import FormatError

# Rows in the dataset README's schema (made up here; the real files are Git LFS objects not available to the project).
ROWS = [
    {"chat_id": 1, "parent_chat_id": -1, "timestamp": 10.0, "input_length": 40, "output_length": 8, "type": "text",
     "turn": 1, "hash_ids": [1, 2, 3]},
    {"chat_id": 2, "parent_chat_id": -1, "timestamp": 10.5, "input_length": 20, "output_length": 4, "type": "search",
     "turn": 1, "hash_ids": [9, 10]},
    {"chat_id": 3, "parent_chat_id": 1, "timestamp": 12.0, "input_length": 70, "output_length": 5, "type": "text",
     "turn": 2, "hash_ids": [1, 2, 3, 4, 5]},
    # a conversation whose first turns lie before the file's window: keyed by the missing parent, 5
    {"chat_id": 7, "parent_chat_id": 5, "timestamp": 13.0, "input_length": 33, "output_length": 2, "type": "text",
     "turn": 3, "hash_ids": [20, 21, 22]},
    {"chat_id": 8, "parent_chat_id": 7, "timestamp": 14.0, "input_length": 50, "output_length": 3, "type": "file",
     "turn": 4, "hash_ids": [20, 21, 22, 23]},
]


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "bailian.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def test_rows_become_requests_with_sessions_and_16_token_segments(trace):
    b = read_bailian(trace)
    assert b.arrivals_s.tolist() == [0.0, 0.5, 2.0, 3.0, 4.0] and b.turns == [1, 1, 2, 3, 4]
    assert b.sessions == ["session-1", "session-2", "session-1", "session-5", "session-5"]
    specs = load_trace(trace)  # detected before Mooncake's layout, whose keys a Bailian row also has
    assert [s.client_id for s in specs] == b.sessions
    assert specs[2].prefix_segments == (1, 2, 3, 4, 5) and specs[2].segment_tokens == 16
    # 70 prompt tokens: 4 whole 16-token blocks can be shared (the 5th id names a partial block)
    assert specs[2].num_shareable_tokens == 64


@pytest.mark.parametrize(("router", "hit_tokens"), [
    # 2 replicas, 213 prompt tokens (40 + 20 + 70 + 33 + 50). Chat 1 (40 tokens) caches blocks [1, 2] (32 tokens;
    # its third block is partial); chat 3 can hit those 32. Chat 7 (33 tokens) caches [20, 21]; chat 8 can hit 32.
    # round_robin: 1→r0, 2→r1, 3→r0 (hit 32), 7→r1, 8→r0 (miss) = 32.
    ("round_robin", 32),
    # session_affinity: each conversation stays on the replica of its first request: both hits = 64.
    ("session_affinity", 64),
    # prefix_aware (sgl-router cache_threshold 0.5, strict): chat 3 matches 32 of 70 tokens (≤ 35), so it goes to the
    # smallest tree, r1 (20 tokens against r0's 40): miss; chat 7 → r0 (40 < 90); chat 8 matches 32 of 50 (> 25) on
    # r0: hit 32.
    ("prefix_aware", 32),
])
def test_session_affinity_keeps_each_conversation_on_one_replica(trace, router, hit_tokens):
    res = CliRunner().invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", str(trace),
                                   "--replicas", "2", "--router", router, "--json"], catch_exceptions=False)
    s = json.loads(res.stdout)["summary"]
    assert (s["prefix_cache_hit_tokens"], s["prefix_cache_query_tokens"]) == (hit_tokens, 213)


@pytest.mark.parametrize(("bad", "words"), [
    ({"chat_id": 1}, "chat_id 1 appears twice"),
    ({"timestamp": -1}, "must be a finite number of seconds"),
    ({"input_length": 0}, "must be ≥ 1"),
    ({"hash_ids": [1, "x"]}, "integer block ids"),
    ({"turn": 1.5}, "not a whole number"),
    # 40 prompt tokens hold 2 whole 16-token blocks (3 with the partial one): 5 ids fit neither
    ({"input_length": 40, "hash_ids": [1, 2, 3, 4, 5]}, "has 5 block ids but the prompt of 40 tokens holds 2 whole"),
])
def test_bad_rows_name_the_line_and_field(tmp_path, bad, words):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({**ROWS[1], **bad}) + "\n")
    with pytest.raises(FormatError, match=words) as err:
        read_bailian(path)
    assert "line 2" in str(err.value)
