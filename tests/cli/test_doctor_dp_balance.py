"""`kvledger doctor` on a log of two data-parallel engines (one metrics line per engine each interval): one engine's
KV cache full while the other's has room is named, with what vLLM's own DP load balancer does for the release
(v1/engine/core_client.py DPLBAsyncMPClient.get_core_engine_for_request: 0.10.1–0.26 the lowest waiting × 4 + running,
read in 0.11.0, 0.19.0, 0.26.0; 0.27 on adds waiting × 6 × (KV usage − 0.5), read in 0.27.0, 0.28.0, 0.33.0)."""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# vLLM 0.19.0's metrics line (v1/metrics/loggers.py LoggingStatLogger.log: "Engine %03d: " prefix per engine index,
# parts joined by ", ", "Preemptions: %d" only when > 0)
_FMT = ("(APIServer pid=1) INFO 04-22 00:{m:02d}:00 [v1/metrics/loggers.py:259] Engine {e}: Avg prompt throughput: "
        "{p:.1f} tokens/s, Avg generation throughput: 2600.0 tokens/s, Running: {r} reqs, Waiting: {w} reqs, {pre}GPU "
        "KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%")


def _log(tmp_path: Path, e0: list[tuple], e1: list[tuple]) -> str:
    lines = []
    for m, (a, b) in enumerate(zip(e0, e1), start=5):
        for e, (r, w, pre, kv) in (("000", a), ("001", b)):
            lines.append(_FMT.format(m=m, e=e, p=3000.0, r=r, w=w, pre=f"Preemptions: {pre}, " if pre else "", kv=kv))
    path = tmp_path / "dp2.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _dp(d: dict) -> dict:
    return next(f for f in d["findings"] if f["name"] == "dp_balance")


# Engine 000 saturates (99.9 % KV, 102 waiting, 12 + 30 + 41 = 83 preemptions); Engine 001 peaks at 40.0 %, 0 waiting
BUSY = [(196, 61, 12, 99.1), (190, 88, 30, 99.8), (188, 102, 41, 99.9)]
IDLE = [(80, 0, None, 38.5), (84, 0, None, 40.0), (78, 0, None, 36.2)]


def test_one_engine_full_while_the_other_idles_is_named(tmp_path):
    d = cli_json("doctor", _log(tmp_path, BUSY, IDLE), "--model", MODEL, "--gpu", "H100", "--engine-version", "0.19.0")
    f = _dp(d)
    assert f["triggered"] and f["verdict"] == "one_engine_full_another_idle"
    assert ("Engine 000 reached 99.9% GPU KV usage (line 5) with up to 102 requests waiting and 83 preemptions, "
            "while Engine 001 never passed 40.0% (line 4; 0 waiting at most)") in f["message"]
    # 0.19's score at Engine 000's peak line: 102 × 4 + 188 = 596 against Engine 001's 0 × 4 + 84 = 84 at most: its
    # own balancer would have sent new requests to Engine 001, so they were routed past it
    assert "102 × 4 + 188 = 596 against at most 0 × 4 + 84 = 84" in f["message"]
    assert "external router (--data-parallel-external-lb" in f["message"]
    assert [e["value"] for e in f["evidence"]] == ["99.9% KV; 196 running, 102 waiting; 83 preemptions over 3 lines",
                                                   "40.0% KV; 84 running, 0 waiting; 0 preemptions over 3 lines"]
    # the capacity finding still reads the busy engine only: its 83 preemptions at 99.9 %
    cap = next(x for x in d["findings"] if x["name"] == "capacity")
    assert cap["message"].startswith("83 preemption(s) with the KV cache full (usage up to 99.9%)")


def test_equal_request_counts_name_the_count_only_balancer_and_0_27_its_kv_penalty(tmp_path):
    # Engine 000 holds fewer requests (score 5 × 4 + 150 = 170) than Engine 001 (180) but longer ones: 0.19's
    # balancer, counting requests, keeps sending to it
    busy, idle = [(150, 5, 9, 99.5)] * 2, [(180, 0, None, 41.0)] * 2
    log = _log(tmp_path, busy, idle)
    f = _dp(cli_json("doctor", log, "--model", MODEL, "--gpu", "H100", "--engine-version", "0.19.0"))
    assert "lowest waiting × 4 + running" in f["message"] and "it counts requests, not their tokens" in f["message"]
    f = _dp(cli_json("doctor", log, "--model", MODEL, "--gpu", "H100", "--engine-version", "0.28.0"))
    assert "vLLM 0.28.0's DP load balancer adds waiting × 6 × (KV usage − 0.5)" in f["message"]


