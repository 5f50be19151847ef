"""validate --json's "rate": the request rate a per-request file states (a trial's vLLM file at request_rate 10.0 gave
null), a stage's requested rate, and null for none or for inf (not a strict JSON number)."""

from __future__ import annotations

import math
from types import SimpleNamespace

from kvledger.calibration.validate import stated_rate
from kvledger.records import RunMetadata


def target(rate: float | None, stage_rate: float | None = None) -> SimpleNamespace:
    measured = SimpleNamespace(metadata=RunMetadata("f.json", "vllm-bench-serve", request_rate=rate))
    stage = None if stage_rate is None else SimpleNamespace(requested_rate=stage_rate)
    return SimpleNamespace(run=SimpleNamespace(measured=measured), stage=stage)


def test_a_per_request_filesstated_rate_is_the_runs_rate():
    assert stated_rate(target(10.0)) == 10.0


def test_a_stages_requested_rate_wins():
    assert stated_rate(target(None, 37.97)) == 37.97


def test_no_rate_or_an_infinite_one_is_null():
    assert stated_rate(target(None)) is None and stated_rate(target(math.inf)) is None
