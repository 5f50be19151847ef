"""``simulate --rate inf`` (every request at t = 0, ``vllm bench serve``'s default request rate): a burst is read at
its running batch's peak (``ledgers.burst_read``), not called a run that kept up with an offered load. Both cases on
Llama-3.1-8B on one H100, 200 requests of 1,000 prompt and 200 output tokens."""

from __future__ import annotations

from cli_run import MODEL, cli_json, run_cli

BURST = ("simulate", MODEL, "--gpu", "H100", "--rate", "inf", "--num-requests", "200", "--prompt-lengths", "fixed:1000",
         "--output-lengths", "fixed:200")


def test_a_burst_the_engine_runs_at_once_has_no_throughput_band_and_says_why():
    # all 200 fit at once: the memory plan's pool is 28,160 blocks of 16 tokens, a request holds at most
    # ⌈1,200 / 16⌉ = 75 blocks, 200 × 75 = 15,000 ≤ 28,160; max_num_seqs 1,024 ≥ 200; the token budget (8,192) admits
    # the 200 × 1,000 = 200,000 prompt tokens in ⌈200,000 / 8,192⌉ = 25 steps, while the first request needs 199
    # decode steps after its first token to finish — so the running batch grows with every first token to all 200:
    # 0 after its peak, one batch of 200 draining, whose throughput is set by the 200, not the capacity
    doc = cli_json(*BURST)
    b = doc["burst"]
    assert (b["case"], b["num_requests"], b["waiting_after_peak"], b["peak_running"]) == ("one_batch", 200, 0, 200)
    assert b["peak_s"] > 0 and "largest size" in b["rule"]
    assert doc["overload"] is None and "throughput" not in doc["error_bands"]
    why = doc["band_coverage"]["throughput"]
    assert why.startswith("a burst (every request at t = 0) the engine ran at once: the running batch (first token "
                          "out, not finished) was largest at the last first token, 200 requests (")
    assert "a batch of 200 requests' drain, set by the burst's size" in why and "offered load" not in why
    out = " ".join(run_cli(*BURST).output.split())
    assert "no throughput band: a burst (every request at t = 0) the engine ran at once" in out
    assert "offered load" not in out  # the old words: "its throughput is the offered load"


def test_a_burst_past_max_num_seqs_is_saturated_and_its_throughput_banded():
    # --max-num-seqs 16: 16 run; a slot frees only when one of them finishes, so the running batch stops at 16 and
    # the other 200 − 16 = 184 get their first token after it — the engine ran full to the end: its throughput
    # (200 ÷ first arrival → last finish) is its drain capacity, banded as a saturated run's; no latency band (set
    # by the burst)
    doc = cli_json(*BURST, "--max-num-seqs", "16")
    b = doc["burst"]
    assert (b["case"], b["num_requests"], b["waiting_after_peak"], b["peak_running"]) == ("saturated", 200, 184, 16)
    assert list(doc["error_bands"]) == ["throughput"]
    assert doc["error_bands"]["throughput"]["predicted"] == doc["summary"]["throughput_req_per_s"]
    assert doc["band_coverage"]["throughput"] is None
    note = next(n for n in doc["notes"] if n.startswith("a burst"))
    assert note.startswith("a burst (every request at t = 0) larger than the engine runs at once: 184 of 200 requests "
                           "got their first token only after the running batch (first token out, not finished) had "
                           "reached its largest, 16 requests")
    assert "lower --rate" not in note and "a finite --rate gives a latency with a band" in note
    out = " ".join(run_cli(*BURST, "--max-num-seqs", "16").output.split())
    assert "error bands: throughput at saturation" in out and "throughput at saturation: a burst's" in out


MIXED = (*BURST[:-1], "uniform:1:400")


def test_a_burst_of_mixed_outputs_is_one_batch_and_its_knee_note_says_so():
    # outputs 1–400 tokens: the shortest finish within the first prefill steps, while the token budget (8,192) is
    # still admitting the 200 × 1,000 prompt tokens (25 steps, as above) — the read at the first finish called this
    # saturated (168 still waiting). No limit a finish frees held it: 200 × ⌈1,400 / 16⌉ = 17,600 ≤ 28,160 blocks,
    # 200 ≤ 1,024 seats, so the running batch was largest at the last first token (200 less those finished in passing)
    doc = cli_json(*MIXED)
    b = doc["burst"]
    assert (b["case"], b["num_requests"], b["waiting_after_peak"]) == ("one_batch", 200, 0)
    assert 150 < b["peak_running"] < 200  # the simulated run: 192 (8 short outputs finished in passing)
    # its mean TTFT grew through the burst's prefill queue (knee_rule's quarters): not a knee, which needs a rate
    note = next(n for n in doc["notes"] if n.startswith("no TTFT mean error band"))
    assert "the run is one batch, a burst (every request at t = 0) the engine ran at once" in note
    assert "1/(1 − utilisation)" not in note and "a lower --rate" not in note
    assert note.endswith("a burst has no knee to read: a rate sweep (goodput --simulate --target) finds it, and a "
                         "--rate below capacity gives a TTFT with a band")


def test_a_burst_of_mixed_outputs_past_max_num_seqs_stays_saturated():
    # the same mixed burst with --max-num-seqs 16: 16 seats, the batch held at 16, the other 184 after it
    b = cli_json(*MIXED, "--max-num-seqs", "16")["burst"]
    assert (b["case"], b["waiting_after_peak"], b["peak_running"]) == ("saturated", 184, 16)


def test_a_finite_rate_is_not_a_burst():
    doc = cli_json("simulate", MODEL, "--gpu", "H100", "--rate", "5", "--num-requests", "40", "--prompt-lengths",
                   "fixed:1000", "--output-lengths", "fixed:200")
    assert "burst" not in doc  # the key is written only for a burst (the other runs' JSON unchanged)


def test_goodput_and_cost_read_the_burst_alike():
    # the same one-batch burst: goodput's no-band line and cost --at-offered-load's basis name the burst, not an
    # offered rate, and cost warns that one batch's drain need not be the capacity
    tail = BURST[1:]
    out = " ".join(run_cli("goodput", "--simulate", *tail, "--slo", "ttft=5s").output.split())
    assert "error band: none on goodput of a burst (every request at t = 0; the running batch (first token out, not " \
           "finished) was largest at the last first token, 200 requests" in out
    assert "one batch of 200 requests draining" in out
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
