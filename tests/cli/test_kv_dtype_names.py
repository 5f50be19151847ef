"""One list of --kv-cache-dtype values in every refusal (a fresh-user trial: plan named 6 values, search 10)."""

from __future__ import annotations

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
# kvledger.accounting.kv_dtype_choices.KV_DTYPE_BYTES's names after auto: the 16-bit ones with their aliases, then
# the fp8 ones
NAMES = "auto, bf16, bfloat16, fp16, float16, half, fp8, fp8_e4m3, fp8_e5m2, fp8_inc"
# vllm/config/cache.py CacheDType: 0.19's Literal (/tmp/v019), and 0.33's (/tmp/vl: 0.19's and 14 more), the default
V019 = "auto, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla"
V033 = (V019 + ", nvfp4_ds_mla, turboquant_k8v4, turboquant_4bit_nc, turboquant_k3v4_nc, turboquant_3bit_nc, "
        "octave_k3v4, octave_k3v3, octave_k3v3_compact, ultraquant_4bit, int4_per_token_head, int8_per_token_head, "
        "fp8_per_token_head, nvfp4, nvfp4_4over6")


def test_plan_and_search_refuse_an_unknown_kv_dtype_with_the_same_list():
    plan = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-cache-dtype", "fp4"])
    search = runner.invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--slo", "ttft=1s",
                                 "--kv-cache-dtype", "auto,fp4", "--rate", "1"])
    # vLLM's argparse refuses 'fp4' (not in 0.33's CacheDType); the refusal lists vLLM's choices and those kvledger
    # plans, never kvledger's aliases bf16/fp16/half, which vLLM refuses too (a new user's trial: 'fp9' was told "use
    # auto, bf16, …, half")
    planned = "auto, float16, bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc"
    for res in (plan, search):
        assert str(res.exception) == (f"--kv-cache-dtype 'fp4': vLLM refuses it at argument parsing, its choices "
                                      f"being {V033} (CacheDType, vllm/config/cache.py, read in 0.33); kvledger plans "
                                      f"{planned}")
    # nvfp4 is one of 0.33's choices: vLLM takes it, kvledger has no bytes for it
    nv = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-cache-dtype", "nvfp4"])
    assert str(nv.exception) == ("--kv-cache-dtype 'nvfp4': vLLM takes it, but kvledger does not model its KV bytes; "
                                 f"kvledger plans {planned}")
    # an engine without a vLLM check keeps kvledger's own list
    trt = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "trtllm",
                              "--kv-cache-dtype", "fp4"])
    assert str(trt.exception) == f"--kv-cache-dtype 'fp4' is not supported; use {NAMES}"


def test_an_upper_case_kv_dtype_is_refused_as_vllm_refuses_it():
    # vLLM's --kv-cache-dtype is the Literal CacheDType (vllm/config/cache.py): argparse checks the choices as
    # written, so "FP8" fails before start-up; plan, simulate and search refuse it too, listing the default version's
    # (0.33's) choices.
    why = (f"--kv-cache-dtype 'FP8': vLLM refuses it at argument parsing (its choices are lower case: {V033}; "
           "CacheDType, vllm/config/cache.py, read in 0.33); write 'fp8'")
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
    head = (f"vLLM refuses it at argument parsing (its choices are lower case: {V033}; CacheDType, "
            "vllm/config/cache.py, read in 0.33); write ")
    for given, fix in (("BF16", "bfloat16"), ("Bf16", "bfloat16"), ("bF16", "bfloat16"), ("FP16", "float16"),
                       ("HALF", "float16"), ("BFLOAT16", "bfloat16"), ("Float16", "float16"), ("AUTO", "auto")):
        res = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-cache-dtype", given])
        tail = f"'{fix}' (or 'auto' for the model's own dtype)" if given.lower() in ("bf16", "fp16", "half") else \
            f"'{fix}'"
        assert str(res.exception) == f"--kv-cache-dtype {given!r}: {head}{tail}", given


def test_a_lower_case_16_bit_alias_is_refused_for_vllm_with_the_versions_choices():
    # bf16, fp16 and half are kvledger's aliases, not in vLLM's CacheDType (0.19 or 0.33): vLLM's argparse refuses
    # them, so every command that plans vLLM does, naming vLLM's spelling and the version's choices
    m, g = "meta-llama/Llama-3.1-8B", "H100"
    tail = " (or 'auto' for the model's own dtype)"
    for args, given, fix, choices, ver in (
            (["plan", m, "--gpu", g], "bf16", "bfloat16", V033, "0.33"),
            (["plan", m, "--gpu", g, "--engine-version", "0.19.0"], "fp16", "float16", V019, "0.18.0 and 0.19.0"),
            (["simulate", m, "--gpu", g, "--num-requests", "5"], "half", "float16", V033, "0.33"),
            (["goodput", "--simulate", m, "--gpu", g, "--slo", "ttft=1s"], "bf16", "bfloat16", V033, "0.33"),
            (["cost", "--simulate", m, "--gpu", g, "--slo", "ttft=1s"], "fp16", "float16", V033, "0.33"),
            (["search", m, "--gpus", g, "--slo", "ttft=1s", "--rate", "1"], "auto,bf16", "bfloat16", V033, "0.33"),
            (["disagg", m, "--gpu", g], "fp16", "float16", V033, "0.33")):
        res = runner.invoke(app, [*args, "--kv-cache-dtype", given])
        bad = given.split(",")[-1]
        assert str(res.exception) == (f"--kv-cache-dtype {bad!r}: vLLM refuses it at argument parsing (its choices "
                                      f"are lower case: {choices}; CacheDType, vllm/config/cache.py, read in {ver}); "
                                      "write "
                                      f"'{fix}'{tail}"), args
    ok = runner.invoke(app, ["plan", m, "--gpu", g, "--kv-cache-dtype", "bfloat16"])
    assert ok.exit_code == 0 and "KV dtype bfloat16" in ok.stdout


def test_sglang_takes_bf16_and_refuses_fp16_as_its_choices_do():
    # SGLang 0.5.23 srt/arg_groups/fields/model.py --kv-cache-dtype choices: auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16,
    # bfloat16, nvfp4, fp4_mx_block16 -- bf16 is SGLang's own name; fp16/float16/half are in none of them
    m = "meta-llama/Llama-3.1-8B"
    for dtype in ("bf16", "bfloat16"):
        ok = runner.invoke(app, ["plan", m, "--gpu", "H100", "--engine", "sglang", "--kv-cache-dtype", dtype])
        assert ok.exit_code == 0 and f"KV dtype {dtype}" in ok.stdout  # 2 B: 2 × 32 × 8 × 128 × 2 = 131,072 B/token
        assert "131,072 B/token" in ok.stdout
    sim = runner.invoke(app, ["simulate", m, "--gpu", "H100", "--policy", "sglang", "--num-requests", "5",
                              "--kv-cache-dtype", "bf16"])
    assert sim.exit_code == 0, sim.output
    res = runner.invoke(app, ["plan", m, "--gpu", "H100", "--engine", "sglang", "--kv-cache-dtype", "half"])
    assert str(res.exception) == ("--kv-cache-dtype 'half': SGLang 0.5.23 refuses it at argument parsing: \"argument "
                                  "--kv-cache-dtype: invalid choice: 'half' (choose from 'auto', 'fp8_e5m2', "
                                  "'fp8_e4m3', 'mxfp8', 'bf16', 'bfloat16', 'nvfp4', 'fp4_mx_block16')\" "
                                  "(arg_groups/fields/model.py, read in 0.5.21–0.5.23); write 'auto' for the model's "
                                  "own 16-bit dtype")