def test_balanced_engines_are_not_flagged(tmp_path):
    both = [(150, 0, None, 70.0), (160, 0, None, 72.5)]
    f = _dp(cli_json("doctor", _log(tmp_path, both, both), "--model", MODEL, "--gpu", "H100", "--engine-version",
                     "0.19.0"))
    assert not f["triggered"] and f["verdict"] == "balanced"


# --aggregate-engine-logging (vLLM 0.11.1 on): AggregatedLoggingStatLogger.log_prefix "{N} Engines Aggregated: ", the
# same parts; aggregate_scheduler_stats sums running and waiting and averages kv_cache_usage over the engines
_AGG = ("(APIServer pid=1) INFO 04-22 00:{m:02d}:00 [v1/metrics/loggers.py:259] {n} Engines Aggregated: Avg prompt "
        "throughput: 6000.0 tokens/s, Avg generation throughput: 5200.0 tokens/s, Running: {r} reqs, Waiting: {w} "
        "reqs, Preemptions: {pre}, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%")


def _agg_log(tmp_path: Path, rows: list[tuple], n: int = 2) -> str:
    path = tmp_path / f"dp{n}_aggregated.log"
    path.write_text("\n".join(_AGG.format(n=n, m=5 + i, r=r, w=w, pre=p, kv=kv) for i, (r, w, p, kv) in enumerate(rows))
                    + "\n")
    return str(path)


def test_aggregated_lines_with_preemptions_below_half_mean_usage_are_flagged(tmp_path):
    # two engines' mean KV usage 69.7, 48.6, 47.1 % with 12, 30, 41 preemptions: lines 2 and 3 preempt with the mean
    # below 50 %, so one engine ran out of blocks while the other held at most the mean; the one cited has the most
    # preemptions (line 3, 41). At the peak mean 69.7 % every engine held at least 2 × 69.7 − 100 = 39.4 %;
    # 12 + 30 + 41 = 83 preemptions in all
    rows = [(276, 61, 12, 69.7), (274, 88, 30, 48.6), (266, 102, 41, 47.1)]
    f = _dp(cli_json("doctor", _agg_log(tmp_path, rows), "--model", MODEL, "--gpu", "H100", "--engine-version",
                     "0.19.0"))
    assert f["triggered"] and f["verdict"] == "aggregated_preempting_below_half"
    assert f["message"].startswith("2 DP engines logged aggregated (--aggregate-engine-logging): mean GPU KV usage up "
                                   "to 69.7% (line 1; every engine then held at least 39.4% and the fullest at least "
                                   "69.7%), 83 preemptions summed over 3 lines. Line 3: 41 preemptions in the "
                                   "interval while the 2 engines' mean KV usage at its end was 47.1% (below 50%)")
    assert "(2 such line(s))" in f["message"]
    assert [e["line"] for e in f["evidence"]] == [1, 3]


def test_aggregated_lines_all_near_full_are_not_flagged_as_routing(tmp_path):
    # mean 97.0 % over 2 engines: each held at least 2 × 97.0 − 100 = 94.0 %, both full: capacity, not routing
    f = _dp(cli_json("doctor", _agg_log(tmp_path, [(300, 40, 9, 96.5), (300, 52, 14, 97.0)]), "--model", MODEL,
                     "--gpu", "H100", "--engine-version", "0.19.0"))
    assert not f["triggered"] and f["verdict"] == "aggregated_no_sign"
    assert "mean GPU KV usage up to 97.0% (line 2; every engine then held at least 94.0%" in f["message"]
    # 97.0 ≥ 100 − (100 − 90) / 2 = 95.00 %: every engine at least 90 % full
    assert ("line 2's 14 preemptions came at a mean of 97.0%, so every engine held at least 2 × 97.0 − 1 × 100 = "
            "94.0% (a mean ≥ 95.00%: every engine at least 90% full): capacity, not routing") in f["message"]
    assert "over these 2 engines only a mean ≥ 100 − (100 − 90) / 2 = 95.00% with preemptions" in f["rule"]


