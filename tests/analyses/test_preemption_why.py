"""simulate says why a run preempted and what to change: the peak running batch, the first preemption's state and
doctor's capacity options, in text and under --json's ``preemptions``; a run without preemptions prints nothing new."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.cli.main import app
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate

# 20 requests of 1,000 prompt + 1,000 output tokens, all at t = 0, on a 500-block pool (499 usable: block 0 is vLLM's
# null block) of 16 tokens, max_num_batched_tokens 8,192
RUN = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--prompt-lengths", "fixed:1000",
       "--output-lengths", "fixed:1000", "--rate", "inf", "--num-requests", "20", "--num-gpu-blocks-override", "500",
       "--max-model-len", "4096", "--max-num-batched-tokens", "8192"]


def _ok(*argv: str) -> str:
    res = CliRunner().invoke(app, list(argv), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(_ok(*RUN, "--json"))


def test_the_peak_batch_and_the_first_preemption_are_the_pools_arithmetic(doc):
    p = doc["preemptions"]
    assert p["num_preemptions"] == doc["summary"]["num_preemptions"] > 0
    assert p["pool"] == {"num_gpu_blocks": 500, "usable_blocks": 499, "block_size": 16, "token_slots": 499 * 16}
    # the first step admits whole prompts while both the token budget and the blocks allow: ⌊8,192 / 1,000⌋ = 8 by
    # tokens, ⌊499 / ⌈1,000 / 16⌉⌋ = ⌊499 / 63⌋ = 7 by blocks (441 held, 58 free; the 8th's 63 do not fit), so 7 run
    # from t = 0. No 8th ever fits: 7 running hold ≥ 441 blocks, leaving < 63.
    assert p["running_max"]["requests"] == 7 and p["running_max"]["t_s"] == 0.0 and p["running_max"]["exact"]
    # each decode step the 7 grow; every 16 tokens past 1,008 (63 blocks) each takes a block: 8 rounds × 7 = 56 use
    # 497, and the 9th round's 3rd request finds none free: 7 running, holding all 499 usable blocks
    first = p["first"]
    assert (first["running"], first["kv_blocks_held"], first["usable_blocks"]) == (7, 499, 499)
    # …after the prompt step and ≥ 9 × 16 = 144 decode steps: later than the first step, before the run's end
    assert 0.0 < first["t_s"] < doc["summary"]["duration_s"]
    # the mean request is 1,000 + 1,000 = 2,000 tokens: the pool holds ⌊7,984 / 2,000⌋ = 3 of them
    assert p["mean_request_tokens"] == 2000.0 and p["mean_requests_pool_holds"] == 3


def test_the_options_are_doctors_replanned_on_the_simulated_pool(doc):
    rows = {o["action"]: o for o in doc["preemptions"]["options"]}
    assert rows["as simulated"]["num_gpu_blocks"] == 500
    # doctor's batch cap: token slots ÷ the tokens per request = ⌊7,984 / 2,000⌋ = 3
    assert rows["--max-num-seqs 3"]["requests_of_observed_size"] == 3
    # FP8 KV halves the page: the same bytes (500 blocks' worth) hold 1,000 blocks, 999 usable × 16 = 15,984 slots,
    # ⌊15,984 / 2,000⌋ = 7 requests of the mean length
    fp8 = rows["--kv-cache-dtype fp8"]
    assert (fp8["num_gpu_blocks"], fp8["token_slots"], fp8["requests_of_observed_size"]) == (1000, 15984, 7)
    assert rows["--tensor-parallel-size 2"]["gpus_per_replica"] == 2


def test_the_text_says_why_and_what_to_change():
    out = " ".join(_ok(*RUN).split())
    assert ("why: the KV pool (499 usable blocks × 16 tokens = 7,984 token slots) was full when running requests "
            "needed new blocks") in out
    assert "vLLM V1 preempts the most recently admitted running request" in out
    assert "with 7 requests running holding 499 of the 499 usable blocks" in out
    assert "The running batch peaked at 7 requests (t = 0.00 s" in out
    # capacity first: FP8 KV halves the bytes per token, 500 → 1,000 blocks (×2.00, 1,000 ÷ 500), 7 requests of the
    # mean 2,000 tokens (⌊999 × 16 ÷ 2,000⌋); then the cap, with what it costs: it queues the requests past it
    assert ("what to change: add KV capacity (more requests fit at once: fewer preemptions, and no cap to queue "
            "behind) over the 500 blocks simulated: --kv-cache-dtype fp8 → 1,000 blocks (×2.00), 7 requests") in out
    assert "or cap the batch: --max-num-seqs 3 (the slots ÷ the mean request" in out
    assert ("a cap adds no capacity but trades preemptions for queueing: the requests past the cap wait for a slot "
            "instead of being recomputed, so TTFT grows while the load lasts (this run, with the preemptions: TTFT "
            "mean") in out
    # the first preemption came with 7 running, more than the cap of 3: no caveat
    assert "still preempt" not in out


def test_a_run_without_preemptions_prints_nothing_new():
    # the same 20 requests on the 500-block pool, 3 at a time: ⌈2,000 / 16⌉ = 125 blocks each at their last token,
    # 3 × 125 = 375 ≤ 499, so none is ever preempted
    argv = [a for a in RUN] + ["--max-num-seqs", "3"]
    d = json.loads(_ok(*argv, "--json"))
    assert d["summary"]["num_preemptions"] == 0 and d["preemptions"] is None
    assert "why:" not in _ok(*argv)


@pytest.mark.parametrize("extra", [{}, {"async_scheduling": True}])
def test_the_fast_paths_see_the_peak_step_by_step_execution_sees(extra):
    # one arrival every 0.1 s, 16-token prompts and 60 output tokens, 10 ms steps: a request runs ~60 steps (0.6 s),
    # so 6 or 7 overlap; the arrival stretches (open_stretch.py) and the mixed steps must find the general step's peak
    reqs = [RequestSpec(f"r{i}", 0.1 * i, 16, 60) for i in range(40)]
    cfg = EngineConfig(num_gpu_blocks=400, block_size=16, max_model_len=4096, **extra)
    fast, slow = (simulate(reqs, cfg, FixedStepCost(0.01), fast_forward=ff).batch[0] for ff in (True, False))
    assert fast == slow
    assert 6 <= fast["running_max"] <= 7 and fast["first_preemption"] is None


QWEN = ["simulate", "Qwen/Qwen3-8B", "--gpu", "H100-SXM", "--max-model-len", "32K", "--trace", "mooncake",
        "--num-requests", "500", "--json"]


def _plan_blocks(*extra: str) -> int:
    argv = ["plan", "Qwen/Qwen3-8B", "--gpu", "H100-SXM", "--max-model-len", "32K", *extra, "--json"]
    return json.loads(_ok(*argv))["memory"]["num_gpu_blocks"]


@pytest.mark.parametrize("dtype, tp2_blocks", [([], 54797), (["--kv-cache-dtype", "fp8"], 109595)])
def test_each_option_is_the_plan_with_its_flag(dtype, tp2_blocks):
    # the TP 2 option took TP 1's weights ÷ 2 (15.27 → 7.63 GiB) and said 54,802 (fp8: 109,605) blocks; the ledger's
    # TP 2 weights are 7.64 GiB (8,202,596,352 B, not exactly half), and `kvledger plan Qwen/Qwen3-8B --gpu H100-SXM
    # --max-model-len 32K --tp 2` gives 54,797 (with --kv-cache-dtype fp8: 109,595), the pool `simulate … --tp 2` runs
    opts = {o["action"]: o for o in json.loads(_ok(*QWEN, *dtype))["preemptions"]["options"]}
    tp2 = opts["--tensor-parallel-size 2"]
    assert tp2["num_gpu_blocks"] == _plan_blocks(*dtype, "--tp", "2") == tp2_blocks
    assert "weights 15.27 → 7.64 GiB" in tp2["detail"]
    if not dtype:
        assert opts["--kv-cache-dtype fp8"]["num_gpu_blocks"] == _plan_blocks("--kv-cache-dtype", "fp8") == 49510


def test_the_batch_cap_option_reports_the_pool_replanned_at_the_cap():
    # the mooncake mean request (≈14,612 tokens) fits ⌊24,754 × 16 / 14,612⌋ = 27 times in the TP 1 pool (24,755
    # blocks); `kvledger plan … --max-num-seqs 27` gives 25,557 blocks (the sampler's warm-up and the CUDA graphs are
    # sized by max_num_seqs: activation peak 2.22 → 0.86 GiB, CUDA graphs 0.73 → 0.32 GiB), as `simulate …
    # --max-num-seqs 27` runs: +802 blocks = 802 / 24,755 = +3.24%
    doc = json.loads(_ok(*QWEN))
    seqs = {o["action"]: o for o in doc["preemptions"]["options"]}["--max-num-seqs 27"]
    assert seqs["num_gpu_blocks"] == _plan_blocks("--max-num-seqs", "27") == 25557
    assert (seqs["num_gpu_blocks_change"], seqs["num_gpu_blocks_change_pct"]) == (802, 3.24)
    assert seqs["requests_of_observed_size"] == 27
    out = " ".join(_ok(*QWEN[:-1]).split())
    assert ("or cap the batch: --max-num-seqs 27 (the slots ÷ the mean request: the requests of the mean length the "
            "pool holds; re-planned at this cap the pool is 25,557 blocks, +802 (+3.2%)") in out
    assert "adding no capacity" not in out and "--tensor-parallel-size 2 → 54,797 blocks on 2 GPUs" in out


def test_the_cap_states_its_cost_with_this_runs_ttft(doc):
    # the cap's trade-off is stated against the run it would change: its TTFT mean, the summary's own figure
    p = doc["preemptions"]
    assert p["ttft_mean_s"] == doc["summary"]["ttft_s"]["mean"]
    assert f"TTFT mean {p['ttft_mean_s']:,.2f} s; rerun with the cap to see its own" in p["what_to_change"]
    assert p["what_to_change"].index("add KV capacity") < p["what_to_change"].index("cap the batch")
