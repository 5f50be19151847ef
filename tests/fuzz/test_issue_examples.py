"""Every example of issue 9 in the CLI's area, as the user typed it: each failed (traceback, invalid JSON or a
silently replaced 0) before the fix; now each ends in exit 0 with strict JSON, or exit 2 with a message that
names the flag and the allowed range."""

from __future__ import annotations

import pytest
from _cli import invoke, strict_json_lines

from kvledger.accounting.calibrated import get_calibrated_cost, list_calibrated
from kvledger.accounting.stepcost import StepShape
from kvledger.errors import InputError

SIM = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100"]


def test_calibrated_step_costs_return_python_floats():
    # the simulator tells a single step time from an array of them by `t.__class__ is float`; Vidur's tables
    # answered a step beyond their grid (a long prefill, a big decode batch) with a numpy float64, which fell
    # into the array branch: TypeError: object of type 'numpy.float64' has no len()
    shapes = (StepShape(num_decode_seqs=7, decode_kv_tokens=7 * 900),
              StepShape(num_prefill_tokens=512, num_prefill_seqs=1, prefill_kv_tokens=512,
                        prefill_attn_pairs=512 * 513 / 2,
                        num_decode_seqs=3, decode_kv_tokens=3000),
              StepShape(num_prefill_tokens=100_000, num_prefill_seqs=1, prefill_kv_tokens=100_000,
                        prefill_attn_pairs=5e9),
              StepShape(num_decode_seqs=1000, decode_kv_tokens=10**7))
    for info in list_calibrated():
        cost = get_calibrated_cost(f"{info.source}:{info.model}", info.gpu, info.tp)
        for shape in shapes:
            try:
                t = cost.step_time_s(shape)
            except InputError as err:  # a fit refused far outside its data (never a negative step time)
                assert "does not hold this far outside" in str(err), (info.key, shape)
                continue
            assert t.__class__ is float and t > 0, (info.key, shape)


def test_simulate_with_the_calibrated_step_cost_runs():
    # azure-code's long prompts take Vidur's prefill table past its grid
    res = invoke(["simulate", "meta-llama/Llama-2-7b-hf", "--gpu", "H100", "--step-cost", "calibrated", "--trace",
                  "azure-code",
                  "--num-requests", "300", "--json"])
    assert res.code == 0, res.exception or res.err
    d = strict_json_lines(res.out)[0]
    assert (
        d["step_cost"]["name"].startswith("vidur:")
        and d["summary"]["num_finished"] + d["summary"]["num_rejected"] == 300
    )


def test_fp8_kv_on_a_model_whose_break_even_is_always_or_never():
    # Qwen2.5-72B on B200 at TP 8: some batch rows are "always"/"never", whose context_tokens is None; the table
    # cell for the other kind was formatted eagerly (TypeError: unsupported format string passed to NoneType)
    res = invoke(["fp8-kv", "Qwen/Qwen2.5-72B", "--gpu", "B200", "--tp", "8"])
    assert res.code == 0, res.exception or res.err
    assert "Break-even context by batch" in res.out


@pytest.mark.parametrize("extra", [["--num-requests", "1"], ["--num-requests", "5", "--rate", "inf"]])
def test_simulate_json_is_strict_when_the_offered_rate_is_infinite(extra):
    # one request (or all at t=0) has no inter-arrival span: the offered rate is infinite and was printed as
    # the bare word Infinity, which no JSON parser accepts, then as the string "inf" in a number field; it is now
    # null, with "all_at_once": true saying why
    res = invoke([*SIM, *extra, "--json"])
    assert res.code == 0, res.exception or res.err
    workload = strict_json_lines(res.out)[0]["workload"]
    assert workload["offered_rate_req_per_s"] is None and workload["all_at_once"] is True


def _inf_strings(v) -> list:
    """Every "inf"/"-inf" string in a JSON value (a number field written as text)."""
    if isinstance(v, dict):
        return [x for w in v.values() for x in _inf_strings(w)]
    if isinstance(v, list):
        return [x for w in v for x in _inf_strings(w)]
    return [v] if v in ("inf", "-inf") else []


