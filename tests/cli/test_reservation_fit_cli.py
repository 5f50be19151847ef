"""A reservation no request can ever get is refused before the simulation, with one line naming it, the pool and what
to do (exit 2), never the simulator's "stalled" traceback: the contiguous-KV policy (max_model_len reserved per
request) and static batching (the whole sequence) on a sliding-window layout; the report skips its contiguous-KV
baseline with a line saying why and completes.

gpt-oss-20b's layout (bundled config): 24 layers, 12 sliding-window (128 tokens) and 12 full attention, 8 KV heads
× 64 head_dim × 2 B × 2 (K, V) = 2,048 B per token and layer; a block is one 16-token page in each of a group's 12
layers: 12 × 16 × 2,048 = 393,216 B. Reserving n tokens at once holds ceil(n / 16) blocks in each group (the sliding
layers keep all of a reservation's tokens, as in the same step), 2 × ceil(n / 16) blocks.
"""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli

OSS = "openai/gpt-oss-20b"
# --num-gpu-blocks-override 10000: 9,999 usable (block 0 is the null block) = 9,999 × 393,216 B = 3.66 GiB. The paged
# start-up check passes: one 131,072-token request admits 8,192 full blocks + min(8,192, ceil((127 + 16,384 in
# flight) / 16) + 1 = 1,033) sliding = 9,225 ≤ 9,999. Contiguous: 2 × 131,072 / 16 = 16,384 blocks = 6.00 GiB >
# 9,999; the longest that fits: 2 × ceil(n / 16) ≤ 9,999 → ceil(n / 16) ≤ 4,999 → n ≤ 79,984
POOL = ("--gpu", "H100-SXM", "--num-gpu-blocks-override", "10000")


def test_contiguous_whose_reservation_outgrows_the_pool_is_one_line_exit_2(cli_entry):
    code, out, err = cli_entry("simulate", OSS, *POOL, "--policy", "contiguous", "--num-requests", "5")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and "stalled" not in err
    assert ("reserves max_model_len (131,072 tokens) per request at admission, 16,384 KV blocks (6.00 GiB), more "
            "than the pool's 9,999 usable blocks (3.66 GiB)") in err
    assert "--max-model-len 79984" in err and "--kv-allocation paged" in err


