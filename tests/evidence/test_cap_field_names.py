"""The client cap a closed-loop replay names, as the file names it (tests/data/public-bench, SOURCES.md): AIPerf's
``concurrency``, GuideLLM's strategy ``streams``, a synchronous GuideLLM strategy's one request at a time; vLLM's
``max_concurrency`` as before."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.calibration.aggregate_stage import closed_loop_users
from kvledger.evidence import read_run
from kvledger.evidence.read import read_runs

DATA = Path(__file__).parents[1] / "data" / "public-bench"


def test_aiperf_cap_named_concurrency():
    # input_config.loadgen.concurrency 4 (AIPerf 0.8.0, --concurrency 4); AIPerf has no field max_concurrency
    run = read_run(DATA / "inferencex_aiperf_0_8_kimi_conc4_profile_export_aiperf.json")
    assert closed_loop_users(run, None) == (4, "the file's concurrency 4")
    assert closed_loop_users(run, 3) == (4, "the file's concurrency 4; --client-concurrency 3 not used")


def test_vllm_cap_still_max_concurrency():
    # max_concurrency 4 in the InferenceX vllm bench serve result
    run = read_run(DATA / "inferencex_vllm_bench_gptoss120b_hfcache_conc4.json")
    assert closed_loop_users(run, None) == (4, "the file's max_concurrency 4")


def test_guidellm_synchronous_and_streams(tmp_path):
    src = DATA / "guidellm_0_2_benchmarks_stripped.json"
    (sync,) = read_runs(src, aggregate_samples=True)
    # args.strategy {"type_": "synchronous"}: no cap field, one request at a time
    assert closed_loop_users(sync, None) == (1, "the file's synchronous strategy (one request at a time), cap 1")
    obj = json.loads(src.read_text())
    # the same benchmark as GuideLLM writes a concurrent one: {"type_": "concurrent", "streams": 8}
    obj["benchmarks"][0]["args"]["strategy"] = {"type_": "concurrent", "streams": 8}
    edited = tmp_path / src.name
    edited.write_text(json.dumps(obj))
    (conc,) = read_runs(edited, aggregate_samples=True)
    assert closed_loop_users(conc, None) == (8, "the file's strategy.streams 8")
