"""`plan` under data parallelism: each fix says the GPUs it implies (TP × DP for vLLM's ranks) and its figure over
the ranks, in the text and in --json."""

from __future__ import annotations

import json

from cli_run import run_cli


def test_plan_dp_fixes_name_their_gpus_in_text_and_json():
    args = ("plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM", "--data-parallel-size", "2")
    r = run_cli(*args)
    assert r.exit_code == 3  # 131.45 GiB of weights on one 80 GB GPU per rank: does not fit
    text = " ".join(r.stdout.split())
    # the short plan: the fix, its figure, and the GPUs and requests over the ranks (the figure is one rank's) ...
    assert ("→ --tp 4: 3 concurrent 131,072-token requests (3.52x); 8 GPUs (2 DP ranks × TP 4), "
            "the figures one rank's: 2 × 3 = 6 requests in all") in text
    # ... and --verbose adds why it works and the KV it leaves per GPU
    verbose = " ".join(run_cli(*args, "--verbose").stdout.split())
    assert ("→ --tp 4: 3 concurrent 131,072-token requests (3.52x); 35.16 GiB KV per GPU; 8 GPUs (2 DP ranks × TP 4), "
            "the figures one rank's: 2 × 3 = 6 requests in all") in verbose
    fixes = {o["action"]: o for o in json.loads(run_cli(*args, "--json").stdout)["advice"]["options"]}
    assert fixes["--tp 4"]["max_requests"] == 3 and "8 GPUs (2 DP ranks × TP 4)" in fixes["--tp 4"]["detail"]
    assert "2 GPUs (2 DP ranks × TP 1)" in fixes["--gpu b300"]["detail"]
    assert fixes["--tp 4"]["ranks"] == "8 GPUs (2 DP ranks × TP 4), the figures one rank's: 2 × 3 = 6 requests in all"
