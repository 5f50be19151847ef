"""A `vllm bench serve --ramp-up-strategy linear --ramp-up-start-rps A --ramp-up-end-rps B` run: its file keeps
`request_rate` at --request-rate's default, "inf", though the load was a ramp from A to B req/s.

The fields are those vllm/benchmarks/serve.py (vLLM main, 2026) writes: `ramp_up_strategy`, `ramp_up_start_rps`,
`ramp_up_end_rps` beside `request_rate`, and `rps_change_events` in the results. The aggregate file below is the
0.25.1 `--save-result` fixture of er0080/vllm-benchmarking (facebook/opt-125m, 8 prompts of 32 in / 16 out) with the
ramp fields added and `max_concurrency` dropped; a detailed file adds the per-request arrays.
"""

from __future__ import annotations

import json

import pytest

from kvledger.calibration.targets import load_targets
from kvledger.errors import FormatError
from kvledger.evidence import read_run
from kvledger.evidence.vllm_bench import sweep_params
from kvledger.ledgers.capacity_basis import check_load
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RunRecords

RAMP = {"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 20,
        "rps_change_events": [{"rps": 1, "timestamp": "2026-08-16T16:08:53"}]}
AGG = {
    "date": "20260816-160853", "endpoint_type": "vllm", "backend": "vllm", "label": None,
    "model_id": "facebook/opt-125m", "tokenizer_id": "facebook/opt-125m", "num_prompts": 8, "request_rate": "inf",
    "burstiness": 1.0, "max_concurrency": None, "duration": 1.5441598830002476, "completed": 8, "failed": 0,
    "total_input_tokens": 256, "total_output_tokens": 128, "request_throughput": 5.180810671273421,
    "request_goodput": None, "output_throughput": 82.89297074037474, "total_token_throughput": 248.6789122211242,
    "mean_ttft_ms": 215.53594200008774, "median_ttft_ms": 55.68139649994919, "p99_ttft_ms": 734.4049174101428,
    "mean_tpot_ms": 11.265828258331112, "median_tpot_ms": 11.20450286665194, "p99_tpot_ms": 11.979541883350674,
    **RAMP,
}
SLO = parse_slo("ttft=1s,tpot=50ms")


def _detailed() -> dict:
    """Two requests sent 1.0 s apart (start_times), 4 output tokens each: ttft 0.1 s, gaps 0.02 s."""
    return {**AGG, "num_prompts": 2, "completed": 2, "total_input_tokens": 64, "total_output_tokens": 8,
            "input_lens": [32, 32], "output_lens": [4, 4], "ttfts": [0.1, 0.1], "itls": [[0.02] * 3, [0.02] * 3],
            "latencies": [0.16, 0.16], "start_times": [5.0, 6.0], "errors": ["", ""]}


def _file(tmp_path, obj) -> str:
    f = tmp_path / "vllm-ramp-up-linear-1qps-20qps-opt-125m.json"
    f.write_text(json.dumps(obj))
    return str(f)


def test_a_ramped_run_states_its_ramp_not_an_infinite_rate(tmp_path):
    run = read_run(_file(tmp_path, AGG))
    md = run.metadata
    # "inf" is --request-rate's unused default under a ramp: no fixed rate is read
    assert md.request_rate is None
    assert md.extra["ramp_up"] == {"strategy": "linear", "start_rps": 1.0, "end_rps": 20.0}
    assert any(d.startswith("the request rate ramped linearly from 1 to 20 req/s over the run") for d in
               md.definitions)
    # the ramp's fields are the result's own, not parameters a `vllm bench sweep` varied
    assert sweep_params({**AGG, "probe_completed": 3, "probe_failed": 0}) == ""


def test_the_load_check_does_not_call_a_ramp_a_burst_at_t0(tmp_path):
    run = read_run(_file(tmp_path, _detailed()))
    assert isinstance(run, RunRecords)
    # arrivals are the start_times as sent (5.0 and 6.0 → 0 and 1 s), whatever the rate field says
    assert [r.arrival_s for r in run.records] == pytest.approx([0.0, 1.0])
    load = check_load(run, goodput(run, SLO), SLO)
    # before: "not_flagged — every request was sent at t = 0 (request rate inf, no concurrency limit)"
    assert load.status == "cannot_tell"
    assert load.reason == ("its request rate ramped from 1 to 20 req/s over the run (linear): there is no one offered "
                           "rate to judge its load against")


def test_validate_refuses_to_replay_a_ramp_it_has_no_send_times_for(tmp_path):
    with pytest.raises(FormatError) as err:
        load_targets(_file(tmp_path, {**AGG, "max_concurrency": 4}), client_concurrency=None)
    msg = str(err.value)
    # before: replayed as a closed loop of 4 clients (or, without a cap, asked for --client-concurrency)
    assert "request rate ramped (linear) from 1 to 20 req/s" in msg
    assert "rerun with --save-detailed" in msg and "client-concurrency" not in msg
