"""One list of --kv-cache-dtype values in every refusal (a fresh-user trial: plan named 6 values, search 10)."""

from __future__ import annotations

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
# kvledger.accounting.kvcache.KV_DTYPE_BYTES's names after auto: the 16-bit ones with their aliases, then the fp8 ones
NAMES = "auto, bf16, bfloat16, fp16, float16, half, fp8, fp8_e4m3, fp8_e5m2, fp8_inc"


def test_plan_and_search_refuse_an_unknown_kv_dtype_with_the_same_list():
    plan = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-cache-dtype", "fp4"])
    search = runner.invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--slo", "ttft=1s",
                                 "--kv-cache-dtype", "auto,fp4", "--rate", "1"])
    for res in (plan, search):
        assert str(res.exception) == f"--kv-cache-dtype 'fp4' is not supported; use {NAMES}"
