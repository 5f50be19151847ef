"""``kvledger.cost``: its ``to_dict()`` is ``kvledger cost --json`` for the same inputs (a benchmark file, a
simulation), its parameters are the command's flags with underscores, and an error names the parameter, not the flag."""

from __future__ import annotations

import inspect
import json

import pytest
from api_cli_json import in_call_terms

import kvledger
from kvledger import InputError, NoAnswerError, strict_json

L8 = "meta-llama/Llama-3.1-8B"
# llmperf's leaderboard run of Llama-2-70B-chat on 4 H100s: 150 requests of 550 prompt tokens, 22,042 output tokens
LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


def cli(*argv: str) -> tuple[int, dict]:
    """(exit status, parsed --json) of ``kvledger ARGV --json`` run in this process."""
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    r = CliRunner().invoke(app, [*argv, "--json"])
    return r.exit_code, in_call_terms(json.loads(r.stdout), "cost")  # its notes name the call's parameters


def plain(d: dict) -> dict:
    return json.loads(strict_json.dumps(d))  # as the command prints it: strict JSON (a NaN is null)


def test_a_benchmark_file_is_the_cost_commands_json():
    r = kvledger.cost(LLMPERF, slo="ttft=500ms,tpot=50ms", api="OpenAI:gpt-4.1", utilization=0.5, gpu="H100",
                      gpu_provider="Nebius", num_gpus=4)
    rc, doc = cli("cost", LLMPERF, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--utilization", "0.5",
                  "--gpu", "H100", "--gpu-provider", "Nebius", "--num-gpus", "4")
    assert rc == 0 and plain(r.to_dict()) == doc
    # gpt-4.1 lists $2 per 1M input and $8 per 1M output tokens (api_prices.csv); the run's mean request is 550 in and
    # 22,042 / 150 = 146.947 out → 550 × 2e-6 + 146.947 × 8e-6 = 0.0011 + 0.0011756 = $0.0022756 per request
    assert doc["inputs"]["api_usd_per_request"] == pytest.approx(550 * 2e-6 + 22042 / 150 * 8e-6, rel=1e-12)
    # the API's per-1M-token ledgers are the list prices themselves; the self-hosted one is the report's own
    assert (r.report.api_input.total_usd, r.report.api_output.total_usd) == (2.0, 8.0)
    # the JSON writes a $/Mtok figure to 15 significant digits (strict_json.MONEY_DIGITS); the report keeps the float
    assert doc["totals"]["self_host_usd_per_mtok_input"] == float(f"{r.report.self_host_input.total_usd:.15g}")


def test_a_simulation_is_the_cost_commands_json_and_the_api_bill_is_tokens_times_price():
    workload = dict(prompt_lengths="fixed:512", output_lengths="fixed:64", num_requests=60)
    r = kvledger.cost(simulate=L8, gpu="H100", slo="ttft=200ms,tpot=50ms", api="OpenAI:gpt-4.1",
                      gpu_provider="Nebius", monthly_tokens="3B", cache=False, **workload)
    rc, doc = cli("cost", "--simulate", L8, "--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths",
                  "fixed:64", "--num-requests", "60", "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1",
                  "--gpu-provider", "Nebius", "--monthly-tokens", "3B")
    assert rc == 0 and plain(r.to_dict()) == doc
    m = doc["monthly"]
    # 3B tokens a month split as the requests are, 512 in : 64 out → 3e9 × 512/576 = 2,666.67 Mtok in and
    # 3e9 × 64/576 = 333.33 Mtok out; the API bill = 2,666.67 × $2 + 333.33 × $8 = 5,333.33 + 2,666.67 = $8,000
    assert (m["input_tokens"], m["output_tokens"]) == pytest.approx((3e9 * 512 / 576, 3e9 * 64 / 576))
    assert m["api"]["total_usd"] == pytest.approx(8000.0)
    # one H100 rented all month: 730 h × Nebius's $2.95 = $2,153.50, beside 0.25 engineer-month × $20,000
    assert [i["amount_usd"] for i in m["self_host"]["items"]] == pytest.approx([730 * 2.95, 5000.0])


def test_a_volume_as_a_number_is_the_same_as_its_text():
    args = dict(slo="ttft=500ms,tpot=50ms", api="OpenAI:gpt-4.1", gpu="H100", gpu_provider="Nebius", num_gpus=4)
    a = kvledger.cost(LLMPERF, monthly_tokens=3e9, **args).to_dict()
    assert a == kvledger.cost(LLMPERF, monthly_tokens="3B", **args).to_dict()
    assert a["monthly"]["api"]["total_usd"] > 0


def test_no_answer_raises_with_the_commands_json():
    with pytest.raises(NoAnswerError) as err:
        kvledger.cost(LLMPERF, slo="ttft=1ms", gpu="H100", num_gpus=4, api="OpenAI:gpt-4.1")
    rc, doc = cli("cost", LLMPERF, "--slo", "ttft=1ms", "--gpu", "H100", "--num-gpus", "4", "--api", "OpenAI:gpt-4.1")
    # no request has a TTFT of 1 ms or less: no cost per good token; the command exits 1 with the same document
    assert rc == 1 and plain(err.value.payload) == doc and doc["answer"] is None


