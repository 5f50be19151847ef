"""The benchmark engineer's trial: a folder of mixed benchmark files is refused with the files named, not read as the
one LLMServingSim run whose requests.jsonl it happens to hold (the others were left out unread, exit 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_run import cli_json

EV = Path(__file__).resolve().parents[1] / "evidence" / "data"
STAGE = EV / "inference-perf" / "stage_0_lifecycle_metrics.json"
# two requests as LLMServingSim's runner writes them (bench/examples/RTXPRO6000/Llama-3.1-8B/vllm/requests.jsonl,
# its first two lines)
REQUESTS = [
    {"request_id": "bench-0", "input_toks": 2358, "output_toks": 531, "arrival_time": 1777142838.338653,
     "queued_ts": 479748.340626232, "scheduled_ts": 479748.34067238, "first_token_ts": 479748.510151426,
     "last_token_ts": 479764.054028055},
    {"request_id": "bench-1", "input_toks": 1034, "output_toks": 769, "arrival_time": 1777142838.6237123,
     "queued_ts": 479748.625554681, "scheduled_ts": 479748.625559334, "first_token_ts": 479748.688143559,
     "last_token_ts": 479772.123050648},
]


def _requests(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "requests.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in REQUESTS))
    return f


def test_a_run_folder_with_other_benchmark_files_beside_it_is_refused_naming_them(tmp_path, cli_entry):
    mixed = tmp_path / "mixed"
    req = _requests(mixed)
    (mixed / "meta.json").write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B"}))  # the run's own: no matter
    (mixed / "notes.txt").write_text("hi")  # not a data file: no matter
    # alone, the folder is the run: 2 requests; TTFT 0.1695 and 0.0626 s, both ≤ 1 s, so 2 good
    assert cli_json("goodput", str(mixed), "--slo", "ttft=1s")["num_good"] == 2
    shutil.copy(STAGE, mixed / STAGE.name)
    for cmd in (["goodput", str(mixed), "--slo", "ttft=1s"], ["validate", str(mixed), "--gpu", "H100"],
                ["calibrate", str(mixed), "--gpu", "H100"]):
        rc, out, err = cli_entry(*cmd)
        assert rc == 2 and "Traceback" not in err and out == "", (cmd, out)
        assert "holds an LLMServingSim run's requests.jsonl and 1 other data file(s) beside it" in err
        assert f"pass the files themselves: {req} {mixed / STAGE.name}" in err
        assert len(err.strip().splitlines()) == 1  # one paragraph


def test_a_folder_of_benchmark_files_names_them_instead_of_saying_it_holds_none(tmp_path, cli_entry):
    folder = tmp_path / "two"
    folder.mkdir()
    shutil.copy(STAGE, folder / "a_run.json")  # not named as inference-perf names its stages: still a data file
    (folder / "plot.png").write_bytes(b"\x89PNG")
    rc, _, err = cli_entry("goodput", str(folder), "--slo", "ttft=1s")
    assert rc == 2 and "holds no run files" not in err
    assert "is a folder of 1 data file(s), not one run folder" in err and str(folder / "a_run.json") in err


def test_requests_with_null_token_times_count_as_failed_not_as_an_unreadable_run(tmp_path):
    # LLMServingSim's runner (bench/core/runner.py, _record_from_metrics) writes every time null for a request it got
    # no metrics for; a row with its queued_ts but no token times is read the same way. Before, one such row made the
    # whole run exit 2 ("field 'first_token_ts' must be a finite number ≥ 0, got None").
    f = _requests(tmp_path / "run")
    rows = [REQUESTS[0],
            {**REQUESTS[1], **{k: None for k in ("arrival_time", "queued_ts", "scheduled_ts", "first_token_ts",
                                                  "last_token_ts")}},
            {**REQUESTS[1], "request_id": "bench-2", "queued_ts": 479749.0, "first_token_ts": None,
             "last_token_ts": None}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = cli_json("goodput", str(f), "--slo", "ttft=1s")
    # bench-0 alone finished: TTFT 479748.510151426 − 479748.340626232 = 0.1695 s ≤ 1 s, so 1 good of 3 requests;
    # the run spans its first arrival (bench-0's queued_ts) to its last finish, 479764.054028055 − 479748.340626232 =
    # 15.7134 s: 1 / 15.7134 = 0.06364 good req/s, and 531 / 15.7134 = 33.79 good output tok/s
    assert (d["num_requests"], d["num_failed"], d["num_good"]) == (3, 2, 1)
    assert d["duration_s"] == pytest.approx(15.713401823, abs=1e-6)
    assert d["goodput_req_per_s"] == pytest.approx(0.063640, rel=1e-4)
    assert d["goodput_output_tok_per_s"] == pytest.approx(33.7932, rel=1e-4)
    assert any("2 request(s) with no first or last token time" in n and "1 with no queued_ts either" in n
               for n in d["notes"])


def test_a_detailed_vllm_file_missing_one_array_says_which_not_that_it_was_run_without_save_detailed(tmp_path):
    # vllm bench serve --save-detailed writes input_lens, output_lens, ttfts and itls; here ttfts was renamed ttft_s,
    # so no request's TTFT is known and only the aggregates bound goodput: median 90 ms ≤ 300 ms, so at least
    # ⌈4 / 2⌉ = 2 of 4 requests; p99 397 ms > 300 ms, so at least one misses: at most 3
    itl = [0.02] * 9
    run = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": 4, "request_rate": 2.0,
           "duration": 4.0, "completed": 4, "failed": 0, "total_input_tokens": 400, "total_output_tokens": 40,
           "request_throughput": 1.0, "output_throughput": 10.0, "mean_ttft_ms": 175.0, "median_ttft_ms": 90.0,
           "p99_ttft_ms": 397.0, "input_lens": [100] * 4, "output_lens": [10] * 4,
           "ttft_s": [0.08, 0.1, 0.12, 0.4], "itls": [itl] * 4}
    f = tmp_path / "renamed.json"
    f.write_text(json.dumps(run))
    d = cli_json("goodput", str(f), "--slo", "ttft=300ms")
    assert d["estimate"] is True and (d["num_good"], d["num_good_upper"]) == (2, 3)
    assert any(n.startswith("per-request arrays input_lens, output_lens, itls present but ttfts missing")
               for n in d["notes"])
    assert not any("run without --save-detailed" in n for n in d["notes"])


PRO = (Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs" / "llmservingsim" / "bench"
       / "examples" / "RTXPRO6000" / "Llama-3.1-8B" / "vllm")


@pytest.mark.skipif(not PRO.is_dir(), reason="../shared/data/measured-runs not beside the clone")
def test_a_poor_fit_of_a_run_without_its_launch_record_names_the_flags_it_defaulted(tmp_path):
    # The RTX PRO 6000 run's requests.jsonl without its meta.json: replayed on vLLM 0.33's defaults (max_num_seqs
    # 1,024, token budget 8,192) instead of the launch's 0.19.0, 128 and 2,048, the fit is poor (throughput +36.5%)
    # and had no hint; the hints now name the flags, and with them the fit is the one meta.json gives (FLOP fraction
    # 0.7255, bandwidth 0.7627, throughput +2.0%: `kvledger calibrate` on the run folder)
    run = tmp_path / "nometa"
    run.mkdir()
    shutil.copy(PRO / "requests.jsonl", run / "requests.jsonl")
    base = ("calibrate", str(run), "--gpu", "rtx-pro-6000", "--model", "meta-llama/Llama-3.1-8B", "--scope", "gpu")
    poor = cli_json(*base)["fit_quality"]
    assert poor["poor"] is True
    assert [h.split(" as ")[0] for h in poor["hints"]] == ["--max-model-len", "--engine-version",
                                                            "--max-num-seqs and --max-num-batched-tokens"]
    assert "neither the run files nor a launch record beside them state it" in poor["hints"][1]
    good = cli_json(*base, "--engine-version", "0.19.0", "--max-num-seqs", "128", "--max-num-batched-tokens", "2048")
    assert good["fit_quality"]["poor"] is False and good["fit_quality"]["hints"] == []
    assert good["flops_fraction"] == pytest.approx(0.7255, abs=1e-4)
    assert good["bandwidth_fraction"] == pytest.approx(0.7627, abs=1e-4)


def test_kvledger_own_records_replay_under_the_model_they_name(tmp_path):
    # simulate --out writes the model as kvledger names an alias, "meta-llama/Llama-3.1-8B (config of
    # meta-llama/Meta-Llama-3.1-8B)"; validate and calibrate took that from the record and refused it as "not bundled
    # and the Hub unreachable". Read back, it is the bundled config again: 32 layers × 8 KV heads × 128 × 2 (K and V) ×
    # 2 B = 131,072 B per token, so vLLM 0.33's 55.00 GiB for KV on an H100 is 59,055,800,320 / (131,072 × 16) =
    # 28,160 blocks, and the replay of the simulator's own run reproduces it exactly (TTFT mean error 0)
    from kvledger.catalog.models import load_model

    spec = load_model("meta-llama/Llama-3.1-8B (config of meta-llama/Meta-Llama-3.1-8B)")
    assert spec.name == "meta-llama/Llama-3.1-8B (config of meta-llama/Meta-Llama-3.1-8B)"
    assert load_model("my-llama (config of meta-llama/Meta-Llama-3.1-8B)").name == "meta-llama/Meta-Llama-3.1-8B"
    out = tmp_path / "sim"
    cli_json("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "fixed:1024",
             "--output-lengths", "fixed:128", "--concurrency", "8", "--num-requests", "100", "--out", str(out))
    d = cli_json("validate", str(out / "records.parquet"), "--gpu", "H100")
    assert d["model"] == "meta-llama/Llama-3.1-8B (config of meta-llama/Meta-Llama-3.1-8B)"
    ttft = next(r for r in d["comparison"]["rows"] if r["metric"] == "TTFT mean")
    assert ttft["rel_error"] == pytest.approx(0.0, abs=1e-9)
    assert d["engine"]["num_gpu_blocks"] == 28160


def test_a_jsonl_file_whose_last_line_was_cut_says_so(tmp_path, cli_entry):
    # a run killed mid-write: the last line stops inside its object. Said as cut off, with the lines before it
    # (the 2 requests of REQUESTS, then the first 40 characters of a third); a bad line in the middle is not
    f = _requests(tmp_path / "run")
    f.write_text(f.read_text() + json.dumps(REQUESTS[0])[:40])
    rc, _, err = cli_entry("goodput", str(f), "--slo", "ttft=1s")
    assert rc == 2 and "line 3: not JSON" in err
    assert "it is the file's last line and stops before its JSON closes, so it looks cut off" in err
    assert "remove that line to read the 2 before it" in err
    f.write_text(json.dumps(REQUESTS[0])[:40] + "\n" + "".join(json.dumps(r) + "\n" for r in REQUESTS))
    rc, _, err = cli_entry("goodput", str(f), "--slo", "ttft=1s")
    assert rc == 2 and "looks cut off" not in err
    # the same for a JSON Lines benchmark file (vLLM's --append-result, SGLang's bench_serving): its third run cut
    g = tmp_path / "runs.jsonl"
    run = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": 4, "completed": 4,
           "duration": 4.0, "request_throughput": 1.0, "mean_ttft_ms": 100.0, "median_ttft_ms": 90.0}
    g.write_text((json.dumps(run) + "\n") * 2 + json.dumps(run)[:30])
    rc, _, err = cli_entry("goodput", str(g), "--slo", "ttft=1s")
    assert rc == 2 and "line 3, column" in err and "remove that line to read the 2 before it" in err


def test_kvledger_records_replay_on_the_engine_that_wrote_them(tmp_path):
    # simulate --engine-version 0.19.0 --max-num-seqs 64 --out: validate replayed the records on 0.33's defaults
    # (max_num_seqs 1,024), so its own run came back at TPOT +67.2% and throughput +19.9% (96 users on 64 slots). The
    # records' engine settings and version are now its launch record: the replay is the run, every error 0
    out = tmp_path / "sim"
    cli_json("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine-version", "0.19.0", "--max-num-seqs",
             "64", "--prompt-lengths", "fixed:1024", "--output-lengths", "fixed:128", "--concurrency", "96",
             "--num-requests", "200", "--out", str(out))
    d = cli_json("validate", str(out / "records.parquet"), "--gpu", "H100")
    rows = {r["metric"]: r for r in d["comparison"]["rows"]}
    for metric in ("TTFT mean", "TPOT mean", "throughput"):
        assert rows[metric]["rel_error"] == pytest.approx(0.0, abs=1e-9), metric
    assert d["engine"]["max_num_seqs"] == 64
    assert not any("engine version: neither the run's record" in n for n in d["notes"])
