"""Size flags: one rule for a bare number (GiB, vLLM's ``--kv-offloading-size`` convention) and bounds at real
devices and hosts."""

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.analysis_opts import gib_option
from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.units import GiB, parse_memory_flag

runner = CliRunner()


def test_a_bare_number_is_gib_on_every_size_flag():
    # "--weights-memory 15" is 15 GiB, as "--kv-offloading-size 15" is in vLLM (vllm/config/cache.py: GiB)
    assert parse_memory_flag("15", what="--weights-memory") == 15 * GiB
    assert parse_memory_flag("80", what="--gpu-memory") == 80 * GiB
    assert gib_option("64", "--kv-offloading-size") == 64.0 and gib_option("64GiB", "--kv-offloading-size") == 64.0


def test_units_zero_and_byte_counts_with_their_unit():
    assert parse_memory_flag("14.99GiB", what="x") == int(14.99 * GiB)
    assert parse_memory_flag("0", what="x") == 0  # "no non-torch memory" is a real answer
    # a byte count as vLLM's debug lines print it (16,094,076,928 B = 14.99 GiB) needs its unit
    assert parse_memory_flag("16094076928B", what="x") == 16_094_076_928
    with pytest.raises(InputError, match="unknown unit"):
        parse_memory_flag("15 parsecs", what="x")


def test_gpu_memory_beyond_the_largest_catalog_gpu_is_refused():
    # 8000 GiB planned 7,342 GiB of KV; the catalog's largest GPU holds 287.71 GiB (MI355X, catalog/data/gpus.csv)
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-memory", "8000GiB"])
    assert isinstance(res.exception, InputError)  # main.run() prints it in one paragraph and exits 2
    msg = " ".join(str(res.exception).split())
    assert "8,000.00 GiB is more memory than any GPU holds" in msg and "287.71 GiB" in msg
    # a bare 80 is 80 GiB and plans
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-memory", "80", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["gpu"]["memory_bytes"] == 80 * GiB


def test_offloading_beyond_any_host_warns():
    # 100 TiB on one GPU = 102,400 GiB per GPU > 4,096 GiB (16 × the 256 GiB per GPU of AWS p5.48xlarge)
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "100TiB",
                              "--json"])
    assert res.exit_code == 0
    notes = " ".join(json.loads(res.output)["kv_tiers"]["notes"])
    assert "WARNING: --kv-offloading-size 102,400 GiB over 1 GPU(s) is 102,400 GiB of host memory per GPU" in notes
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "256",
                              "--json"])
    assert "WARNING" not in " ".join(json.loads(res.output)["kv_tiers"]["notes"])
