"""LLMServingSim's bench runs of vLLM 0.19 (../shared/data/measured-runs/llmservingsim): records reproduce the authors'
own vLLM column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvledger.errors import FormatError
from kvledger.evidence.llmservingsim import looks_like_llmservingsim, read_llmservingsim

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs" / "llmservingsim" / "bench"
PRO = RUNS / "examples" / "RTXPRO6000" / "Llama-3.1-8B" / "vllm"
needs_shared = pytest.mark.skipif(not PRO.is_dir(), reason="../shared/data/measured-runs not beside the clone")


@needs_shared
def test_rtx_pro_6000_run_matches_summary_txt():
    # validation/summary.txt, column vLLM (ms): TTFT mean 7097.2, median 9442.7, p99 19755.3; TPOT mean 32.5;
    # latency mean 28200.7 — printed to 0.1 ms, from the same queued_ts-anchored definitions
    run = read_llmservingsim(PRO / "requests.jsonl")
    recs = run.records
    assert len(recs) == 300 and run.metadata.model == "meta-llama/Llama-3.1-8B"
    ttft = np.array([r.ttft_s for r in recs]) * 1e3
    tpot = np.array([r.tpot_s for r in recs]) * 1e3
    e2e = np.array([r.e2e_s for r in recs]) * 1e3
    assert ttft.mean() == pytest.approx(7097.2, abs=0.05)
    assert np.percentile(ttft, 50) == pytest.approx(9442.7, abs=0.05)
    assert np.percentile(ttft, 99) == pytest.approx(19755.3, abs=0.05)
    assert tpot.mean() == pytest.approx(32.5, abs=0.05)
    assert e2e.mean() == pytest.approx(28200.7, abs=0.05)
    assert recs[0].arrival_s == 0.0 and run.metadata.extra["vllm_version"] == "0.19.0"
    assert looks_like_llmservingsim(PRO) and looks_like_llmservingsim(PRO.parent)


def test_damaged_file_names_the_line(tmp_path):
    f = tmp_path / "requests.jsonl"
    good = {"request_id": "a", "input_toks": 10, "output_toks": 3, "queued_ts": 1.0, "first_token_ts": 1.5,
            "last_token_ts": 2.0}
    bad = dict(good, request_id="b", first_token_ts=3.0)  # first token after the last
    f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(FormatError, match="line 2"):
        read_llmservingsim(f)
    f.write_text(json.dumps(good) + "\n")
    run = read_llmservingsim(f)
    assert run.records[0].ttft_s == 0.5 and run.records[0].tpot_s == 0.25  # (2.0 − 1.5)/(3 − 1)
