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
    # 8000 GiB planned 7,342 GiB of KV; the catalog's largest GPU holds 287.98 GiB (MI355X, 294,896 MiB: 288 GiB less
    # HIP's 16 MiB, catalog/data/gpu_cuda.csv)
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-memory", "8000GiB"])
    assert isinstance(res.exception, InputError)  # main.run() prints it in one paragraph and exits 2
    msg = " ".join(str(res.exception).split())
    assert "8,000.00 GiB is more memory than any GPU holds" in msg and "287.98 GiB" in msg
    # a bare 80 is 80 GiB and plans
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-memory", "80", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["gpu"]["memory_bytes"] == 80 * GiB


def test_offloading_beyond_any_host_is_refused():
    # 100 TiB on one GPU = 102,400 GiB on one node > 8,192 GiB (32 DIMM slots × 256 GiB, accounting/tier_bounds.py):
    # refused before planning, where it used to plan with a WARNING note
    with pytest.raises(InputError, match="102,400 GiB of host memory per GPU, 102,400 GiB on one node"):
        runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "100TiB"],
                      catch_exceptions=False)
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "256",
                              "--json"])
    assert res.exit_code == 0 and "WARNING" not in " ".join(json.loads(res.stdout)["kv_tiers"]["notes"])


@pytest.mark.parametrize("flag", ["--kv-offloading-size", "--kv-tier-nvme", "--kv-tier-remote", "--kv-tier-host"])
@pytest.mark.parametrize("text", ["2000000", "2000000GiB", "1e30", "1e999", "-5", "1024TiB"])
def test_tier_sizes_beyond_any_host_disk_or_store_are_refused(flag, text):
    # 1024 TiB = 2^20 GiB = 1 PiB (units.TIER_GIB_MAX); 2,000,000 GiB and 1e30 GiB lie above it; 1e999 reads as
    # infinity; before, a bare number bypassed every bound (float(text)) and 1e30 GiB planned a host tier
    with pytest.raises(InputError, match=flag):
        gib_option(text, flag)


def test_tier_sizes_up_to_the_bound_are_kept_exact():
    # 1 PiB less 1 GiB is kept; 2TiB = 2,048 GiB; a bare 0.5 is half a GiB, not rounded to bytes
    assert gib_option("1048575", "--kv-tier-remote") == 1_048_575.0
    assert gib_option("2TiB", "--kv-tier-nvme") == 2048.0 and gib_option("0.5", "--kv-tier-nvme") == 0.5


@pytest.mark.parametrize("argv", [
    ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64", "--kv-offloading-backend",
     "lmcache", "--kv-tier-nvme", "1e30"],
    ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64", "--kv-offloading-backend",
     "lmcache", "--kv-tier-remote", "5000TiB"],
    ["search", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=500ms", "--rate", "1", "--offload",
     "disk:1e30"],
])
def test_impossible_tier_sizes_end_with_one_line_and_exit_2(argv, cli_entry):
    # the console entry point (kvledger.cli.main.run, in this process): a traceback would escape it and fail here
    code, _, err = cli_entry(*argv)
    assert code == 2 and "Traceback" not in err
    assert "more than any host memory, disk or remote store a GPU server has" in err
    assert len(err.strip().splitlines()) == 1 and "1 PiB" in err


def test_a_tier_flag_below_zero_names_the_flag_the_user_gave():
    # check_tier_settings named it "--nvme"; the flag is --kv-tier-nvme
    res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64",
                              "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "0"])
    # in the range's words (ranges.TIER_SIZE_GIB), as -5 is: tests/cli/test_longctx_flag_words.py
    assert isinstance(res.exception, InputError) and "--kv-tier-nvme 0 is out of range" in str(res.exception)


@pytest.mark.parametrize("value", ["0", "0B", "0.5B", "-3"])
def test_a_kv_budget_of_no_bytes_is_refused_in_one_line_with_exit_2(value, cli_entry):
    # --available-kv-memory 0 planned "the engine may use 72.85 GiB … = 17.85 GiB before any KV; short by 0.00 GiB"
    # and exited 3: a budget under 1 B holds no block, so it is refused where the flag is read, as -3 is (the console
    # entry point, in this process)
    code, out, err = cli_entry("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--available-kv-memory", value)
    assert code == 2 and "Traceback" not in err and out == ""
    assert err.strip() == f"error: --available-kv-memory: {value!r} must be a finite, positive size"


def test_a_kv_budget_of_no_bytes_is_refused_by_the_settings_too():
    # the Python API's bound (accounting.settings.BOUNDS: > 0 B) refuses what the flag's parser refuses
    from kvledger.accounting.settings import make_settings

    # called from Python, the message names the parameter, not the flag (a command's block names the flag)
    with pytest.raises(InputError, match="available_kv_memory_bytes must be > 0 GiB, got 0.00 GiB"):
        make_settings(available_kv_memory_bytes=0)
    assert parse_memory_flag("1B", what="x", positive=True) == 1
