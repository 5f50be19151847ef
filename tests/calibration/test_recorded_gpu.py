"""validate and calibrate replay a run on the GPU its record names, never on another (fresh-user trial: an RTX 4090
run validated with --gpu H100 ran, and calibrate --scope gpu --gpu RTX-4090 fitted a 4090 profile on an RTX PRO 6000
run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.calibration.recorded_gpu import recorded_gpu
from kvledger.cli.main import app
from kvledger.errors import InputError

RUN = (Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs" / "llmservingsim" / "bench"
       / "examples" / "RTX4090" / "Llama-3.1-8B" / "vllm")


def test_a_recorded_gpu_name_is_read_through_the_catalog():
    # meta.json's device_name is nvidia-smi's full name, which the catalog's short names do not take; a GKE
    # accelerator label is one of them; a name the catalog does not know is not checked
    assert recorded_gpu("NVIDIA GeForce RTX 4090") == "NVIDIA GeForce RTX 4090"
    assert recorded_gpu("nvidia-h100-80gb") == "NVIDIA H100 80GB SXM5"
    assert recorded_gpu("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB SXM5"
    assert recorded_gpu("Acme Tensor 9000") is None and recorded_gpu(None) is None


@pytest.mark.skipif(not RUN.is_dir(), reason="../shared/data/measured-runs not beside the clone")
def test_validate_refuses_a_run_on_another_gpu_than_its_record_names():
    res = CliRunner().invoke(app, ["validate", str(RUN), "--gpu", "H100"])
    assert isinstance(res.exception, InputError), res.output
    text = " ".join(str(res.exception).split())
    assert "the run's record says it ran on NVIDIA GeForce RTX 4090" in text
    assert "--gpu H100 is the NVIDIA H100 80GB SXM5" in text
    assert CliRunner().invoke(app, ["validate", str(RUN), "--gpu", "RTX-4090"]).exit_code == 0
