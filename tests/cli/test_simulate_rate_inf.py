"""``simulate --rate inf`` (every request at t = 0, ``vllm bench serve``'s default request rate): a burst is read at
its first finish (``ledgers.burst_read``), not called a run that kept up with an offered load. Both cases on
Llama-3.1-8B on one H100, 200 requests of 1,000 prompt and 200 output tokens."""

from __future__ import annotations

from cli_run import MODEL, cli_json, run_cli

BURST = ("simulate", MODEL, "--gpu", "H100", "--rate", "inf", "--num-requests", "200", "--prompt-lengths", "fixed:1000",
         "--output-lengths", "fixed:200")


def test_a_burst_the_engine_runs_at_once_has_no_throughput_band_and_says_why():
    # all 200 fit at once: the memory plan's pool is 28,160 blocks of 16 tokens, a request holds at most
    # ⌈1,200 / 16⌉ = 75 blocks, 200 × 75 = 15,000 ≤ 28,160; max_num_seqs 1,024 ≥ 200; the token budget (8,192) admits
    # the 200 × 1,000 = 200,000 prompt tokens in ⌈200,000 / 8,192⌉ = 25 steps, while the first request needs 199
    # decode steps after its first token to finish — so every request has its first token before the first finish:
    # 0 waiting, one batch of 200 draining, whose throughput is set by the 200, not the capacity
    doc = cli_json(*BURST)
    b = doc["burst"]
    assert (b["case"], b["num_requests"], b["waiting_at_first_finish"]) == ("one_batch", 200, 0)
    assert b["first_finish_s"] > 0 and "first finish" in b["rule"]
    assert doc["overload"] is None and "throughput" not in doc["error_bands"]
    why = doc["band_coverage"]["throughput"]
    assert why.startswith("a burst (every request at t = 0) the engine ran at once: all 200 requests had their first "
                          "token before the first finished")
    assert "a batch of 200 requests' drain, set by the burst's size" in why and "offered load" not in why
    out = " ".join(run_cli(*BURST).output.split())
    assert "no throughput band: a burst (every request at t = 0) the engine ran at once" in out
    assert "offered load" not in out  # the old words: "its throughput is the offered load"


def test_a_burst_past_max_num_seqs_is_saturated_and_its_throughput_banded():
    # --max-num-seqs 16: 16 run; a slot frees only when one of them finishes, so at the first finish the other
    # 200 − 16 = 184 still wait for a first token — the engine ran full to the end: its throughput (200 ÷ first
    # arrival → last finish) is its drain capacity, banded as a saturated run's; no latency band (set by the burst)
    doc = cli_json(*BURST, "--max-num-seqs", "16")
    b = doc["burst"]
    assert (b["case"], b["num_requests"], b["waiting_at_first_finish"]) == ("saturated", 200, 184)
    assert list(doc["error_bands"]) == ["throughput"]
    assert doc["error_bands"]["throughput"]["predicted"] == doc["summary"]["throughput_req_per_s"]
    assert doc["band_coverage"]["throughput"] is None
    note = next(n for n in doc["notes"] if n.startswith("a burst"))
    assert note.startswith("a burst (every request at t = 0) larger than the engine runs at once: 184 of 200 requests "
                           "still waited for a first token when the first finished")
    assert "lower --rate" not in note and "a finite --rate gives a latency with a band" in note
    out = " ".join(run_cli(*BURST, "--max-num-seqs", "16").output.split())
    assert "error bands: throughput at saturation" in out and "throughput at saturation: a burst's" in out


def test_a_finite_rate_is_not_a_burst():
    doc = cli_json("simulate", MODEL, "--gpu", "H100", "--rate", "5", "--num-requests", "40", "--prompt-lengths",
                   "fixed:1000", "--output-lengths", "fixed:200")
    assert "burst" not in doc  # the key is written only for a burst (the other runs' JSON unchanged)


def test_goodput_and_cost_read_the_burst_alike():
    # the same one-batch burst: goodput's no-band line and cost --at-offered-load's basis name the burst, not an
    # offered rate, and cost warns that one batch's drain need not be the capacity
    tail = BURST[1:]
    out = " ".join(run_cli("goodput", "--simulate", *tail, "--slo", "ttft=5s").output.split())
    assert "error band: none on goodput of a burst (every request at t = 0; all 200 requests had their first token" \
           in out and "one batch of 200 requests draining" in out
    doc = cli_json("cost", "--simulate", *tail, "--slo", "ttft=5s", "--at-offered-load")
    basis = doc["capacity_basis"]
    assert basis["text"].startswith("capacity basis: the simulated burst (every request at t = 0)")
    assert basis["load_check"]["status"] == "cannot_tell"
    assert "one batch of 200 requests draining" in basis["load_check"]["reason"]
    assert basis["warning"].startswith("the run is ONE BATCH")


def test_a_bare_length_is_fixed():
    # --prompt-lengths 1000 means fixed:1000 (it was refused as "not understood"): the same run, figure for figure
    run = ("simulate", MODEL, "--gpu", "H100", "--rate", "5", "--num-requests", "40")
    bare = cli_json(*run, "--prompt-lengths", "1000", "--output-lengths", "200")
    fixed = cli_json(*run, "--prompt-lengths", "fixed:1000", "--output-lengths", "fixed:200")
    assert bare["summary"] == fixed["summary"]
    assert bare["workload"]["prompt_tokens_mean"] == 1000 and bare["workload"]["output_tokens_mean"] == 200