@pytest.mark.parametrize("args", [
    ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=2s", "--num-requests", "5",
     "--rate", "inf", "--json"],
    ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=2s", "--api", "OpenAI:gpt-4.1",
     "--utilization", "0.5", "--num-requests", "5", "--rate", "inf", "--at-offered-load", "--gpu-usd-per-hour", "2",
         "--json"],
    ["disagg", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "6", "--rate", "inf", "--prefill-gpus",
     "1",
     "--decode-gpus", "1", "--no-tune", "--json"],
])
def test_rate_inf_gives_strict_json_in_every_command(args):
    res = invoke(args)
    assert res.code == 0, res.exception or res.err
    docs = strict_json_lines(res.out)  # raises on NaN/Infinity
    assert _inf_strings(docs) == []  # and no number written as the text "inf"
    assert "all_at_once" in res.out  # the infinite rate is said in words: null with "all_at_once": true


@pytest.mark.parametrize("args, message", [
    (["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-bandwidth", "0"], "--gpu-bandwidth 0 is out of range; "
        "allowed: (0, 1,000] TB/s"),
    (["disagg", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-gpus", "0"], "--num-gpus 0 is out of range; "
                                                                                "allowed: [1,"),
    (["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=1s", "--target", "0.9",
      "--tol", "nan"],
     "--tol nan is not a number"),
    ([*SIM, "--num-requests", "5", "--seed", "-1"],
     "--seed -1 is out of range; allowed: [0, 9,223,372,036,854,775,807]"),
    ([*SIM, "--num-requests", "5", "--rate", "-inf"],
     "--rate -inf is not finite; allowed: (0, 1,000,000] req/s or inf"),
    ([*SIM, "--num-requests", "5", "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization nan is not a number"),
])
def test_a_zero_or_nan_given_by_the_user_is_refused_not_replaced(args, message):
    # before: --gpu-bandwidth 0 was read as "no flag" (catalog bandwidth), --num-gpus 0 as the default 4, --tol nan
    # returned the bottom of the bracket as the boundary, --seed -1 was passed on to numpy
    res = invoke(args)
    assert res.code == 2 and not res.traceback, res.exception
    assert message in res.err


def test_simulate_out_into_a_folder_that_cannot_be_written_fails_before_the_run(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    res = invoke([*SIM, "--num-requests", "5", "--out", str(blocker / "run")])
    assert res.code == 2 and not res.traceback, res.exception
    assert "cannot write there" in res.err and "Nothing was run" in res.err


# --- benchmark files and logs: refused at the reader, naming file and field ---------------------------------------

import json  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

from kvledger.errors import FormatError  # noqa: E402
from kvledger.evidence import read_run  # noqa: E402
from kvledger.evidence.vllm_log import parse_vllm_log  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"


def _edited(tmp_path: Path, src: Path, edit) -> Path:
    """A copy of a real benchmark file (with its sidecars) after ``edit(obj)``."""
    for sib in src.parent.iterdir():
        shutil.copy(sib, tmp_path / sib.name)
    obj = json.loads(src.read_text())
    edit(obj)
    (tmp_path / src.name).write_text(json.dumps(obj))
    return tmp_path / src.name


def test_inference_perf_negative_mean_output_length_is_refused(tmp_path):
    # stage 0 of the KubeCon run, with successes.output_len.mean made negative: before, 60 × −… tokens gave
    # −74.3 output tok/s; a mean length cannot be negative
    p = _edited(tmp_path, DATA / "inference-perf" / "stage_0_lifecycle_metrics.json",
                lambda o: o["successes"]["output_len"].__setitem__("mean", -74.3))
    with pytest.raises(FormatError, match=r"successes\.output_len\.mean: -74\.3 is negative"):
        read_run(p)
    res = invoke(["goodput", str(p), "--slo", "ttft=1s"])
    assert res.code == 2 and "stage_0_lifecycle_metrics.json" in res.err


def test_llmperf_negative_completion_rate_is_refused(tmp_path):
    # duration = completed ÷ completed-per-minute × 60: a negative rate gave a negative duration
    p = _edited(tmp_path, DATA / "llmperf" / "leaderboard_summary_anyscale_70b.json",
                lambda o: o.__setitem__("results_num_completed_requests_per_min", -12.0))
    with pytest.raises(FormatError, match=r"results_num_completed_requests_per_min: -12\.0 must be > 0"):
        read_run(p)


@pytest.mark.parametrize("line", [
    "INFO 01-28 16:08:46 [gpu_worker.py:358] Available KV cache memory: 18.78.1 GiB",
    "INFO 01-28 16:09:46 [loggers.py:123] Engine 000: Avg prompt throughput: 1.2.3 tokens/s, Avg generation "
    "throughput: 5.0 tokens/s, "
    "Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 0.0%",
    "INFO 01-28 16:09:46 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
    "5.0 tokens/s, "
    "Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1..5%, Prefix cache hit rate: 0.0%",
    "INFO 01-28 16:08:46 [kv_cache_utils.py:1305] GPU KV cache size: , tokens",
    "INFO 01-28 16:08:46 [kv_cache_utils.py:1305] GPU KV cache size: " + "9" * 5000 + " tokens",
])
def test_a_malformed_number_in_a_vllm_log_line_is_not_read(line):
    # before: "[\d.]+" matched "18.78.1" and float() raised ValueError; "[\d,]+" matched "," and int("") raised;
    # 5,000 digits passed Python's int-conversion limit. Such a figure is now not read as a number at all.
    text = (LOGS / "v0.14_qwen3-1.7b.log").read_text() + line + "\n"
    log = parse_vllm_log(text, "v0.14_qwen3-1.7b.log+")
    assert log.startup.kv_cache_tokens == 175_856  # the real figure (line 2), never a garbled one
    assert abs(log.startup.available_kv_bytes / 2**30 - 18.78) < 0.005
    assert all(s.prompt_tokens_per_s != 1.2 for s in log.stats)


def test_spec_decode_sweep_sentence_when_no_rate_has_a_slower_ttft():
    # found by benchmarks/fuzz.py ("command line:1269"): speculative decoding ahead at one rate with a faster TTFT there
    # (so no rate has a slower TTFT): the sentence joined an empty list (IndexError in spec_sim._join)
    res = invoke(["spec-decode", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--num-requests", "10", "--output-tokens",
                  "16",
                  "--draft-tokens", "4", "--acceptance", "0.7", "--draft-cost-fraction", "0.05", "--rates", "1,2"])
    assert res.code == 0, res.exception
    assert "Simulator (10 requests" in res.out


def test_a_damaged_percentile_key_or_a_huge_integer_is_a_clean_error(tmp_path):
    # found by benchmarks/fuzz.py: "p99_tpot" damaged to "p999…9_tpot" became the percentile inf (OverflowError in the
    # percentile bounds); a chunk time of 10^400 in a records file overflowed float() (OverflowError)
    obj = {"backend": "vllm", "duration": 10.0, "completed": 40, "request_throughput": 4.0, "median_tpot": 0.021,
           "p" + "9" * 400 + "_tpot": 0.026}
    (tmp_path / "agg.json").write_text(json.dumps(obj))
    with pytest.raises(FormatError, match=r"percentile '9999.*is not in \[0, 100\]"):
        read_run(tmp_path / "agg.json")
    rec = {"metadata": {"source": "simulator", "source_format": "simulator"},
           "records": [{"request_id": "0", "arrival_s": 0.0, "num_prompt_tokens": 3, "num_output_tokens": 2,
                        "first_token_s": 0.1, "finish_s": 0.2, "chunk_times_s": [0.1, 10**400]}]}
    (tmp_path / "records.json").write_text(json.dumps(rec))
    with pytest.raises(FormatError, match=r"records\[0\]\.chunk_times_s"):
        read_run(tmp_path / "records.json")


def test_names_longer_than_255_bytes_are_clean_errors(tmp_path):
    # a file name of 300 bytes: os.stat raises OSError (ENAMETOOLONG), which Path.is_dir()/is_file() do not swallow
    long = "x" * 300
    res = invoke(["goodput", str(tmp_path / f"{long}.json"), "--slo", "ttft=1s"])
    assert res.code == 2 and not res.traceback and "File name too long" in res.err
    stage = str(DATA / "inference-perf" / "stage_0_lifecycle_metrics.json")
    for args in (["goodput", stage, "--slo", "ttft=1s", "--out", str(tmp_path / f"{long}.json")],
                 [*SIM, "--num-requests", "3", "--out", str(tmp_path / long)]):
        res = invoke(args)
        assert res.code == 2 and not res.traceback and "Nothing was run" in res.err, res.exception