def test_contiguous_boundary_is_the_max_model_len_it_names(cli_entry):
    # 79,985 tokens: ceil(79,985 / 16) = 5,000 per group, 10,000 > 9,999 → refused; 79,984: 4,999 × 2 = 9,998 → runs
    code, _, err = cli_entry("simulate", OSS, *POOL, "--policy", "contiguous", "--max-model-len", "79985",
                             "--num-requests", "5", "--json")
    assert code == 2 and "10,000 KV blocks" in err
    r = run_cli("simulate", OSS, *POOL, "--policy", "contiguous", "--max-model-len", "79984", "--num-requests", "5",
                "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["summary"]["num_finished"] == 5


def test_contiguous_refusal_in_json_and_in_goodput(cli_entry):
    code, out, _ = cli_entry("simulate", OSS, *POOL, "--policy", "contiguous", "--num-requests", "5", "--json")
    e = json.loads(out)["error"]
    assert code == 2 and e["exit_code"] == 2 and "16,384 KV blocks" in e["message"]
    code, _, err = cli_entry("goodput", "--simulate", OSS, *POOL, "--policy", "contiguous", "--num-requests", "5",
                             "--slo", "ttft=1s")
    assert code == 2 and "16,384 KV blocks (6.00 GiB)" in err and err.count("\n") == 1


def test_contiguous_under_sglang_batching_is_refused_too(cli_entry):
    # SGLang's pool has page size 1: one block per token, 131,072 blocks for max_model_len; the L4's SGLang pool is
    # shorter than that (the refusal says by how much); SGLang's own start-up check only asks for one usable token
    code, _, err = cli_entry("simulate", OSS, "--gpu", "L4", "--policy", "sglang", "--kv-allocation", "contiguous",
                             "--no-enable-prefix-caching", "--num-requests", "5")
    assert code == 2 and "131,072 KV blocks" in err and "not one request could be admitted" in err


@pytest.mark.parametrize("prompt, refused", [("80000", True), ("79974", False)])
def test_static_batching_request_longer_than_the_pool_is_refused_before_the_run(cli_entry, prompt, refused):
    # static batching reserves prompt + output at admission: 80,000 + 10 = 80,010 tokens → 2 × ceil(80,010 / 16) =
    # 2 × 5,001 = 10,002 blocks > 9,999 (refused); 79,974 + 10 = 79,984 → 2 × 4,999 = 9,998 (runs)
    argv = ("simulate", OSS, *POOL, "--policy", "static", "--prompt-lengths", f"fixed:{prompt}", "--output-lengths",
            "fixed:10", "--num-requests", "2", "--rate", "1", "--json")
    if refused:
        code, _, err = cli_entry(*argv)
        assert code == 2 and err.count("\n") == 1 and "stalled" not in err
        assert "prompt + output 80,010 tokens) needs 10,002 KV blocks, more than the pool's 9,999" in err
        assert "--max-model-len 79984" in err
    else:
        r = run_cli(*argv)
        assert r.exit_code == 0 and json.loads(r.stdout)["summary"]["num_finished"] == 2


def test_report_skips_the_contiguous_baseline_with_why_and_completes(tmp_path):
    # gpt-oss-20b on one L4 (vLLM 0.33 plan): 13,200 blocks, 13,199 usable = 13,199 × 393,216 B = 4.83 GiB; the
    # contiguous baseline needs 16,384 blocks (6.00 GiB); longest fitting: ceil(n / 16) ≤ 6,599 → n ≤ 105,584
    out_html = tmp_path / "rep.html"  # one report: its JSON on stdout, its HTML in --out (report --json --out)
    r = run_cli("report", OSS, "--gpu", "L4", "--slo", "ttft=2s,tpot=100ms", "--num-requests", "100", "--out",
                str(out_html), "--json")
    assert r.exit_code == 0
    html = out_html.read_text()
    assert "under two engines" in html
    assert ("Not run, contiguous KV (max_model_len reserved per request): contiguous KV allocation reserves "
            "max_model_len (131,072 tokens) per request at admission, 16,384 KV blocks (6.00 GiB), more than the "
            "pool&#x27;s 13,199 usable blocks (4.83 GiB), so not one request could be admitted; with "
            "--max-model-len 105584 or less it would run.") in html
    s = json.loads(r.stdout)["engine_savings"]
    assert r.exit_code == 0 and s["contiguous"]["fit_max_model_len"] == 105584 and "summary" not in s["contiguous"]
    assert [r["comparison"] for r in s["ratios"]] == ["continuous ÷ static batching"]


def test_static_batching_sessions_are_held_to_max_model_len(cli_entry):
    # session turns are drawn during the run, so the longest the engine accepts stands for them: a request of
    # max_model_len 131,072 tokens → 2 × 131,072 / 16 = 16,384 blocks > 9,999 (refused before the run)
    code, _, err = cli_entry("simulate", OSS, *POOL, "--policy", "static", "--workload", "chat", "--sessions", "3",
                             "--max-model-len", "131072")
    assert code == 2 and "a request of max_model_len needs 16,384 KV blocks" in err and "--max-model-len 79984" in err


def test_report_skips_the_static_baseline_whose_request_outgrows_the_pool_and_completes(tmp_path):
    # gpt-oss-20b on one L4: 13,199 usable blocks (above). A trace of 99 requests of 1,000 + 100 tokens and a last one
    # of 110,000 + 10: static batching reserves its whole sequence, 2 × ceil(110,010 / 16) = 2 × 6,876 = 13,752
    # blocks > 13,199, so that baseline is refused before its run (StaticTooLongError); the longest that fits:
    # 2 × ceil(n / 16) ≤ 13,199 → n ≤ 6,599 × 16 = 105,584. The paged engine runs it (the sliding layers hold their
    # window only). Contiguous KV is skipped too (16,384 blocks for max_model_len): no baseline ran, no ratio
    trace = tmp_path / "long.csv"
    trace.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n"
                     + "".join(f"{i * 0.5},1000,100\n" for i in range(99)) + "49.5,110000,10\n")
    argv = ("report", OSS, "--gpu", "L4", "--slo", "ttft=30s,tpot=1s", "--trace", str(trace), "--num-requests", "100")
    out_html = tmp_path / "rep.html"  # one report: its JSON on stdout, its HTML in --out (report --json --out)
    r = run_cli(*argv, "--json", "--out", str(out_html))
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)["engine_savings"]
    assert s["static"]["skipped"] == (
        "static batching reserves a request's whole sequence at admission, and with the sliding-window layout the "
        "sliding layers hold all of it too: the longest request (prompt + output 110,010 tokens) needs 13,752 KV "
        "blocks, more than the pool's 13,199 usable blocks, so it could never be admitted")
    assert s["static"]["fit_max_model_len"] == 105584 and "summary" not in s["static"]
    assert "skipped" in s["contiguous"] and s["ratios"] == [] and "summary" in s["engine"]
    html = out_html.read_text()
    assert "under one engine. Not run, static batching (a batch runs until its longest member ends): static " in html
    assert "so it could never be admitted; with --max-model-len 105584 or less it would run." in html
