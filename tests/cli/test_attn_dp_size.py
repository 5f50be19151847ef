"""SGLang's ``--attn-dp-size N`` (0.5.22 on), which SGLang 0.5.23 reads as the deprecated ``--enable-dp-attention
--dp-size N`` (``arg_groups/parallel_hook.py::handle_deprecated_dp_attention``: attn_dp_size = dp_size, dp_size = 1):
every command that takes DP attention takes it with the same figures, refuses it where SGLang (or the release) does,
and prints the spelling the target release takes on its launch and check lines."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli

import kvledger
from kvledger.accounting.attn_dp import dp_attention_words

PLAN = ("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8")


def test_plan_attn_dp_size_is_the_old_spelling_s_plan():
    # DeepSeek-V3 on 8 H200s at TP 8 (tests/accounting/test_dp_attention.py): DP attention 8 gives each rank a pool of
    # 191,924 tokens, 8 × 191,924 = 1,535,392 in all; the same plan whichever spelling is given
    new, old = cli_json(*PLAN, "--attn-dp-size", "8"), cli_json(*PLAN, "--enable-dp-attention", "--dp-size", "8")
    assert new["memory"] == old["memory"] and new["data_parallel"] == old["data_parallel"]
    dp = new["data_parallel"]
    assert (dp["kv_tokens_per_rank"], dp["kv_tokens_total"], dp["attention_tp"]) == (191_924, 1_535_392, 1)
    # the note names 0.5.23's flag, and the old one as deprecated, in one clause
    assert any(n.startswith("--attn-dp-size 8 (SGLang 0.5.23 rules; --enable-dp-attention --dp-size 8 is its "
                            "deprecated spelling): 8 DP ranks on the 8 GPUs") for n in new["memory"]["notes"])
    # the Python API takes it by the same name (its document names the parameter, not the flag)
    api = kvledger.plan("deepseek-ai/DeepSeek-V3", "H200", engine="sglang", tp=8, attn_dp_size=8).to_dict()
    assert api["data_parallel"] == dp | {"flags": "attn_dp_size 8"}


def test_attn_dp_size_1_is_sglangs_default_no_dp_attention():
    # attn_dp_size 1 is SGLang's default: the plain TP 8 plan, 639,654 tokens (test_plan_dp_attention_dp1.py), no note
    d = cli_json(*PLAN, "--attn-dp-size", "1")
    assert d["memory"]["num_gpu_blocks"] == 639_654 and d.get("data_parallel") is None
    assert not any("dp-size" in n or "attn-dp" in n for n in d["memory"]["notes"])


@pytest.mark.parametrize(("args", "said"), [
    # vLLM has no attention DP size: one line naming vLLM's own DP flag
    (("--engine", "vllm", "--attn-dp-size", "8"),
     "--attn-dp-size 8 is SGLang's attention DP size; vLLM's DP ranks are --data-parallel-size N"),
    # 0.5.21's arg_groups/fields/parallel.py has attn_dp_size only as a derived width, no flag
    (("--attn-dp-size", "8", "--engine-version", "0.5.21"),
     "--attn-dp-size 8: SGLang 0.5.21 has no such flag (it came in 0.5.22); that release spells it "
     "--enable-dp-attention --dp-size 8"),
    # SGLang 0.5.23 keeps attn_dp_size 4 and reads --dp-size 8 as replicas, then refuses replicas with attention DP
    (("--attn-dp-size", "4", "--dp-size", "8", "--enable-dp-attention"),
     "--attn-dp-size 4 with --dp-size 8 --enable-dp-attention: two attention DP sizes; SGLang reads --dp-size next to "
     "--attn-dp-size 4 as 8 whole replicas"),
    # attn_dp_size 1 is SGLang's default, so it takes --dp-size 8 as the attention DP size: not the 1 given
    (("--attn-dp-size", "1", "--dp-size", "8", "--enable-dp-attention"),
     "SGLang takes --dp-size 8 as the attention DP size when --attn-dp-size is 1"),
    # parallel_hook.py asserts tp_size % attn_dp_size == 0
    (("--attn-dp-size", "3"), "--attn-dp-size 3 does not divide --tp 8: SGLang asserts tp_size % attn_dp_size == 0"),
    (("--attn-dp-size", "0"), "--attn-dp-size"),  # the range, [1, 1024] attention DP ranks
])
def test_plan_refuses_what_sglang_refuses(args, said):
    err = refused(*PLAN, *args)
    assert said in err and "\n" not in err


def test_a_release_with_the_flag_but_older_rules_is_refused_by_the_rules_not_the_flag():
    # 0.5.22 takes --attn-dp-size; DP attention's reserve and weight split were read in 0.5.23 only
    err = refused(*PLAN, "--attn-dp-size", "8", "--engine-version", "0.5.22")
    assert err.startswith("DP attention (--attn-dp-size, or --enable-dp-attention --dp-size) is planned by SGLang "
                          "0.5.23's rules")


def test_spelling_by_release():
    # server_args.py: --enable-dp-attention, deprecated for --attn-dp-size in 0.5.22 and 0.5.23; absent before
    assert dp_attention_words(8, None) == dp_attention_words(8, "0.5.22") == "--attn-dp-size 8"
    assert dp_attention_words(8, "0.5.21") == dp_attention_words(8, "0.4.9") == "--enable-dp-attention --dp-size 8"


def test_plan_dp_1_note_in_the_release_s_words():
    # --enable-dp-attention alone (dp_size 1), which SGLang ignores: 0.5.23 is told --attn-dp-size N, 0.5.3 --dp-size N
    new = cli_json(*PLAN, "--enable-dp-attention")["memory"]["notes"]
    old = cli_json(*PLAN, "--enable-dp-attention", "--engine-version", "0.5.3")["memory"]["notes"]
    said = [next(n for n in notes if n.startswith("--enable-dp-attention without --dp-size")) for notes in (new, old)]
    assert said[0].endswith("for DP attention give --attn-dp-size N (--enable-dp-attention is deprecated), N dividing "
                            "--tp")
    assert said[1].endswith("add --dp-size N for DP attention, N dividing --tp")


SIM = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--ep-size", "8",
       "--num-requests", "8")


def test_simulate_attn_dp_size_runs_the_lockstep_ranks():
    # the pool per rank is the plan's 191,924 tokens (above); round robin sends 1 of the 8 requests to each rank
    d = cli_json(*SIM, "--attn-dp-size", "8")
    dp = d["data_parallel"]
    assert (dp["kv_tokens_per_rank"], dp["requests_routed_per_rank"]) == (191_924, [1] * 8)
    assert any(n.startswith("data parallel: --attn-dp-size 8 simulated as 8 DP ranks in lock-step") for n in d["notes"])
    api = kvledger.simulate("deepseek-ai/DeepSeek-V3", "H200", policy="sglang", tp=8, ep_size=8, num_requests=8,
                            attn_dp_size=8).to_dict()["data_parallel"]
    assert (api["kv_tokens_per_rank"], api["requests_routed_per_rank"]) == (191_924, [1] * 8)


@pytest.mark.parametrize(("args", "said"), [
    (("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--attn-dp-size", "8"),
     "--attn-dp-size 8 is SGLang's attention DP size; vLLM's DP ranks are --data-parallel-size N"),
    ((*SIM, "--attn-dp-size", "4"), "--attn-dp-size 4 --tp 8: an attention DP size below --tp"),
    ((*SIM, "--attn-dp-size", "8", "--engine-version", "0.5.20"), "SGLang 0.5.20 has no such flag (it came in 0.5.22)"),
    (("cost", "--simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8",
      "--attn-dp-size", "8", "--dp-size", "8", "--slo", "ttft=2s", "--api", "DeepSeek:deepseek-chat"),
     "--attn-dp-size 8 with --dp-size 8: two attention DP sizes"),
])
def test_simulator_commands_refuse_what_sglang_or_the_simulation_refuses(args, said):
    err = refused(*args)
    assert said in err and "\n" not in err


def test_cost_on_a_file_refuses_it(tmp_path):
    from cli_run import records_file

    err = refused("cost", str(records_file(tmp_path)), "--api", "DeepSeek:deepseek-chat", "--attn-dp-size", "8")
    assert err.startswith("--attn-dp-size 8 applies to --simulate (SGLang's DP attention ranks in lock-step)")


SEARCH = ("search", "deepseek-ai/DeepSeek-V2-Lite", "--slo", "ttft=5s,tpot=200ms", "--gpus", "L40S", "--engine",
          "sglang", "--prompt-lengths", "fixed:1024", "--output-lengths", "fixed:128", "--num-requests", "50", "--rate",
          "1")


def test_search_attn_dp_size_runs_dp_attention_at_that_tp_and_launches_in_0_5_23_s_words():
    # DeepSeek-V2-Lite on 2 L40S (test_search_sglang_engine.py): each rank's pool 703,057 tokens, 2 ranks; the TP axis
    # is 2 alone, and the launch and check lines carry --attn-dp-size 2 (SGLang 0.5.23, the newest read)
    d = cli_json(*SEARCH, "--attn-dp-size", "2")
    assert d["spec"]["enable_dp_attention"] is True
    assert {e["tp"] for e in d["candidates"]} == {2}
    e = next(e for e in d["candidates"] if e["id"] == "nvidia_l40s:tp2:kv-auto")
    assert (e["plan"]["dp_size"], e["plan"]["num_gpu_blocks"]) == (2, 703_057)
    assert e["launch"]["sglang"].endswith("--page-size 1 --attn-dp-size 2 --ep-size 2")
    assert "--attn-dp-size 2 --ep-size 2" in e["launch"]["check"] and "--enable-dp-attention" not in str(e["launch"])


@pytest.mark.parametrize(("args", "said"), [
    (("--attn-dp-size", "2", "--tp", "1,2"), "--attn-dp-size 2 with --tp 1,2: the search simulates SGLang's DP "
                                             "attention at attention DP = TP"),
    (("--attn-dp-size", "2", "--engine-version", "0.5.21"), "SGLang 0.5.21 has no such flag (it came in 0.5.22)"),
])
def test_search_refuses_it_where_it_cannot_run(args, said):
    err = refused(*SEARCH, *args)
    assert said in err and "\n" not in err


def test_vllm_search_refuses_it_naming_sglang():
    err = refused("search", "deepseek-ai/DeepSeek-V2-Lite", "--slo", "ttft=5s", "--gpus", "L40S", "--attn-dp-size", "2")
    assert err.startswith("--attn-dp-size 2 is SGLang's DP attention, and this search plans and simulates vLLM: add "
                          "--engine sglang") and "\n" not in err


def test_report_refuses_it_under_vllm(tmp_path):
    err = refused("report", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "L40S", "--tp", "2", "--attn-dp-size", "2",
                  "--slo", "ttft=5s", "--api", "DeepSeek:deepseek-chat", "--out", str(tmp_path / "r.html"))
    assert err.startswith("--attn-dp-size 2 is SGLang's attention DP size") and not (tmp_path / "r.html").exists()


def test_help_names_it():
    for cmd in ("plan", "simulate", "cost", "goodput", "report", "search"):
        assert "--attn-dp-size" in run_cli(cmd, "--help").stdout, cmd


def test_report_takes_it_and_its_lines_carry_it(tmp_path):
    # DeepSeek-V2-Lite on 2 L40S, TP 2, EP 2, DP attention 2 (test_report_sglang_dp.py's layout): each rank's pool
    # 703,057 tokens; every kvledger command line and the engine line's SGLang launch carry 0.5.23's --attn-dp-size 2
    out = tmp_path / "r.html"
    d = cli_json("report", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "L40S", "--engine", "sglang", "--tp", "2",
                 "--ep-size", "2", "--attn-dp-size", "2", "--prompt-lengths", "1024", "--output-lengths", "128",
                 "--num-requests", "50", "--slo", "ttft=5s,tpot=200ms", "--api", "DeepSeek:deepseek-chat",
                 "--out", str(out))
    assert d["plan"]["data_parallel"]["kv_tokens_per_rank"] == 703_057
    assert all(" --ep-size 2 --attn-dp-size 2 " in d["commands"][k] for k in ("plan", "cost", "capacity"))
    assert "--enable-dp-attention" not in str(d["commands"])
    assert ("launched as python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V2-Lite --tp-size 2 "
            "--ep-size 2 --attn-dp-size 2;") in " ".join(out.read_text().split())
