"""``--allreduce-link-share X`` on the commands that price a roofline as ``simulate`` does without simulating one
deployment's run themselves: offload, report, disagg, spec-decode (and fp8-kv, which takes the same flag group as
spec-decode). Each takes EngineFlags' definition, prices its steps at that share of the link, names it in its step
cost, and refuses a share outside (0, 1] in one line with exit status 2.

Worked by hand from ``accounting/tp_comm.py`` for Llama-3.1-8B (hidden 4,096, 32 layers: 64 all-reduces a step) at
TP 2 on two L40S: no scale-up link, so the all-reduces run over the host link, PCIe Gen4 x16, 64 GB/s both ways
(catalog), 32 GB/s a direction; by default at 0.35 of it, 11.2 GB/s; at ``--allreduce-link-share 0.7``, 22.4 GB/s.
The L40S has peer access, so calls under 8 MiB take vLLM's custom all-reduce, one-shot at 2 ranks:
``6 µs + (n − 1)·S / link``; at or over 8 MiB NCCL's ``latency + 2(n − 1)/n · S / link`` — at n = 2 both byte terms
are ``S / link``, so the share moves a step by ``64 · S · (1/11.2e9 − 1/22.4e9) = 64 · S / 22.4e9`` s.

* a decode step of one sequence, S = 4,096 × 2 B = 8,192 B: 64 × (6 µs + 8,192 B / 11.2 GB/s) = 430.8114 µs at the
  default, 64 × (6 µs + 8,192 B / 22.4 GB/s) = 407.4057 µs at 0.7: 23.4057 µs less (a step of n sequences, n ×).
* a 1,025-token prefill (offload's recompute of a 1,024-token prefix and one new token), S = 8,396,800 B (NCCL):
  64 × 8,396,800 / 22.4e9 = 23.99086 ms less.
* a 374-token prefill (disagg's one azure-conv request at seed 0), S = 3,063,808 B (one-shot): 8.75374 ms less.
* fp8-kv's curve at 512 tokens, batch 63: S = 516,096 B, 1.47456 ms less.
* the draft Llama-3.2-3B (hidden 3,072, 28 layers: 56 calls of 6,144 B) at k = 3: 3 × 56 × 6,144 / 22.4e9 = 46.08 µs
  less per round.
* the report's plan section prefill chunk, 2,048 tokens, S = 16,777,216 B (NCCL, L40S an sm89 GPU: the A100 latency
  fit at 2 ranks, 53.10176 µs): 64 × (53.10176 µs + 16,777,216 / 22.4e9 s) = 51.33342 ms at 0.7.
"""

from __future__ import annotations

import dataclasses

import pytest
from cli_run import MODEL, cli_json, refused

GPU = "L40S"
SHARE = "0.7"
DECODE_DEFAULT_S = 64 * (6e-6 + 8192 / 11.2e9)  # 430.8114 µs
DECODE_07_S = 64 * (6e-6 + 8192 / 22.4e9)  # 407.4057 µs
ONE_SEQ_S = DECODE_DEFAULT_S - DECODE_07_S  # 23.4057 µs


def _less(nbytes: float, calls: int = 64) -> float:
    """How much less ``calls`` all-reduces of ``nbytes`` each take at 0.7 of the link than at the default 0.35, s."""
    return calls * nbytes * (1 / 11.2e9 - 1 / 22.4e9)


def _both(*args: str) -> tuple[dict, dict]:
    """(the command's JSON at the default share, at --allreduce-link-share 0.7)."""
    return cli_json(*args), cli_json(*args, "--allreduce-link-share", SHARE)


def _given(step_cost: dict) -> None:
    """The step cost description names the given share, as simulate's does (roofline_choice.link_data, link_words)."""
    assert (step_cost["allreduce_link_share"], step_cost["allreduce_link_share_source"]) == (
        0.7, "given by --allreduce-link-share")
    assert ("over PCIe at 70% of the host link's 32 GB/s a direction (given by --allreduce-link-share; the default "
            "rule 35%, range 20%–65%)") in step_cost["source"]


