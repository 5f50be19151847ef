"""``cost`` refuses a KV tier's price without its size, an unknown team capability and an unknown decision factor at
its input boundary (``cli.cost_boundary.check_bill``), before any file is read or simulation run, in the words
pricing used to refuse them with after the run."""

from __future__ import annotations

import pytest
from cli_run import MODEL, records_file, refused

from kvledger.analyses.serving import cost_compute
from kvledger.cli import cost_boundary

_SIM = ("cost", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "100", "--prompt-lengths", "uniform:512:1024",
        "--output-lengths", "uniform:64:128", "--slo", "ttft=500ms,tpot=50ms")

_BAD = [
    (("--host-memory-usd-per-gib-month", "1"),
     "--host-memory-usd-per-gib-month prices a host KV tier: give its size with --kv-tier-host"),
    (("--nvme-usd-per-gib-month", "0.2"), "--nvme-usd-per-gib-month prices a nvme KV tier: give its size with "
                                          "--kv-tier-nvme"),
    (("--team-capability", "guru"), "team capability must be one of experienced, some, none, got 'guru'"),
    (("--data-sovereignty", "maybe"), "data_sovereignty must be one of required, preferred, not_required, got 'maybe'"),
    (("--model-control", "xyz"), "model_control must be one of custom_weights, open_weights, any, got 'xyz'"),
]


@pytest.fixture
def nothing_runs(monkeypatch):
    """Reading a file, simulating or pricing fails the test: the refusal must come before any of them."""
    def never(*args, **kwargs):
        raise AssertionError("the run was read or simulated before the input was refused")

    for mod, name in ((cost_boundary, "compute_cost"), (cost_compute, "sim_run"), (cost_compute, "file_run")):
        monkeypatch.setattr(mod, name, never)


@pytest.mark.parametrize(("flags", "words"), _BAD)
def test_a_bad_bill_input_is_refused_before_the_simulation(nothing_runs, flags, words):
    assert refused(*_SIM, *flags) == words


@pytest.mark.parametrize(("flags", "words"), _BAD[:1] + _BAD[2:4])
def test_a_bad_bill_input_is_refused_before_the_file_is_read(nothing_runs, tmp_path, flags, words):
    path = records_file(tmp_path)
    assert refused("cost", str(path), "--gpu", "H100", "--slo", "ttft=200ms", *flags) == words
