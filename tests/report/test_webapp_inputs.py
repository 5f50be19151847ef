"""The web app reads bundled names, and local files only inside ``kvledger ui --data-dir``; bad parameters answer 400
with words, not pydantic's."""

from __future__ import annotations

import json
from importlib.resources import files

from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app

MODEL = "meta-llama/Llama-3.1-8B"


def _get(client: TestClient, **params):  # work is a JSON POST (webapp_guard)
    return client.post("/api/plan", json={"model": MODEL, "gpu": "H100", **params})


def test_without_a_data_dir_no_local_file_is_read(tmp_path):
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2"}')
    for model in ("/etc/passwd", str(secret), "../../../etc/passwd"):
        r = _get(client, model=model)
        assert r.status_code == 400 and "--data-dir" in r.json()["error"] and "hunter2" not in r.text
    r = _get(client, gpu=str(tmp_path / "gpu.json"))
    assert r.status_code == 400 and "--data-dir" in r.json()["error"]
    assert _get(client).status_code == 200  # a bundled name still plans


def test_a_data_dir_allows_its_files_and_nothing_outside(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    cfg = (files("kvledger.catalog") / "data" / "models" / "meta-llama--Meta-Llama-3.1-8B.json").read_text()
    (data / "llama.json").write_text(cfg)
    (tmp_path / "outside.json").write_text(cfg)
    (data / "link.json").symlink_to(tmp_path / "outside.json")
    client = TestClient(create_app(data), base_url="http://127.0.0.1")
    ok = _get(client, model="llama.json")  # relative to the data folder
    # the same config as the bundled one: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token
    assert ok.status_code == 200 and json.loads(ok.text)["headline"]["kv_bytes_per_token_per_gpu"] == 131072
    for model in ("../outside.json", str(tmp_path / "outside.json"), "link.json"):
        r = _get(client, model=model)
        assert r.status_code == 400 and "outside the data folder" in r.json()["error"]


def test_bad_numbers_are_named_in_words():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    # a number written as a string is refused as such (the request is strict: webapp_requests.py) ...
    r = _get(client, gpu_memory_utilization="nan")
    assert r.status_code == 400 and r.json()["error"] == ("invalid parameter: gpu_memory_utilization must be a number, "
                                                          "got 'nan'")
    # ... and a JSON NaN by `plan --gpu-memory-utilization`'s range, under the request's field, not the CLI's flag
    r = client.post("/api/plan", content=f'{{"model": "{MODEL}", "gpu": "H100", "gpu_memory_utilization": NaN}}',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == ("gpu_memory_utilization nan is not a number; allowed: (0, 1] "
                                                          "(fraction)")
    r = _get(client, tp="two")
    assert r.status_code == 400 and r.json()["error"] == "invalid parameter: tp must be a whole number, got 'two'"


def test_ui_refuses_a_data_dir_that_is_not_a_folder(tmp_path):
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, ["ui", "--data-dir", str(tmp_path / "missing"), "--port", "8765"])
    assert res.exit_code != 0 and f"--data-dir {tmp_path / 'missing'}: not a folder" in str(res.exception)


def test_a_trace_without_arrival_times_is_offered_as_lengths_never_replayed():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    c = client.get("/api/choices").json()  # the trace catalog's list, arxiv (lengths only) with the rest
    assert c["traces"] == ["azure-conv", "azure-code", "mooncake", "mooncake-synthetic", "arxiv"]
    assert c["lengths_only_traces"] == ["arxiv"]
    r = client.post("/api/serving", json={"model": MODEL, "gpu": "H100", "slo": "ttft=2s", "trace": "arxiv"})
    assert r.status_code == 400 and r.json()["error"] == (
        "trace 'arxiv' has request lengths but no arrival times, and the serving panel's capacity search replays a "
        "trace's own arrivals at scaled rates; pick one with arrival times: azure-conv, azure-code, mooncake, "
        "mooncake-synthetic; or its lengths with Poisson arrivals: prompt_lengths trace:arxiv:prompt and "
        "output_lengths trace:arxiv:output (the form fills them in when you pick it)")