def _default(step_cost: dict) -> None:
    assert (step_cost["allreduce_link_share"], step_cost["allreduce_link_share_source"]) == (
        0.35, "the default rule over PCIe (kvledger.accounting.tp_comm)")


def test_the_hand_figures():
    assert DECODE_DEFAULT_S * 1e6 == pytest.approx(430.8114, abs=1e-4)
    assert DECODE_07_S * 1e6 == pytest.approx(407.4057, abs=1e-4)
    assert ONE_SEQ_S == pytest.approx(_less(8192), rel=1e-12)
    assert _less(1025 * 8192) * 1e3 == pytest.approx(23.99086, abs=1e-5)
    assert _less(374 * 8192) * 1e3 == pytest.approx(8.75374, abs=1e-5)
    assert _less(63 * 8192) * 1e3 == pytest.approx(1.47456, abs=1e-5)
    assert 3 * _less(6144, 56) * 1e6 == pytest.approx(46.08, abs=1e-6)
    assert 64 * (53.10176e-6 + 16_777_216 / 22.4e9) * 1e3 == pytest.approx(51.33342, abs=1e-5)


def test_spec_decode_prices_the_target_and_the_draft_at_the_share():
    args = ("spec-decode", MODEL, "--gpu", GPU, "--tp", "2", "-k", "3", "--acceptance", "0.7",
            "--draft-model", "meta-llama/Llama-3.2-3B")
    base, given = _both(*args)
    (b1, b2), (g1, g2) = base["rows"][:2], given["rows"][:2]
    assert (b1["batch"], b2["batch"], g1["batch"], g2["batch"]) == (1, 2, 1, 2)
    assert b1["base_step_s"] - g1["base_step_s"] == pytest.approx(ONE_SEQ_S, rel=1e-6)
    assert b2["base_step_s"] - g2["base_step_s"] == pytest.approx(2 * ONE_SEQ_S, rel=1e-6)
    # the draft model's own roofline takes the target's share (spec_decode.py: its RooflineStepCost)
    assert b1["draft_s"] - g1["draft_s"] == pytest.approx(3 * _less(6144, 56), rel=1e-6)
    assert g1["speedup"] > b1["speedup"]
    _default(base["step_cost"])
    _given(given["step_cost"])


def test_offload_prices_the_break_even_and_the_runs_at_the_share():
    args = ("offload", MODEL, "--gpu", GPU, "--tp", "2", "--kv-offloading-size", "64", "--sessions", "8",
            "--session-rate", "1")
    base, given = _both(*args)
    (b,), (g,) = base["kv_tiers"]["break_even"], given["kv_tiers"]["break_even"]
    assert b["suffix_tokens"] == g["suffix_tokens"] == 1
    # the load path: the load, then a one-token step after the 1,024 cached (one sequence's 8,192 B a call)
    assert b["load_s_per_1k"] - g["load_s_per_1k"] == pytest.approx(ONE_SEQ_S, rel=1e-6)
    assert b["recompute_s_per_1k"] - g["recompute_s_per_1k"] == pytest.approx(_less(1025 * 8192), rel=1e-6)
    ttft = "tier_judgment", "ttft_s", "mean", "with_tier"
    assert given[ttft[0]][ttft[1]][ttft[2]][ttft[3]] < base[ttft[0]][ttft[1]][ttft[2]][ttft[3]]
    _default(base["step_cost"])
    _given(given["step_cost"])


def test_disagg_prices_every_pool_at_the_share():
    args = ("disagg", MODEL, "--gpu", GPU, "--link", "pcie", "--tp", "2", "--num-gpus", "4", "--num-requests", "1",
            "--no-tune")
    base, given = _both(*args)
    assert base["workload"]["prompt_tokens_mean"] == 374.0  # azure-conv's first request at seed 0
    assert [d["label"] for d in base["deployments"]] == [d["label"] for d in given["deployments"]] == [
        "colocated 2×TP2", "1P(TP2):1D(TP2)"]
    for b, g in zip(base["deployments"], given["deployments"]):
        # one request: its prefill is one 374-token step, each decode step one sequence's
        assert b["ttft_s"]["mean"] - g["ttft_s"]["mean"] == pytest.approx(_less(374 * 8192), rel=1e-6)
        assert b["tpot_s"]["mean"] - g["tpot_s"]["mean"] == pytest.approx(ONE_SEQ_S, rel=1e-6)
    _default(base["step_cost"])
    _given(given["step_cost"])


