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


def test_an_upper_case_kv_dtype_is_refused_as_vllm_refuses_it():
    # vLLM 0.19's --kv-cache-dtype is the Literal CacheDType (vllm/config/cache.py): argparse checks the choices as
    # written, so "FP8" fails before start-up; plan, simulate and search refuse it too, listing vLLM's choices.
    why = ("--kv-cache-dtype 'FP8': vLLM refuses it at argument parsing (its choices are lower case: auto, float16, "
           "bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla, vllm/config/cache.py CacheDType in 0.19); "
           "write 'fp8'")
    for args in (["plan", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "--max-model-len", "8K"],
                 ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "--max-model-len", "8K",
                  "--num-requests", "5"],
                 ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--slo", "ttft=1s", "--rate", "1"]):
        res = runner.invoke(app, [*args, "--kv-cache-dtype", "FP8"])
        assert str(res.exception) == why, args
    ok = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "RTX4090", "--max-model-len", "8K",
                             "--kv-cache-dtype", "fp8"])
    assert ok.exit_code == 0 and "KV dtype fp8" in ok.stdout


def test_an_upper_case_16_bit_alias_is_told_the_name_vllm_accepts():
    # vLLM's CacheDType (vllm/config/cache.py, 0.19 and 0.33) has float16 and bfloat16 but no bf16/fp16/half, so
    # the suggestion for any casing of those is vLLM's name (or auto, the model's dtype), never 'bf16' or 'fp16'.
    head = ("vLLM refuses it at argument parsing (its choices are lower case: auto, float16, bfloat16, fp8, fp8_e4m3, "
            "fp8_e5m2, fp8_inc, fp8_ds_mla, vllm/config/cache.py CacheDType in 0.19); write ")
    for given, fix in (("BF16", "bfloat16"), ("Bf16", "bfloat16"), ("bF16", "bfloat16"), ("FP16", "float16"),
                       ("HALF", "float16"), ("BFLOAT16", "bfloat16"), ("Float16", "float16"), ("AUTO", "auto")):
        res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-cache-dtype", given])
        tail = f"'{fix}' (or 'auto' for the model's own dtype)" if given.lower() in ("bf16", "fp16", "half") else \
            f"'{fix}'"
        assert str(res.exception) == f"--kv-cache-dtype {given!r}: {head}{tail}", given
