"""`kvledger simulate --engine sglang --tp 8 --ep-size 8 --enable-dp-attention --dp-size 8` for DeepSeek-V3 on H200:
SGLang 0.5.23's DP ranks in lock-step, each the plan's KV pool, round-robin dispatch; what is not modelled refused."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli

SG = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8",
      "--enable-dp-attention", "--dp-size", "8", "--num-requests", "16")


# the plan's pool per DP rank (`kvledger plan --engine sglang --tp 8 --ep-size 8 --enable-dp-attention --dp-size 8`):
# 191,924 tokens (test_dp_flags.py); under deepep 113,959 (DeepEP's 2,048 MiB reserve and the shared expert whole on
# every GPU, sglang_ep.py), the plan's "KV 8 × 113,959 = 911,672 tokens in all"; both 29,127 fewer than before MLA's
# bfloat16 w_kc/w_vc copies (128 heads × 256 × 512 × 2 B × 61 layers a rank under DP attention, sglang_mla_copies.py)
@pytest.mark.parametrize(("backend", "per_rank"), [((), 191_924), (("--moe-a2a-backend", "deepep"), 113_959)])
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
    (("--tp", "8", "--ep-size", "8", "--enable-dp-attention", "--dp-size", "4"),
     "--attn-dp-size 4 --tp 8: an attention DP size below --tp"),
    (("--tp", "8", "--enable-dp-attention", "--dp-size", "8"), "--ep-size 1"),
    (("--tp", "8", "--ep-size", "8", "--moe-a2a-backend", "deepep"), "needs DP attention, --attn-dp-size N above 1"),
    # SGLang's --dp-size without DP attention: 8 whole TP 8 replicas on 64 GPUs, as plan says (not DP attention)
    (("--tp", "8", "--ep-size", "8", "--dp-size", "8"), "SGLang runs 8 whole replicas of TP 8 (64 GPUs, as "
                                                        "`kvledger plan` says), simulated as --replicas 8")])
def test_what_is_not_modelled_is_refused(args, said):
    err = refused("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", *args,
                  "--num-requests", "4")
    assert said in err and "simulate takes SGLang's DP attention as" in err


DP12 = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8",
        "--enable-dp-attention", "--dp-size", "8", "--rate", "12")


def test_the_dp_line_does_not_call_a_run_too_short_to_tell_stable():
    # 64 requests of 512 + 1,024 tokens at 12 req/s: the arrivals up to the median span 3.08 s, all of them 5.46 s,
    # and the first request finishes 45.85 s in (1,024 decode steps), so the run is too short to tell whether it kept
    # up (queue_growth.open_loop_check); no rank's read can say more than the run's, so the DP line says so in place
    # of "no rank's queue grew"
    args = (*DP12, "--num-requests", "64", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:1024")
    d = cli_json(*args, "--json")
    assert d["too_short"] is not None and d["data_parallel"]["saturated_ranks"] == []
    assert d["data_parallel"]["too_short_to_tell"] is True
    out = " ".join(run_cli(*args).stdout.split())
    assert "too short to tell whether the engine kept up: the arrivals up to the median spanned 3.08 s" in out
    assert "too short to tell whether a rank's queue grew" in out and "no rank's queue grew" not in out


def test_the_dp_line_does_not_call_a_run_whose_queue_grew_stable():
    # azure-conv's first 40 requests at 12 req/s: after the median arrival they came at 12.72 req/s and finished at
    # 2.01 req/s (the run's queue grew: its warning), while no one rank's 5 requests showed growth past its
    # Bonferroni burst allowance; the DP line names both rather than "no rank's queue grew"
    out = " ".join(run_cli(*DP12, "--num-requests", "40").stdout.split())
    assert "requests arrived at 12.72 req/s and finished at 2.01 req/s, so the queue grew" in out
    assert ("no one rank's queue grew past its own burst allowance, but all ranks' requests together showed the queue "
            "growing (the warning above)") in out
    assert "no rank's queue grew" not in out
