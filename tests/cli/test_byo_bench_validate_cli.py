"""`kvledger validate` on a vLLM benchmark_serving result as a user has it (tests/data/public-bench, SOURCES.md): the
model read from the Hugging Face cache path the run recorded, no --model needed, and the client's own --best-of 1
not warned as an unmodelled launch setting."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run_cli

GPTOSS = Path(__file__).parents[1] / "data" / "public-bench" / "inferencex_vllm_bench_gptoss120b_hfcache_conc4.json"


def test_validate_reads_the_model_from_the_cache_path_and_keeps_best_of_quiet():
    res = run_cli("validate", str(GPTOSS), "--gpu", "H200", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    notes = " ".join(out["notes"])
    assert "openai/gpt-oss-120b" in notes and "--best-of" not in notes
    rows = {r["metric"]: r for r in out["comparison"]["rows"]}
    # the file: 40 completed in duration 89.19548447802663 s → request_throughput 0.44845319507013864 req/s;
    # mean_ttft_ms 330.7963805680629
    assert rows["throughput"]["measured"] == 0.44845319507013864
    assert rows["TTFT mean"]["measured"] == 0.3307963805680629
    assert out["num_requests"] == 40


GUIDELLM_02 = GPTOSS.parent / "guidellm_0_2_benchmarks_stripped.json"


def test_validate_a_sampled_guidellm_run_replays_its_load_not_its_sample():
    # the file keeps 1 of its 46 successful requests (a reservoir sample); the run: synchronous, 46 requests in
    # duration 29.997201442718506 s. Replaying the one kept request measured 1 ÷ 29.997 = 0.033 req/s, 46× too low
    res = run_cli("validate", str(GUIDELLM_02), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    rows = {r["metric"]: r for r in out["comparison"]["rows"]}
    assert out["num_requests"] == 46
    assert abs(rows["throughput"]["measured"] - 46 / 29.997201442718506) < 1e-9
    # time_to_first_token_ms.successful.mean 16.792535781860348 ms
    assert abs(rows["TTFT mean"]["measured"] - 0.016792535781860348) < 1e-12
