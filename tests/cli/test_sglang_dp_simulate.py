"""`kvledger simulate --engine sglang --tp 8 --ep-size 8 --enable-dp-attention --dp-size 8` for DeepSeek-V3 on H200:
SGLang 0.5.23's DP ranks in lock-step, each the plan's KV pool, round-robin dispatch; what is not modelled refused."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused

SG = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8",
      "--enable-dp-attention", "--dp-size", "8", "--num-requests", "16")


# the plan's pool per DP rank (`kvledger plan --engine sglang --tp 8 --ep-size 8 --enable-dp-attention --dp-size 8`):
# 221,051 tokens (test_dp_flags.py); under deepep 143,086 (DeepEP's 2,048 MiB reserve and the shared expert whole on
# every GPU, sglang_ep.py), the plan's "KV 8 × 143,086 = 1,144,688 tokens in all"
@pytest.mark.parametrize(("backend", "per_rank"), [((), 221_051), (("--moe-a2a-backend", "deepep"), 143_086)])
def test_dsv3_sglang_dp_attention_runs(backend, per_rank):
    d = cli_json(*SG, *backend)
    dp = d["data_parallel"]
    assert dp["kv_tokens_per_rank"] == per_rank and dp["kv_tokens_total"] == 8 * per_rank and dp["gpus"] == 8
    # round robin: 16 requests, 2 to each of the 8 ranks
    assert dp["requests_routed_per_rank"] == [2] * 8 and dp["balancing_rule"] == "SGLang 0.5.23 round_robin"
    assert d["summary"]["num_finished"] == 16
    said = "--moe-a2a-backend deepep" if backend else "--moe-a2a-backend none"
    assert any(said in n and "prepare_mlp_sync_batch_raw" in n for n in d["notes"])


@pytest.mark.parametrize(("args", "said"), [
    (("--tp", "8", "--ep-size", "8", "--enable-dp-attention", "--dp-size", "4"), "--dp-size below --tp"),
    (("--tp", "8", "--enable-dp-attention", "--dp-size", "8"), "--ep-size 1"),
    (("--tp", "8", "--ep-size", "8", "--moe-a2a-backend", "deepep"), "needs --enable-dp-attention"),
    # SGLang's --dp-size without DP attention: 8 whole TP 8 replicas on 64 GPUs, as plan says (not DP attention)
    (("--tp", "8", "--ep-size", "8", "--dp-size", "8"), "SGLang runs 8 whole replicas of TP 8 (64 GPUs, as "
                                                        "`kvledger plan` says), simulated as --replicas 8")])
def test_what_is_not_modelled_is_refused(args, said):
    err = refused("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", *args,
                  "--num-requests", "4")
    assert said in err and "simulate takes SGLang's DP attention as" in err
