"""validate says when the run it checks is one of the points behind the stored error bands (a fresh-user trial found
kubecon's 1 req/s TTFT error, −71.14%, to be exactly the uncalibrated TTFT band's lower end: the band was built with
that very stage)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.ledgers.band_members import band_member, held_out_coverage
from kvledger.ledgers.error_band import stored_bands

runner = CliRunner()
IP = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"


def test_the_bundled_kubecon_stage_is_a_member_by_content_and_an_edited_copy_is_not(tmp_path):
    # the fixture is kubecon's vllm+batch_size stage 0, byte for byte (its manifests launch --max-num-seqs=192)
    assert band_member(IP / "stage_0_lifecycle_metrics.json") == "kubecon vllm+batch_size"
    copy = tmp_path / "elsewhere.json"
    shutil.copy(IP / "stage_0_lifecycle_metrics.json", copy)
    assert band_member(copy) == "kubecon vllm+batch_size"  # the bytes, not the path
    copy.write_bytes(copy.read_bytes() + b"\n")
    assert band_member(copy) is None
    assert band_member(tmp_path / "missing.json") is None and band_member(tmp_path) is None


def test_validate_says_the_band_is_in_sample_with_the_held_out_coverage():
    res = runner.invoke(app, ["validate", str(IP / "stage_0_lifecycle_metrics.json"), "--gpu", "H100", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["band_member"] == "kubecon vllm+batch_size"
    # the stored file's leave-one-deployment-out counts for the regime that priced it (uncalibrated/dense/vllm)
    cov = stored_bands()["coverage_leave_one_out"]["uncalibrated/dense/vllm"]
    assert held_out_coverage("uncalibrated/dense/vllm")["ttft_mean"] == tuple(cov["ttft_mean"])
    note = next(n for n in d["notes"] if n.startswith("bands in sample: "))
    assert note.startswith("bands in sample: this run's file is one of those the stored bands were built from "
                           "(deployment kubecon vllm+batch_size): the errors of its deployment")
    assert "helped set them, so its band is not held out" in note
    assert (f"the uncalibrated/dense/vllm bands covered {cov['ttft_mean'][0]} of {cov['ttft_mean'][1]} mean-TTFT, "
            f"{cov['tpot_mean'][0]} of {cov['tpot_mean'][1]} mean-TPOT") in note
