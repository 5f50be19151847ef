"""The data-parallel flags through the CLI: `plan` takes the engines' spellings and prints the ranks' figures; the
simulator-based commands refuse them with one paragraph and exit 2; an MLA plan at TP > 1 names DP attention."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})


def run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def console(monkeypatch, capsys, *args) -> tuple[int, str]:
    """(exit status, stderr) of the real console entry point, which turns a KvLedgerError into exit 2."""
    from kvledger.cli.main import run as main_run

    monkeypatch.setattr(sys, "argv", ["kvledger", *args])
    with pytest.raises(SystemExit) as e:
        main_run()
    return e.value.code, capsys.readouterr().err


def test_plan_takes_sglang_dp_attention_and_prints_per_rank_and_total():
    r_args = ("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8",
              "--enable-dp-attention", "--dp-size", "8")
    r = run(*r_args)
    assert r.exit_code == 0, r.output
    assert "concurrency (per DP rank)" in r.stdout
    # 191,924 tokens per rank (test_dp_attention.py: mem_fraction_static 0.758 with the prefill graphs' 1.5 GiB)
    text = " ".join(r.stdout.split())
    assert "KV 8 × 191,924 = 1,535,392 tokens in all" in text
    # the short plan lists the ranks' totals (8 × 93 / 23 / 5 / 1 / 1 per rank); --verbose each product
    assert "requests held at once in all: 744 / 184 / 40 / 8 / 8 at 2,048 / 8,192 / 32,768 / 131,072 / 163,840" in text
    assert "32,768 tokens: 8 × 5 = 40 requests" in " ".join(run(*r_args, "--verbose").stdout.split())
    # the DP line names the flag SGLang 0.5.23 takes (--attn-dp-size, from 0.5.22) and the deprecated one given
    assert ("data parallel --attn-dp-size 8 (SGLang 0.5.23 rules; --enable-dp-attention --dp-size 8 is its "
            "deprecated spelling)") in text
    # the verdict counts one rank's pool and says so, with the ranks' total: 191,924 tokens per rank hold 1 request of
    # max_model_len 163,840 (1.17x), so 8 ranks hold 8 × 1 = 8
    assert ("fits (per DP rank: each of the 8 ranks has its own pool, 8 × 1 = 8 163,840-token requests in all): 1 "
            "concurrent 163,840-token request") in " ".join(r.stdout.split())


def test_plan_json_carries_the_dp_section_only_with_dp():
    d = json.loads(run("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "8",
                       "--enable-expert-parallel", "--json").stdout)
    assert d["data_parallel"]["data_parallel_size"] == 8 and d["data_parallel"]["kv_tokens_total"] == \
        8 * d["data_parallel"]["kv_tokens_per_rank"]
    assert d["settings"]["data_parallel_size"] == 8
    plain = json.loads(run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--json").stdout)
    assert "data_parallel" not in plain and "dp_remedy" not in plain and "data_parallel_size" not in plain["settings"]


def test_plan_mla_at_tp8_names_dp_attention():
    # SGLang 0.5.23, DeepSeek-V3 at TP 8 on H200: 639,654 KV tokens, each GPU a copy of the latent head; DP attention
    # 8 × 191,924 = 1,535,392 on the same GPUs, ÷ 639,654 = 2.40×: the short plan's note gives the facts in one note,
    # --verbose the whole of it
    args = ("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8")
    short, full = " ".join(run(*args).stdout.split()), " ".join(run(*args, "--verbose").stdout.split())
    assert ("note: MLA's latent KV is copied on all 8 TP ranks: --attn-dp-size 8 holds 2.40× the KV "
            "tokens on these GPUs (8 × 191,924 against 639,654, SGLang 0.5.23 rules)") in short
    assert "note: MLA keeps one latent KV head" in full and "8 × 191,924 = 1,535,392 KV tokens on the same 8" in full


@pytest.mark.parametrize("args", [("--tp", "8", "--enable-dp-attention", "--dp-size", "3"),
                                  ("--tp", "8", "--dp-size", "8")])
def test_plan_refuses_bad_sglang_combinations(monkeypatch, capsys, args):
    code, err = console(monkeypatch, capsys, "plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang",
                        *args)
    assert code == 2 and "--dp-size" in err


@pytest.mark.parametrize("cmd", [("goodput", "--simulate"), ("cost", "--simulate")])  # simulate: test_dp_simulate
@pytest.mark.parametrize(("args", "said"), [
    (("--tp", "8", "--data-parallel-size", "8"), "without --enable-expert-parallel"),  # simulate's words (the plan's)
    (("--enable-dp-attention",), "--enable-dp-attention needs --dp-size above 1: simulate takes"),  # simulate's
    # vLLM's pipeline loop was read from 0.19.0 on (sim_pp.py): an earlier release refused on every command's path
    (("--pp", "2", "--engine-version", "0.18.0"), "--pp 2 with --engine-version 0.18.0")])
def test_simulator_commands_refuse_what_simulate_refuses(monkeypatch, capsys, cmd, args, said):
    code, err = console(monkeypatch, capsys, *cmd, "deepseek-ai/DeepSeek-V3", "--gpu", "H200", *args,
                        "--slo", "ttft=1s", "--num-requests", "50")
    assert code == 2 and said in err and "No such option" not in err


def test_dp_verdict_with_context_keeps_the_max_model_len_total():
    # Llama-3.1-8B on H100, DP 4: 28,160 blocks of 16 per rank (28,159 usable). 4,096 tokens = 256 blocks →
    # 28,159 // 256 = 109 per rank, 4 × 109 = 436; 131,072 tokens = 8,192 blocks → 28,159 // 8,192 = 3, 4 × 3 = 12,
    # stated though --context asked only 4,096.
    res = run("plan", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100-SXM", "--data-parallel-size", "4",
              "--context", "4096")
    assert res.exit_code == 0
    assert ("each of the 4 ranks has its own pool, 4 × 109 = 436 4,096-token requests in all, "
            "4 × 3 = 12 131,072-token requests in all") in res.output


def test_simulate_refusal_names_policy_not_engine(monkeypatch, capsys):
    # simulate has no --engine: a vLLM-only flag under --policy sglang is refused naming --policy (the quick path too).
    code, err = console(monkeypatch, capsys, "simulate", "google/gemma-2-9b-it", "--gpu", "H100-SXM", "--policy",
                        "sglang", "--disable-hybrid-kv-cache-manager")
    assert code == 2
    assert "with --policy sglang it would be ignored: drop it, or use --policy vllm" in " ".join(err.split())
