"""What a seventh new-user trial of ``kvledger goodput`` found: a --target sweep stitched from different models or
deployments, runs of different models ranked with no model shown, impossible aggregate percentiles accepted, an SLO on
a metric the file lacks answered with nothing, a duration of 0, a raw JSON dict in the text, SLO lists with an empty
item or a misnamed repeat, and the cost multiplier's bound side missing from the JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_run import refused, run_cli

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
SLO = ["--slo", "ttft=250ms,tpot=50ms"]


def bench(model: str, rate: float, ttfts: list[float], **over) -> dict:
    """A ``vllm bench serve --save-detailed`` result: one request every 0.5 s, each 10 prompt and 5 output tokens
    streamed one a chunk 20 ms apart (TPOT 20 ms), E2E = TTFT + 4 × 20 ms; the run's stated duration 2 s."""
    n = len(ttfts)
    return {"backend": "vllm", "model_id": model, "num_prompts": n, "request_rate": rate, "duration": 2.0,
            "completed": n, "failed": 0, "request_throughput": n / 2.0, "input_lens": [10] * n, "output_lens": [5] * n,
            "ttfts": ttfts, "itls": [[0.02] * 4] * n, "latencies": [t + 0.08 for t in ttfts],
            "start_times": [100.0 + 0.5 * i for i in range(n)], "errors": [""] * n, "generated_texts": ["x"] * n,
            **over}


def write(tmp_path: Path, name: str, doc: dict) -> str:
    f = tmp_path / name
    f.write_text(json.dumps(doc))
    return str(f)


def test_a_target_sweep_over_two_models_is_refused_naming_each_models_files(tmp_path):
    a = write(tmp_path, "a.json", bench("org/A", 1.0, [0.1, 0.2, 0.3, 0.4]))
    b = write(tmp_path, "b.json", bench("org/B", 2.0, [0.1, 0.2, 0.3, 0.4]))
    msg = refused("goodput", a, b, *SLO, "--target", "0.5")
    assert "these runs are of different models, so the sweep would mix deployments" in msg
    assert "By model: org/A: a.json; org/B: b.json. Give one group's files per call." in msg
    # one model's runs still sweep: request 4 (TTFT 0.4 s) misses 250 ms, 3 of 4 meet at both rates → 75% ≥ 50%, the
    # boundary is the highest rate, 2 req/s
    c = write(tmp_path, "c.json", bench("org/A", 2.0, [0.1, 0.2, 0.3, 0.4]))
    doc = json.loads(run_cli("goodput", a, c, *SLO, "--target", "0.5", "--json").output)
    assert doc["boundary"]["boundary_value"] == 2.0


def test_a_target_sweep_over_two_launch_records_is_refused_as_validate_sweep_does(tmp_path):
    # the same inference-perf stages copied under two deployments' folders, each with its manifests.yaml (the launch
    # record): stages 0 and 1 under base/, stage 2 under quant/ (validate --sweep's rule, evidence/deployment.py)
    files = []
    for folder, stages in (("base", (0, 1)), ("quant", (2,))):
        (tmp_path / folder).mkdir()
        for name in ("config.yaml", "manifests.yaml"):
            shutil.copy(DATA / "inference-perf" / name, tmp_path / folder / name)
        for i in stages:
            files.append(str(shutil.copy(DATA / f"inference-perf/stage_{i}_lifecycle_metrics.json", tmp_path / folder)))
    msg = refused("goodput", *files, "--slo", "ttft=100ms,tpot=10ms", "--target", "0.9")
    assert "these runs were launched by different records" in msg
    assert (f"{tmp_path / 'base' / 'manifests.yaml'}: stage_0_lifecycle_metrics.json [stage 0], "
            f"stage_1_lifecycle_metrics.json [stage 1]; {tmp_path / 'quant' / 'manifests.yaml'}: "
            "stage_2_lifecycle_metrics.json [stage 2]") in msg


def test_an_aggregate_vllm_file_with_impossible_percentiles_is_refused(tmp_path):
    agg = {"backend": "vllm", "model_id": "org/A", "duration": 10.0, "completed": 20, "failed": 0,
           "request_throughput": 2.0, "mean_ttft_ms": 7097.0, "median_ttft_ms": 9442.0, "p99_ttft_ms": 1.0}
    msg = refused("goodput", write(tmp_path, "agg.json", agg), "--slo", "ttft=20s")
    # 9442 ms and 1 ms read as seconds: the median above the p99, as inference-perf's reader refuses
    assert "median 9.442 s is above p99 0.001 s; quantiles of one sample cannot fall as the percentile rises " \
           "(damaged file)" in msg and "ttft (mean_ttft_ms, median_ttft_ms, p99_ttft_ms)" in msg
    # a mean outside [min, max] (GuideLLM and AIPerf state both): the same check on every aggregate reader
    from kvledger.errors import FormatError
    from kvledger.evidence.aggregate import MetricSummary, check_summary

    try:
        check_summary("f", MetricSummary("ttft", "request", {50.0: 0.2}, mean_s=0.5, min_s=0.1, max_s=0.3), "ttft")
    except FormatError as e:
        assert "mean 0.5 s lies outside min 0.1 s … max 0.3 s (damaged file)" in str(e)
    else:
        raise AssertionError("a mean above the max was accepted")