def test_fp8_kv_takes_the_flag_with_spec_decodes_group():
    base, given = _both("fp8-kv", MODEL, "--gpu", GPU, "--tp", "2")
    b, g = base["curve"][0], given["curve"][0]
    assert (b["context_tokens"], b["batch"], g["batch"]) == (512, 63, 63)
    assert b["bf16_step_s"] - g["bf16_step_s"] == pytest.approx(_less(63 * 8192), rel=1e-6)
    _given(given["step_cost"])


def test_report_simulates_and_plans_at_the_share_and_its_commands_carry_it(tmp_path):
    args = ("report", MODEL, "--gpu", GPU, "--tp", "2", "--slo", "ttft=2s,tpot=100ms", "--num-requests", "50",
            "--gpu-usd-per-hour", "1", "--force", "--out", str(tmp_path / "r.html"))
    base, given = _both(*args)
    _default(base["cost"]["simulation"]["step_cost"])
    _given(given["cost"]["simulation"]["step_cost"])
    # faster all-reduces: more requests within the SLO per replica
    assert given["cost"]["capacity"]["slo_capacity_req_per_s"] > base["cost"]["capacity"]["slo_capacity_req_per_s"]
    # the plan section is `plan --allreduce-link-share 0.7`'s (its prefill chunk's all-reduces, by hand above)
    g_ar, b_ar = (d["plan"]["roofline"]["prefill"]["allreduce_s"] for d in (given, base))
    assert g_ar == pytest.approx(64 * (53.10176e-6 + 16_777_216 / 22.4e9), rel=1e-6)  # 51.33342 ms
    assert b_ar == pytest.approx(64 * (53.10176e-6 + 16_777_216 / 11.2e9), rel=1e-6)  # 99.26832 ms
    for key in ("plan", "cost", "capacity", "sweep_point", "engine_savings"):
        assert " --allreduce-link-share 0.7 " in given["commands"][key], key
        assert "--allreduce-link-share" not in base["commands"][key], key


COMMANDS = {
    "offload": ("offload", MODEL, "--gpu", GPU, "--tp", "2", "--kv-offloading-size", "64"),
    "report": ("report", MODEL, "--gpu", GPU, "--tp", "2", "--slo", "ttft=2s"),
    "disagg": ("disagg", MODEL, "--gpu", GPU, "--link", "pcie", "--tp", "2"),
    "spec-decode": ("spec-decode", MODEL, "--gpu", GPU, "--tp", "2", "-k", "3", "--acceptance", "0.7"),
    "fp8-kv": ("fp8-kv", MODEL, "--gpu", GPU, "--tp", "2"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_takes_engine_flags_definition(command):
    import typer

    from kvledger.cli.flag_groups import EngineFlags
    from kvledger.cli.main import build_app

    field = next(f for f in dataclasses.fields(EngineFlags) if f.name == "allreduce_link_share")
    param = next(p for p in typer.main.get_command(build_app(command)).commands[command].params
                 if p.name == "allreduce_link_share")
    assert param.opts == ["--allreduce-link-share"]
    assert param.help == field.metadata["help"]


@pytest.mark.parametrize("value", ["0", "1.5"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_refuses_a_share_outside_0_1_in_one_line_with_status_2(command, value, cli_entry):
    args = (*COMMANDS[command], "--allreduce-link-share", value)
    msg = f"--allreduce-link-share {value} is out of range; allowed: (0, 1] (fraction)"
    assert refused(*args) == msg
    # the console entry point (kvledger.cli.main.run, in this process: the line and status a user's shell gets)
    code, out, err = cli_entry(*args)
    assert (code, err.strip(), out) == (2, f"error: {msg}", ""), err
