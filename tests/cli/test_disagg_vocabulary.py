"""`kvledger disagg` takes the vocabulary of plan and simulate (a user trial): --tensor-parallel-size as --tp,
--step-cost roofline|calibrated|PROFILE, --kv-cache-dtype; a lengths-only trace without --rate is told to give --rate
(disagg has no --concurrency)."""

from __future__ import annotations

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError

runner = CliRunner(env={"COLUMNS": "250"})


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    trace = tmp_path_factory.mktemp("ds") / "ds.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n" + "512,64\n" * 40)  # the trial's 512 in / 64 out
    return ["disagg", "facebook/opt-13b", "--gpu", "A100-80GB", "--trace", str(trace), "--num-gpus", "2", "--no-tune"]


def test_tensor_parallel_size_is_tp_and_roofline_is_the_default(base):
    d = cli_json(*base, "--rate", "4")
    assert cli_json(*base, "--rate", "4", "--tensor-parallel-size", "1", "--step-cost", "roofline") == d


def test_step_cost_calibrated_uses_the_bundled_table(base):
    d = cli_json(*base, "--rate", "4", "--step-cost", "calibrated")
    assert d["step_cost"]["name"] == "distserve-vllm:facebook/opt-13b@a100-80gb/tp1"  # measured at A100 80GB, TP 1
    assert any("bundled measurements" in n for n in d["notes"])
    with pytest.raises(KvLedgerError, match="Known: roofline, calibrated, calibrated:SOURCE:MODEL@GPU/tpN"):
        runner.invoke(app, [*base, "--rate", "4", "--step-cost", "bogus"], catch_exceptions=False)
    with pytest.raises(KvLedgerError, match="measured at one TP"):
        runner.invoke(app, [*base, "--rate", "4", "--step-cost", "calibrated", "--num-gpus", "3", "--decode-tp", "2"],
                      catch_exceptions=False)


def test_fp8_kv_halves_the_bytes_each_transfer_moves(base):
    def wire(dtype):
        d = cli_json(*base, "--rate", "4", "--kv-cache-dtype", dtype, "--prefill-gpus", "1", "--decode-gpus", "1")
        return d["deployments"][1]["transfer"]["wire_s"]["mean"]

    # every prompt is 512 tokens: the wire time is 512 × KV bytes per token ÷ the link; 1 byte against 2 halves it
    assert wire("fp8") == pytest.approx(wire("auto") / 2, rel=1e-9)


def test_a_lengths_only_trace_without_rate_is_told_to_give_rate(base):
    with pytest.raises(KvLedgerError, match="give --rate R") as e:
        runner.invoke(app, base, catch_exceptions=False)
    assert "it has no --concurrency" in str(e.value) and "--concurrency N for a closed loop" not in str(e.value)
