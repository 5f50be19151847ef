"""SGLang with a KV pool shorter than the workload's requests: every request is aborted, the warning names the pool
(not max_model_len) as the cause with the pool that would serve them, and the host-tier report neither crashes on a
run with no TTFT nor judges the tier on it."""

from __future__ import annotations

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})
# 20 requests of a 4,000-token document + a 2,000-token question, 3,000 output tokens each, on 20% of an H100
RUN = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--policy", "sglang", "--prompt-lengths", "2000",
       "--output-lengths", "3000", "--document-pool", "5:4000", "--num-requests", "20", "--rate", "8",
       "--mem-fraction-static", "0.2"]


def test_pool_capped_rejections_name_the_pool_and_its_size():
    # SGLang's max_req_len = min(context_len − 1, pool tokens − 1) (tp_worker.py): the run's note gives the pool as
    # 5,467 token slots (page 1), so max_req_len = 5,466 < 131,071 and every 6,000-token prompt (≥ 5,466 − 5) is
    # aborted. A pool of 6,000 + 6 = 6,006 tokens admits the prompts; 6,000 + 3,000 + 1 = 9,001 serves them whole.
    r = runner.invoke(app, RUN)
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())  # the warning wraps at the console's width
    assert "SGLang's KV pool, not max_model_len, caps max_req_len at 5,466 tokens" in text
    assert "6,006 tokens admits every prompt, 9,001 serves every request whole" in text
    assert "raise --max-model-len" not in text


def test_host_tier_on_a_run_that_admitted_nothing_is_not_judged():
    # the same run with a 64 GB HiCache host tier: both runs (with and without the tier) served no request, so
    # their TTFT statistics are empty — shown as "—", and the verdict says there is nothing to judge
    r = runner.invoke(app, [*RUN, "--enable-hierarchical-cache", "--hicache-size", "64"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 1, r.output
    assert "│ TTFT mean            │ —             │ —       │" in r.output
    assert "The host tier cannot be judged on this run: no request was admitted" in " ".join(r.output.split())
