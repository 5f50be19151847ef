"""``--shared-prefix-tokens N``: one system prompt every request starts with, in simulate, goodput --simulate, search
and report; refused where the workload names its own prefixes."""

from __future__ import annotations

import json

import pytest
from cli_run import MODEL, refused, run_cli

SYN = ("simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:3000", "--output-lengths", "fixed:10",
       "--rate", "0.5", "--arrival-cv", "0", "--num-requests", "20")  # one request every 2 s: none overlaps another


@pytest.mark.parametrize(("n", "policy", "hit"), [
    (1999, "vllm", 1984),  # vLLM caches full blocks only: ⌊1999/16⌋ = 124 blocks × 16 = 1,984 tokens
    (2000, "vllm", 2000),  # ⌊2000/16⌋ = 125 blocks × 16 = 2,000 tokens
    (1999, "sglang", 1999),  # SGLang's radix cache at page size 1 reuses every shared token
])
def test_every_later_request_hits_the_shared_prefix(n, policy, hit):
    args = (*SYN, "--shared-prefix-tokens", str(n), "--policy", policy)
    doc = json.loads(run_cli(*args, "--json").stdout)
    s = doc["summary"]
    # the first of the 20 requests misses, each of the 19 later ones hits `hit` of its 3,000 prompt tokens
    assert (s["prefix_cache_hit_tokens"], s["prefix_cache_query_tokens"]) == (19 * hit, 20 * 3000)
    assert s["prefix_cache_hit_rate"] == pytest.approx(hit * 19 / (3000 * 20), rel=1e-12)
    assert doc["workload"]["shared_prefix_tokens"] == n and doc["workload"]["shared_prefix_requests"] == 20
    assert "prefix_ids" not in doc["workload"] and not any("by construction" in x for x in doc["notes"])
    text = " ".join(run_cli(*args).stdout.split())
    assert f"shared prefix {n:,} tokens (20 of 20 prompts reach it" in text
    assert f"prefix cache: hit rate {hit * 19 / 60000:.1%} ({19 * hit:,} of 60,000 prompt tokens)" in text
    assert "by construction" not in text


def test_a_prompt_shorter_than_the_prefix_is_left_unshared(tmp_path):
    # a lengths-only trace: 3,000, 1,000 and 3,000 prompt tokens, 10 s apart; prefix 2,000, B = 16. The 1,000-token
    # prompt is unshared (0 hits); the third hits the first's 125 blocks = 2,000 tokens: 2,000 of 7,000
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n0,3000,10\n10,1000,10\n20,3000,10\n")
    args = ("simulate", MODEL, "--gpu", "H100", "--trace", str(csv), "--shared-prefix-tokens", "2000")
    doc = json.loads(run_cli(*args, "--json").stdout)
    assert (doc["summary"]["prefix_cache_hit_tokens"], doc["summary"]["prefix_cache_query_tokens"]) == (2000, 7000)
    assert doc["workload"]["shared_prefix_requests"] == 2
    assert "shared prefix 2,000 tokens (2 of 3 prompts reach it" in " ".join(run_cli(*args).stdout.split())


def test_refused_where_the_workload_names_its_own_prefixes_or_the_size_is_bad():
    base = ("simulate", MODEL, "--gpu", "H100", "--shared-prefix-tokens", "2000")
    assert "mooncake (its hash ids) already names which prompts share" in refused(*base, "--trace", "mooncake")
    assert "--workload chat (each session's system prompt" in refused(*base, "--workload", "chat")
    assert "--workload agent (each session's system prompt" in refused(
        "search", MODEL, "--gpus", "H100", "--slo", "ttft=1s", "--workload", "agent", "--shared-prefix-tokens", "100")
    assert "--shared-prefix-tokens 0 is out of range" in refused(*base[:-1], "0")
    # search: refused by its input checks with simulate's words (exit 2), not by each candidate's simulation
    # (formerly exit 1, "1 rejected for simulation error" and a --resume hint)
    search = ("search", MODEL, "--gpus", "H100", "--tp", "1", "--trace", "mooncake", "--slo", "ttft=500ms,tpot=50ms",
              "--num-requests", "300", "--shared-prefix-tokens", "1500", "--rate", "2")
    assert "mooncake (its hash ids) already names which prompts share" in refused(*search)
    assert "add --simulate MODEL" in refused("goodput", "x.json", "--slo", "ttft=1s", "--shared-prefix-tokens", "5")


