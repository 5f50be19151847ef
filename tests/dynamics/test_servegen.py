"""ServeGen-style generation from the bundled per-client distributions."""

from __future__ import annotations

import ast
import json
import math

import numpy as np
import pytest

from kvledger.dynamics.workload.servegen import generate_servegen, list_clients, load_client
from kvledger.errors import FormatError, InputError, UnknownNameError


def test_bundled_clients():
    assert list_clients() == [("deepseek-r1", c) for c in (3, 12, 13, 35, 48, 54)] + [("m-large", 143)]


def test_client_windows_from_the_trace_csv():
    c = load_client("deepseek-r1", 35)
    assert len(c.windows) == 144  # one day of 600 s windows
    w = c.windows[0]
    # chunk-35-trace.csv line 1: 0,8.34,1.3590915521086142,Gamma,0.541380457558393,0.21162503501556937
    assert (w.start_s, w.rate_per_s, w.pattern) == (0.0, 8.34, "Gamma")
    assert (w.shape, w.scale) == (0.541380457558393, 0.21162503501556937)
    # Gamma mean gap = a·scale = 0.11457 s ≈ 1/8.34 s (the fit and the measured rate agree to 4%)
    assert w.shape * w.scale == pytest.approx(1 / 8.34, rel=0.05)
    assert sum(1 for w in c.windows if w.pattern is None) == 28  # idle windows (empty pattern, zeros)
    assert len(load_client("m-large", 143).windows) == 2016  # 14 days


def test_request_count_and_lengths_match_the_distributions():
    c = load_client("deepseek-r1", 35)
    reqs = generate_servegen([c], start_s=0.0, duration_s=3600.0, seed=0)
    # the first six windows' rates × 600 s sum to 39,139 (all whole numbers); each window draws ceil(rate·600)
    # gaps rescaled to end exactly at the window end, and the last one is dropped when it lands on the end
    assert 39139 - 6 <= len(reqs) <= 39139
    a = np.array([r.arrival_s for r in reqs])
    assert a.min() >= 0 and a.max() < 3600 and np.all(np.diff(a) >= 0)
    # 6 h window 0 of chunk-35-dataset.json: input mean 51.81, output mean 1,483.68 tokens
    pmf_in = ast.literal_eval(json.loads(c.dataset_path.read_text())["0"]["input_tokens"])
    assert sum(k * v for k, v in pmf_in.items()) == pytest.approx(51.81, abs=0.01)
    assert np.mean([r.num_prompt_tokens for r in reqs]) == pytest.approx(51.81, rel=0.02)
    assert np.mean([r.num_output_tokens for r in reqs]) == pytest.approx(1483.68, rel=0.03)
    assert {r.client_id for r in reqs} == {"deepseek-r1/35"}


def test_deterministic_and_rate_scaling():
    clients = [load_client("deepseek-r1", 48), load_client("deepseek-r1", 54)]
    a = generate_servegen(clients, start_s=7200, duration_s=1800, seed=4)
    assert a == generate_servegen(clients, start_s=7200, duration_s=1800, seed=4)
    offered = sum(c.mean_rate_per_s(7200, 9000) for c in clients)
    doubled = generate_servegen(clients, start_s=7200, duration_s=1800, seed=4, rate=2 * offered)
    assert len(doubled) / len(a) == pytest.approx(2.0, rel=0.01)
    assert generate_servegen(clients, start_s=7200, duration_s=1800, seed=4, rate_scale=2.0) == doubled
    with pytest.raises(InputError, match="not both"):
        generate_servegen(clients, start_s=0, duration_s=60, seed=0, rate=1.0, rate_scale=2.0)


def test_every_bundled_active_window_has_length_distributions():
    # so the "borrow the nearest 6 h window" fallback below is never used on bundled data
    for model, number in list_clients():
        c = load_client(model, number)
        dataset = json.loads(c.dataset_path.read_text())
        for w in c.windows:
            if w.pattern:
                assert dataset[str(int(w.start_s // 21600) * 21600)]["input_tokens"] != "{}"


def test_empty_length_window_borrows_the_nearest_one(tmp_path):
    d = tmp_path / "reason" / "toy"
    d.mkdir(parents=True)
    (d / "chunk-4-trace.csv").write_text("21600,0.2,1.0,Gamma,1.0,5.0\n")
    (d / "chunk-4-dataset.json").write_text(json.dumps({
        "0": {"input_tokens": "{11: 0.5, 12: 0.5}", "output_tokens": "{2: 1.0}"},
        "21600": {"input_tokens": "{}", "output_tokens": "{}"},
        "64800": {"input_tokens": "{99: 1.0}", "output_tokens": "{9: 1.0}"}}))
    reqs = generate_servegen([load_client("toy", 4, data_dir=tmp_path)], start_s=21600, duration_s=600, seed=0)
    # window 21600 is empty; window 0 (21,600 s away) is nearer than 64800 (43,200 s away)
    assert reqs and {r.num_prompt_tokens for r in reqs} == {11, 12} and {r.num_output_tokens for r in reqs} == {2}


def test_unknown_client():
    with pytest.raises(UnknownNameError):
        load_client("deepseek-r1", 999)


def test_malformed_files_name_line_and_column(tmp_path):
    d = tmp_path / "reason" / "toy"
    d.mkdir(parents=True)
    (d / "chunk-1-trace.csv").write_text("0,1.5,1.0,Gamma,1.0,0.66\n600,fast,1.0,Gamma,1.0,0.5\n")
    (d / "chunk-1-dataset.json").write_text(json.dumps({"0": {"input_tokens": "{10: 1.0}",
                                                              "output_tokens": "{5: 1.0}"}}))
    with pytest.raises(FormatError) as err:
        load_client("toy", 1, data_dir=tmp_path)
    assert "chunk-1-trace.csv" in str(err.value) and "line 2, column 2" in str(err.value)
    (d / "chunk-1-trace.csv").write_text("0,1.5,1.0,Gamma,1.0,0.66\n")
    (d / "chunk-1-dataset.json").write_text(json.dumps({"0": {"input_tokens": "{10: oops}", "output_tokens": "{}"}}))
    client = load_client("toy", 1, data_dir=tmp_path)
    with pytest.raises(FormatError, match="window 0, field 'input_tokens'"):
        generate_servegen([client], start_s=0, duration_s=600, seed=0)


def test_toy_client_exact_lengths(tmp_path):
    d = tmp_path / "language" / "toy"
    d.mkdir(parents=True)
    (d / "chunk-2-trace.csv").write_text("0,0.5,1.0,Weibull,1.0,2.0\n600,0,0,,0,0\n")
    (d / "chunk-2-dataset.json").write_text(json.dumps({"0": {"input_tokens": "{7: 1.0}",
                                                              "output_tokens": "{3: 1.0}"}}))
    reqs = generate_servegen([load_client("toy", 2, data_dir=tmp_path)], start_s=0, duration_s=1200, seed=1)
    # rate 0.5 req/s over one 600 s window: ceil(300) gaps rescaled to 600 s → 299 or 300 requests; idle window adds
    # none
    assert len(reqs) in (299, 300) and max(r.arrival_s for r in reqs) < 600
    assert {(r.num_prompt_tokens, r.num_output_tokens) for r in reqs} == {(7, 3)}
    assert math.isclose(load_client("toy", 2, data_dir=tmp_path).mean_rate_per_s(0, 1200), 0.25)
