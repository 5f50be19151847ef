"""`kvledger simulate --engine sglang` says how much decode time SGLang's prefill steps paused; the figure is checked
against the run's own step log (steps.parquet), an independent reading of the same steps, with and without --out (the
step log kept or the arrival stretches run)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
from cli_run import cli_json, run_cli

RUN = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "200", "--rate", "8")


def test_the_paused_share_matches_the_step_log(tmp_path):
    out = " ".join(run_cli(*RUN, "--engine", "sglang", "--out", str(tmp_path / "o")).stdout.split())
    steps = pq.read_table(tmp_path / "o" / "steps.parquet").to_pydict()
    recs = pq.read_table(tmp_path / "o" / "records.parquet").to_pylist()
    start, dur = np.array(steps["start_s"]), np.array(steps["duration_s"])
    pure = (np.array(steps["num_prefill_seqs"]) > 0) & (np.array(steps["num_decode_seqs"]) == 0)
    assert pure.sum() > 0 and not ((np.array(steps["num_prefill_seqs"]) > 0) & ~pure).any()  # SGLang: no mixed step
    ps, pe = start[pure], start[pure] + dur[pure]
    paused = span = 0.0
    for r in recs:  # each request waits out the prefill steps between its first token and its last
        t = r["chunk_times_s"]
        if t is not None and len(t) > 1:
            span += t[-1] - t[0]
            inside = (ps >= t[0] - 1e-9) & (pe <= t[-1] + 1e-9)
            paused += float(np.sum(pe[inside] - ps[inside]))
    # 125.96 of 508.5 request-s on this run: 24.8% (read off the step log above)
    said = (f"note: SGLang's prefill steps paused the running decodes (no mixed batches by default): "
            f"{paused / span:.1%} of their decode time ({paused:,.4g} of {span:,.4g} request-s, first token to last)")
    assert said in out and f"{paused / span:.1%}" == "24.8%"
    # without --out no token times and no step log are kept: the arrival stretches run the prefill steps and count
    # them; the same line
    notes = cli_json(*RUN, "--engine", "sglang", "--json")["notes"]
    assert any(n.startswith(said.removeprefix("note: ")) for n in notes)


def test_without_the_flag_no_line():
    # vLLM's chunked prefill mixes decodes into the prefill step: nothing paused, no line
    assert not any("paused the running decodes" in n for n in cli_json(*RUN, "--json")["notes"])