def test_search_spec_check_refuses_it_on_a_trace_with_hash_ids_and_keeps_it_on_one_without(monkeypatch):
    from kvledger.analyses.search import runner
    from kvledger.analyses.search.spec import Axes, SearchSpec
    from kvledger.errors import InputError

    monkeypatch.setattr(runner, "make_candidates", lambda *a, **k: pytest.fail("a candidate was planned"))
    spec = SearchSpec(model=MODEL, slo="ttft=1s", trace="mooncake", num_requests=50, shared_prefix_tokens=1500,
                      rate_req_per_s=2.0)
    with pytest.raises(InputError, match="the workload mooncake \\(its hash ids\\) already names"):
        spec.check()
    with pytest.raises(InputError, match="already names"):  # the Python API's planning checks the spec first
        runner.plan_candidates(spec, Axes(gpus=("H100",), tps=(1,)))
    SearchSpec(model=MODEL, slo="ttft=1s", trace="azure-conv", num_requests=50, shared_prefix_tokens=1500,
               rate_req_per_s=2.0).check()  # a trace without prefix ids: kept


def test_goodput_probes_carry_it():
    doc = json.loads(run_cli("goodput", "--simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:3000",
                             "--output-lengths", "fixed:10", "--num-requests", "200", "--shared-prefix-tokens", "2000",
                             "--slo", "ttft=200ms", "--target", "0.9", "--json").stdout)
    # fixed 3,000-token prompts: all 200 reach the 2,000-token prefix, in every probe
    assert doc["simulation"]["workload"]["shared_prefix_tokens"] == 2000
    assert doc["simulation"]["workload"]["shared_prefix_requests"] == 200


def test_search_and_report_hand_it_to_every_simulation():
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.search.spec import Candidate, SearchSpec
    from kvledger.analyses.serving import decision_data
    from kvledger.cli.quick_argv import parse_simulate
    from kvledger.cli.report_flags import ReportBillFlags, ReportEngineFlags, ReportRunFlags, report_request

    spec = SearchSpec(model=MODEL, slo="ttft=1s", shared_prefix_tokens=700)
    assert sim_args(spec, Candidate("nvidia_h100_sxm", 1)).shared_prefix_tokens == 700
    assert spec.to_dict()["shared_prefix_tokens"] == 700 and "shared_prefix_tokens" not in SearchSpec(
        model=MODEL, slo="ttft=1s").to_dict()  # absent unless given: an older search ledger still resumes
    req = report_request(MODEL, "H100", "ttft=1s", ReportRunFlags(shared_prefix_tokens=700), ReportEngineFlags(),
                         ReportBillFlags(), None)
    assert decision_data.sim_args(req).shared_prefix_tokens == 700
    assert parse_simulate([MODEL, "--gpu", "H100", "--shared-prefix-tokens", "700"])["shared_prefix_tokens"] == 700
    assert parse_simulate([MODEL, "--gpu", "H100", "--shared-prefix-tokens", "1.5"]) is None  # typer's to refuse


@pytest.mark.parametrize(("extra", "said"), [
    # 10 tokens is under one 16-token block: vLLM hashes and caches full blocks only, so nothing is reused
    (["--shared-prefix-tokens", "10"], "--shared-prefix-tokens 10 is shorter than one 16-token KV block"),
    # prefix caching off: the system prompt is prefilled again for every request
    (["--shared-prefix-tokens", "1500", "--no-enable-prefix-caching"],
     "--shared-prefix-tokens 1,500 with prefix caching off: no prompt reuses the shared prefix")])
def test_a_shared_prefix_that_cannot_be_reused_says_why(extra, said):
    # 30 prompts of 3,000 tokens, 1 req/s: each reaches the prefix, yet the hit rate is 0 (a fresh-user trial saw a
    # silent 0.0%)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths",
                                   "fixed:3000", "--output-lengths", "fixed:10", "--rate", "1", "--num-requests", "30",
                                   *extra, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["summary"]["prefix_cache_hit_rate"] == 0.0
    assert any(n.startswith(said) for n in d["notes"])
