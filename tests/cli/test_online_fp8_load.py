"""Online FP8 (``-q fp8`` on an unquantized checkpoint) before vLLM 0.16.0 allocates every weight in the checkpoint
dtype and quantizes after loading: where a GPU cannot hold its stage's 16-bit weights, the plan ends with exit 3 and
``-q fp8`` is not offered as a fix (vllm_online_fp8.py)."""

from __future__ import annotations

import pytest
from cli_run import run_cli

from kvledger.accounting.vllm_online_fp8 import ONLINE_FP8_STREAMS_FROM
from kvledger.errors import DoesNotFitError

L405 = ("plan", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "nvidia_a100_40gb_sxm", "--tp", "8", "--pp", "2",
        "--nnodes", "2", "--max-model-len", "8192")


def test_streaming_online_fp8_from_0_16_0():
    # read in the wheels: 0.15.0 allocates with torch.empty(dtype=params_dtype) on the device, 0.16.0 on "meta"
    assert ONLINE_FP8_STREAMS_FROM == (0, 16, 0)


@pytest.mark.parametrize("version", ["0.11.0", "0.14.0", "0.15.0"])
def test_old_releases_cannot_load_the_bf16_weights_first(version):
    # Llama-3.1-405B at TP 8 × PP 2: stage PP1 holds layers 63–125 and the LM head in bf16, 47.28 GiB per GPU (the
    # plan's own weights term without -q fp8), + 0.33 GiB non-torch = 47.61 GiB, above the A100 40GB's 39.59 GiB
    with pytest.raises(DoesNotFitError) as err:
        run_cli(*L405, "--engine-version", version, "-q", "fp8")
    msg = str(err.value)
    assert err.value.exit_code == 3
    assert f"does not load: vLLM {version} with --quantization fp8" in msg
    assert "each GPU of pipeline stage PP1 holds 47.28 GiB of bfloat16 weights" in msg
    assert "= 47.61 GiB during the load, above the device's 39.59 GiB" in msg


def test_from_0_16_0_it_loads_and_plans_the_fp8_weights():
    # FP8 weights: 23.90 GiB per GPU of PP1, leaving 10.00 GiB KV under 0.9 × 39.59 GiB
    r = run_cli(*L405, "--engine-version", "0.16.0", "-q", "fp8")
    assert r.exit_code == 0 and "weights 23.90 GiB" in r.stdout and "available KV 10.00 GiB" in r.stdout


def test_fp8_offered_as_a_fix_only_where_it_loads():
    old = run_cli(*L405, "--engine-version", "0.11.0")
    new = run_cli(*L405, "--engine-version", "0.16.0")
    assert old.exit_code == new.exit_code == 3  # bf16: 47.28 GiB of weights on a 39.59 GiB device
    assert "→ -q fp8" not in old.stdout and "-q fp8 --kv-cache-dtype fp8" not in old.stdout
    assert "→ -q fp8: 40 concurrent 8,192-token requests" in new.stdout