def test_an_slo_on_a_metric_the_aggregate_file_lacks_is_refused_naming_what_it_can_judge(tmp_path):
    agg = {"backend": "vllm", "model_id": "org/A", "duration": 10.0, "completed": 20, "failed": 0,
           "request_throughput": 2.0, "mean_ttft_ms": 100.0, "median_ttft_ms": 90.0, "p99_ttft_ms": 300.0,
           "mean_tpot_ms": 20.0, "median_tpot_ms": 19.0, "p99_tpot_ms": 30.0}
    msg = refused("goodput", write(tmp_path, "noe2e.json", agg), "--slo", "ttft=20s,e2e=30s")
    assert ("missing E2E latency statistics: the SLO's e2e cannot be judged on this file (it states summaries of "
            "ttft, tpot); the SLO keys it can judge: ttft, tpot. Drop e2e from --slo") in msg
    # GuideLLM's fixture states no per-request gap statistics: itl_max is refused, not bounded at 0 … 2
    msg = refused("goodput", str(DATA / "guidellm/llmd_fixture_guidellm_report_v2_mockserver.json"), "--slo",
                  "ttft=2s,itl_max=40ms")
    assert "the SLO's itl_max cannot be judged on this file" in msg and "can judge: ttft, tpot, e2e." in msg


def test_runs_of_different_models_show_a_model_column_and_no_best_of_all(tmp_path):
    # org/A: TTFTs 0.1–0.4 s, 2 of 4 within 250 ms (TPOT 20 ms meets 50 ms) over the stated 2 s → 1.000 good req/s;
    # org/B: 3 of 4 within → 1.500 good req/s. Different models are different deployments: the best of each is named
    a = write(tmp_path, "a.json", bench("org/A", 1.0, [0.1, 0.2, 0.3, 0.4]))
    b = write(tmp_path, "b.json", bench("org/B", 1.0, [0.1, 0.15, 0.2, 0.4]))
    out = run_cli("goodput", a, b, *SLO).output
    assert " ".join(out.split("\nSLO: ")[0].split()) == (  # the lines before the SLO (wrapped at 250 columns)
        "answer: the 2 runs are of 2 models (the table's model column), so they are different deployments and no run "
        "is the best of all; the most goodput of each model: org/A: 1.000 good req/s (50.0% of 4 requests within the "
        "SLO), #1 a.json; org/B: 1.500 good req/s (75.0% of 4 requests within the SLO), #2 b.json")
    rows = [[c.strip() for c in ln.strip("│").split("│")] for ln in out.splitlines() if ln.startswith("│ ")]
    assert [r[:2] for r in rows] == [["1", "org/A"], ["2", "org/B"]]
    # one model's runs: no model column, the best named as before
    c = write(tmp_path, "c.json", bench("org/A", 2.0, [0.1, 0.15, 0.2, 0.4]))
    out = run_cli("goodput", a, c, *SLO).output
    assert "the best of 2 runs: #2 c.json" in out.splitlines()[0] and "model " not in out


def test_a_stated_duration_of_zero_gives_way_to_the_records_span(tmp_path):
    # arrivals 0, 0.5, 1, 1.5 s; the last finishes at 1.5 + 0.4 + 4 × 0.02 = 1.98 s: 2 good ÷ 1.98 s = 1.010 good req/s
    f = write(tmp_path, "zero.json", bench("org/A", 1.0, [0.1, 0.2, 0.3, 0.4], duration=0))
    out = run_cli("goodput", f, *SLO).output
    assert out.startswith("answer: 1.010 good req/s (50.0% of 4 requests within the SLO)")
    assert ("duration 1.980 s, last finish − first arrival of the records (the vllm-bench-serve file states a duration "
            "of 0 s, which no run lasts)") in out
    # an aggregate file has no per-request times to take a span from: refused
    agg = {"backend": "vllm", "model_id": "org/A", "duration": 0, "completed": 20, "failed": 0,
           "request_throughput": 2.0, "median_ttft_ms": 90.0, "p99_ttft_ms": 300.0}
    msg = refused("goodput", write(tmp_path, "agg0.json", agg), "--slo", "ttft=1s")
    assert "the file states a duration of 0 s, which no run lasts, and keeps no per-request times" in msg