@pytest.mark.parametrize(("kwargs", "words"), [
    (dict(utilization=1.5), "kvledger.cost: utilization 1.5 is out of range; allowed: (0, 1]"),
    (dict(monthly_tokens="-3B"), "kvledger.cost: monthly_tokens: '-3B' is negative"),
    (dict(run=5, num_gpus=4), "kvledger.cost: run 5 is out of range; allowed: [0, 0]"),
    (dict(rate=3.0), "kvledger.cost: rate describes a simulation; add simulate MODEL"),
    (dict(batch_share="half"), "kvledger.cost(batch_share=...): expected float, got str 'half'"),
    (dict(simulate=L8), "kvledger.cost: give either path (a benchmark output or records file) or simulate=MODEL"),
])
def test_a_bad_parameter_is_named_as_the_parameter(kwargs, words):
    with pytest.raises(InputError) as err:
        kvledger.cost(LLMPERF, slo="ttft=500ms", gpu="H100", **kwargs)
    assert words in str(err.value) and "--" not in str(err.value)


def test_a_simulation_without_a_gpu_names_the_parameters():
    with pytest.raises(InputError, match=r"^kvledger.cost: simulate needs gpu \(a catalog GPU"):
        kvledger.cost(simulate=L8, slo="ttft=500ms")


def test_the_parameters_are_the_commands_flags():
    from kvledger.cli.cost_cmd import flag_names

    # every flag of `kvledger cost` but the outputs (--json, --out, --force) and typer's completion flags (the
    # data-parallel group's included); FILE(s) is `path`, and `cache` decides the on-disk store as kvledger.goodput's
    left_out = {"--json", "--out", "--force", "--install-completion",
                "--show-completion", "files",
                # SGLang's spellings of --tp, --max-model-len, --max-num-seqs, --max-num-batched-tokens, --block-size:
                # the API takes vLLM's names, as plan's and simulate's do
                "--tp-size", "--context-length", "--max-running-requests", "--chunked-prefill-size", "--page-size",
                # SGLang 0.4.x's --enable-ep-moe: taken only to be refused (analyses/ep_flags.py), so not a parameter
                "--enable-ep-moe"}
    flags = {f.lstrip("-").replace("-", "_") for f in flag_names().values() if f not in left_out}
    assert set(inspect.signature(kvledger.cost).parameters) == flags | {"path", "cache"}


def test_the_flags_are_read_from_the_signature_as_click_reads_them_and_no_command_is_built_per_call(monkeypatch):
    import typer
    import typer.main

    from kvledger.cli.cost_cmd import flag_names, register

    # what click makes of the command's parameters (opts[0]: "--model" for served_model, "--run" for run_index,
    # "--quantization" for quantization declared ("--quantization", "-q")), less typer's completion flags of a
    # one-command app
    app = typer.Typer()
    register(app)
    by_click = {p.name: p.opts[0] for p in typer.main.get_command(app).params
                if p.name not in ("install_completion", "show_completion")}
    assert flag_names() == by_click
    assert (by_click["served_model"], by_click["run_index"], by_click["files"]) == ("--model", "--run", "files")
    # a call reads them from the signature: no click command is built (cached, cleared here to read them again)

    def no_command(*a, **k):
        raise AssertionError("built a click command to name a parameter")

    monkeypatch.setattr(typer.main, "get_command", no_command)
    flag_names.cache_clear()
    with pytest.raises(InputError, match=r"^kvledger.cost: seeds repeats the simulated SLO-capacity search per seed: "
                                         r"it applies to simulate, not to a measured FILE$"):
        kvledger.cost(LLMPERF, slo="ttft=500ms", seeds=2)


def test_data_parallel_size_prices_the_dp_ranks_as_the_command_does():
    # DeepSeek-V3 on H200, 8 DP ranks of TP 1 with expert parallelism (tests/cli/test_goodput_cost_dp.py): the
    # lock-step capacity search finds 4.8125 req/s per deployment of DP 8 × TP 1 = 8 GPUs; 10B tokens a month at 705 +
    # 116 tokens per request = 4.636 req/s, at 80% of 4.8125 = 3.85 per replica: ⌈4.636 / 3.85⌉ = 2 replicas of 8 GPUs
    d = kvledger.cost(simulate="deepseek-ai/DeepSeek-V3", gpu="H200", tp=1, data_parallel_size=8,
                      enable_expert_parallel=True, slo="ttft=2s,tpot=100ms", num_requests=50,
                      gpu_provider="CoreWeave", monthly_tokens="10B").to_dict()
    assert d["simulation"]["num_gpus"] == 8 and d["capacity"]["slo_capacity_req_per_s"] == 4.8125
    assert d["monthly"]["replicas"] == 2


def test_data_parallel_size_with_a_file_is_refused_as_the_command_refuses_it():
    with pytest.raises(InputError, match="applies to --simulate|applies to simulate"):
        kvledger.cost(LLMPERF, slo="ttft=500ms", gpu="H100", data_parallel_size=8)


def test_a_volume_per_day_is_read_as_the_flag_reads_it():
    # "10K/day" as --monthly-requests 10K/day: 10,000 × 730 h ÷ 24 = 304,166.67 requests a month, restated as typed
    args = dict(slo="ttft=500ms,tpot=50ms", api="OpenAI:gpt-4.1", gpu="H100", gpu_provider="Nebius", num_gpus=4)
    d = kvledger.cost(LLMPERF, monthly_requests="10K/day", **args).to_dict()["decision"]
    assert d["requests_per_month"] == pytest.approx(304_166.667, rel=1e-6)
    assert d["volume_how"].startswith("10,000 requests/day × 30.42 days = 304,167 requests/month; ")
    with pytest.raises(InputError, match=r"monthly_tokens: '100M/week': cannot read the rate unit 'week'"):
        kvledger.cost(LLMPERF, monthly_tokens="100M/week", **args)