def test_eight_aggregated_engines_near_full_only_from_98_75_percent(tmp_path):
    # 8 engines: every engine holds ≥ 8·U − 7·100 %, so ≥ 90 % takes U ≥ 100 − 10 / 8 = 98.75 %; a mean of 90 %
    # bounds each only at ≥ 8 × 90 − 7 × 100 = 20 %. At U = 92.0 % with preemptions: 736 − 700 = 36.0 %, so one
    # full pool beside one with room is not ruled out; at U = 99.0 %: 792 − 700 = 92.0 %, all near full
    f = _dp(cli_json("doctor", _agg_log(tmp_path, [(900, 40, 9, 92.0)], n=8), "--model", MODEL, "--gpu", "H100",
                     "--engine-version", "0.19.0"))
    assert not f["triggered"] and f["verdict"] == "aggregated_no_sign"
    assert ("line 1's 9 preemptions came at a mean of 92.0%, so every engine held at least 8 × 92.0 − 7 × 100 = "
            "36.0%, below 90% (that takes a mean ≥ 100 − (100 − 90) / 8 = 98.75% over 8 engines), so one full pool "
            "beside one with room is not ruled out") in f["message"]
    assert "capacity, not routing" not in f["message"]
    assert ("only a mean ≥ 100 − (100 − 90) / 8 = 98.75% with preemptions means every engine was at least 90% full "
            "(capacity, not routing); a mean of 90% bounds each engine only at ≥ 8 × 90 − 7 × 100 = 20%") in f["rule"]
    f = _dp(cli_json("doctor", _agg_log(tmp_path, [(900, 40, 9, 99.0)], n=8), "--model", MODEL, "--gpu", "H100",
                     "--engine-version", "0.19.0"))
    assert "8 × 99.0 − 7 × 100 = 92.0% (a mean ≥ 98.75%: every engine at least 90% full)" in f["message"]


def test_capacity_on_aggregated_lines_says_what_the_mean_can_and_cannot_show(tmp_path):
    # preemptions (5 and 8) at the 2 engines' mean KV usage 55.0 % and 60.0 %: below 90 %, but the mean is of two
    # pools. At 60.0 % every engine held at least 2 × 60.0 − 1 × 100 = 20.0 % and the fullest between 60.0 % and
    # min(100, 2 × 60.0) = 100 %: both at 60 % (no pool full) or one at 100 % beside the other at 2 × 60 − 100 =
    # 20.0 % (one pool full: an uneven split), which the mean cannot tell apart; 5 + 8 = 13 preemptions
    d = cli_json("doctor", _agg_log(tmp_path, [(250, 0, 5, 55.0), (260, 3, 8, 60.0)]), "--model", MODEL, "--gpu",
                 "H100", "--engine-version", "0.19.0")
    cap = next(x for x in d["findings"] if x["name"] == "capacity")
    assert cap["triggered"] and cap["verdict"] == "preemptions_below_full_aggregated"
    assert cap["message"] == (
        "13 preemption(s) while the 2 data-parallel engines' mean GPU KV usage stayed below 90% (up to 60.0% at a "
        "preempting line, line 2). These are '2 Engines Aggregated' lines (--aggregate-engine-logging): the usage is "
        "the mean of the engines' pools, not one pool's. At a mean of 60.0% over 2 engines every engine held at least "
        "N·U − (N − 1)·100% = 2 × 60.0 − 1 × 100 = 20.0% and the fullest between 60.0% and 100.0%; the mean cannot "
        "tell all engines at 60.0% (no pool full) from one engine at 100% beside the other at 20.0%, so an uneven "
        "split of the traffic across the DP engines (one pool full while another had room: the dp_balance finding) "
        "is the likelier reading. Drop --aggregate-engine-logging to read each engine's usage before lowering "
        "max_num_batched_tokens.")
    assert "lower max_num_batched_tokens" not in cap["message"].replace("before lowering", "")
    assert not any("max-num-batched-tokens" in o["action"] for o in cap["options"])