def test_the_tool_reported_goodput_is_a_sentence_not_a_json_dict(tmp_path):
    f = write(tmp_path, "tg.json", bench("org/A", 1.0, [0.1, 0.2, 0.3, 0.4], request_goodput=2.0))
    out = run_cli("goodput", f, *SLO).output
    assert "tool-reported goodput (its SLO is not in the file): 2.000 good req/s (the file's request_goodput)" in out
    assert '{"req_per_s"' not in out


def test_the_json_multiplier_carries_the_tables_value_and_its_bound_side(tmp_path):
    # 100 completed over 10 s, TTFT median 100 ms and p99 300 ms (numpy's linear rule over n = 100: the median bounds
    # ⌊0.5 × 99⌋ + 1 = 50 requests from below, the p99 ⌈0.99 × 99⌉ = 99 from above)
    agg = {"backend": "vllm", "model_id": "org/A", "duration": 10.0, "completed": 100, "failed": 0,
           "request_throughput": 10.0, "median_ttft_ms": 100.0, "p99_ttft_ms": 300.0}
    f = write(tmp_path, "agg.json", agg)
    # ttft ≤ 200 ms: 50–99 good, so the multiplier is at most 100 ÷ 50 = 2.00
    d = json.loads(run_cli("goodput", f, "--slo", "ttft=200ms", "--json").output)
    assert (d["effective_cost_multiplier"], d["effective_cost_multiplier_bound"]) == (2.0, "upper")
    assert "≤2.00×" in run_cli("goodput", f, "--slo", "ttft=200ms").output
    # ttft ≤ 50 ms: the median is above it, so 0–⌈0.5 × 99⌉ = 50 good: at least 100 ÷ 50 = 2.00 (was null in JSON)
    d = json.loads(run_cli("goodput", f, "--slo", "ttft=50ms", "--json").output)
    assert (d["effective_cost_multiplier"], d["effective_cost_multiplier_bound"]) == (2.0, "lower")
    assert "≥2.00×" in run_cli("goodput", f, "--slo", "ttft=50ms").output
    # an exact run: 2 of 4 good → 4 ÷ 2 = 2, no bound
    d = json.loads(run_cli("goodput", write(tmp_path, "a.json", bench("org/A", 1.0, [0.1, 0.2, 0.3, 0.4])), *SLO,
                           "--json").output)
    assert (d["effective_cost_multiplier"], d["effective_cost_multiplier_bound"]) == (2.0, None)


def test_runs_of_one_model_on_different_gpus_or_tp_are_different_deployments(tmp_path):
    # one model, three runs: H100 at TP 1 (2 of 4 TTFTs within 250 ms → 1.000 good req/s over the stated 2 s), H100 at
    # TP 2 (3 of 4 → 1.500) and A100 at TP 1 (4 of 4 → 2.000), GPU and TP as `vllm bench serve --metadata` stores them.
    # Before, all three were one model's runs and the A100 one was named "the best of 3 runs"; they are three
    # deployments, each with its own best
    a = write(tmp_path, "a.json", bench("org/A", 1.0, [0.1, 0.2, 0.3, 0.4], gpu="H100", tp="1"))
    b = write(tmp_path, "b.json", bench("org/A", 1.0, [0.1, 0.15, 0.2, 0.4], gpu="H100", tp="2"))
    c = write(tmp_path, "c.json", bench("org/A", 1.0, [0.1, 0.15, 0.2, 0.2], gpu="A100", tp="1"))
    out = run_cli("goodput", a, b, c, *SLO).output
    assert " ".join(out.split("\nSLO: ")[0].split()) == (
        "answer: the 3 runs are of 3 deployments (the table's deployment column: model, GPU and the launch settings "
        "each record states), so no run is the best of all; the most goodput of each deployment: org/A on H100, TP 1: "
        "1.000 good req/s (50.0% of 4 requests within the SLO), #1 a.json; org/A on H100, TP 2: 1.500 good req/s "
        "(75.0% of 4 requests within the SLO), #2 b.json; org/A on A100, TP 1: 2.000 good req/s (100.0% of 4 requests "
        "within the SLO), #3 c.json")
    rows = [[c.strip() for c in ln.strip("│").split("│")] for ln in out.splitlines() if ln.startswith("│ ")]
    assert [r[:2] for r in rows] == [["1", "org/A on H100, TP 1"], ["2", "org/A on H100, TP 2"],
                                     ["3", "org/A on A100, TP 1"]]
    # the same deployment twice: one best, as before
    d = write(tmp_path, "d.json", bench("org/A", 2.0, [0.1, 0.15, 0.2, 0.4], gpu="H100", tp="1"))
    assert "the best of 2 runs: #2 d.json" in run_cli("goodput", a, d, *SLO).output.splitlines()[0]
