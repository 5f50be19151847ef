"""The benchmark engineer's trial: a folder of mixed benchmark files is refused with the files named, not read as the
one LLMServingSim run whose requests.jsonl it happens to hold (the others were left out unread, exit 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
