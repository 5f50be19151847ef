"""vLLM's --enable-expert-parallel in search (an axis for a MoE model's candidates at TP > 1), report and disagg."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.analyses.search import Axes, Candidate, parse_candidate_id
from kvledger.analyses.search.spec import make_candidates
from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
MOE = "Qwen/Qwen3-30B-A3B"
SMALL = ["--gpus", "H100", "--tp", "1,2", "--slo", "ttft=2s,tpot=100ms", "--num-requests", "60",
         "--max-model-len", "8K", "--rate", "5", "--backend", "serial"]


def _search(model: str, *extra: str) -> dict:
    res = runner.invoke(app, ["search", model, *SMALL, *extra, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_moe_search_tries_expert_parallel_at_tp2_with_its_launch_command():
    d = _search(MOE)
    by_id = {c["id"]: c for c in d["candidates"]}
    assert list(by_id) == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto",
                           "nvidia_h100_sxm:tp2:kv-auto:ep"]
    ep = by_id["nvidia_h100_sxm:tp2:kv-auto:ep"]
    assert ep["status"] == "feasible" and ep["layout"] == "tp2+ep" and ep["enable_expert_parallel"] is True
    assert ep["plan"]["enable_expert_parallel"] is True
    assert ep["launch"]["vllm"].endswith("--enable-expert-parallel")
    assert "--enable-expert-parallel" in ep["launch"]["check"]
    assert "--ep-size" in ep["launch"]["note"] and "--enable-expert-parallel" not in ep["launch"]["sglang"]
    for cid in ("nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"):  # off: vLLM's default, no key
        assert "enable_expert_parallel" not in by_id[cid]
        assert "--enable-expert-parallel" not in by_id[cid]["launch"]["vllm"]


def test_the_flag_fixes_the_axis():
    on = [c["id"] for c in _search(MOE, "--enable-expert-parallel")["candidates"]]
    assert on == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto:ep"]  # TP 1: vLLM ignores the flag
    off = [c["id"] for c in _search(MOE, "--no-enable-expert-parallel")["candidates"]]
    assert off == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"]


TP1_NOTE = ("--enable-expert-parallel changes nothing at TP 1 with data parallel 1 (vLLM turns expert parallelism on "
            "only when TP × DP > 1)")


def test_the_flag_at_tp1_is_said_to_change_nothing():
    only = ["--gpus", "H100", "--tp", "1", *SMALL[4:], "--enable-expert-parallel"]
    note = TP1_NOTE + ": every candidate is at TP 1, so none runs with expert parallelism"
    assert note in json.loads(runner.invoke(app, ["search", MOE, *only, "--json"]).stdout)["notes"]
    assert note in " ".join(runner.invoke(app, ["search", MOE, *only]).output.split())
    mixed = _search(MOE, "--enable-expert-parallel")["notes"]
    assert TP1_NOTE + ": the TP 1 candidates run without it (those at TP > 1 with it)" in mixed
    assert not any("changes nothing" in n for n in _search(MOE)["notes"])  # the axis left free: no note


def test_a_dense_model_gets_no_expert_parallel_axis_and_the_flag_is_refused():
    d = _search("meta-llama/Llama-3.2-3B")
    assert [c["id"] for c in d["candidates"]] == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"]
    assert all("enable_expert_parallel" not in c for c in d["candidates"])
    res = runner.invoke(app, ["search", "meta-llama/Llama-3.2-3B", *SMALL, "--enable-expert-parallel"])
    assert isinstance(res.exception, InputError) and "has no routed experts" in str(res.exception)


def test_candidate_ids_names_and_ledger_entries_round_trip():
    c = parse_candidate_id("nvidia_h100_sxm:tp2:kv-auto:ep")
    assert c.enable_expert_parallel is True and c.id == "nvidia_h100_sxm:tp2:kv-auto:ep" and c.layout == "tp2+ep"
    assert Candidate.from_entry(c.to_dict()) == c
    plain = Candidate("nvidia_h100_sxm", 2)
    assert "enable_expert_parallel" not in plain.to_dict() and Candidate.from_entry(plain.to_dict()) == plain
    moe = make_candidates(Axes(gpus=("H100",), tps=(1, 2, 4)), 4, moe=True)
    assert [x.id.split(":", 1)[1] for x in moe] == ["tp1:kv-auto", "tp2:kv-auto", "tp2:kv-auto:ep", "tp4:kv-auto",
                                                    "tp4:kv-auto:ep"]
    assert len(make_candidates(Axes(gpus=("H100",), tps=(1, 2, 4)), 4)) == 3  # dense: no axis
    res = runner.invoke(app, ["search", MOE, "--gpus", "H100", "--tp", "2", "--slo", "ttft=2s,tpot=100ms", "--rate",
                              "5", "--show-command", "h100_sxm tp2+ep auto"])
    assert res.exit_code == 0, res.output
    assert "nvidia_h100_sxm:tp2:kv-auto:ep" in res.output and "--enable-expert-parallel" in res.output


def test_report_passes_the_flag_to_its_plan_and_simulations():
    res = runner.invoke(app, ["report", MOE, "--gpu", "H100", "--tp", "2", "--enable-expert-parallel", "--slo",
                              "ttft=2s,tpot=100ms", "--num-requests", "60", "--api", "OpenAI:gpt-4.1", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["plan"]["settings"]["enable_expert_parallel"] is True
    assert any(n.startswith("--enable-expert-parallel (EP 2") for n in d["plan"]["memory"]["notes"])
    assert any(n.startswith("--enable-expert-parallel (EP 2") for n in d["cost"]["simulation"]["notes"])
    assert all("--enable-expert-parallel" in line for line in d["commands"].values())
    res = runner.invoke(app, ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--enable-expert-parallel",
                              "--slo", "ttft=2s,tpot=100ms", "--num-requests", "60", "--api", "OpenAI:gpt-4.1",
                              "--json"])
    assert isinstance(res.exception, InputError) and "has no routed experts" in str(res.exception)


def test_disagg_takes_the_flag_in_every_pool():
    args = ["disagg", MOE, "--gpu", "H100", "--tp", "2", "--num-requests", "60", "--json"]
    off, on = (runner.invoke(app, args + extra) for extra in ([], ["--enable-expert-parallel"]))
    assert off.exit_code == 0 and on.exit_code == 0, on.output
    assert "expert parallelism over 2 ranks" in on.output and "expert parallelism" not in off.output
    assert json.loads(on.stdout) != json.loads(off.stdout)


def test_the_csv_layout_names_expert_parallelism_as_the_table_does():
    # the CSV's layout column read "tp2" for nvidia_h100_sxm:tp2:kv-auto:ep (and "tp1" for a disaggregated unit):
    # it is the candidate's layout, as the table's candidate column and --json's "layout" give it
    from types import SimpleNamespace

    from kvledger.analyses.search import csv_rows

    cands = [parse_candidate_id("nvidia_h100_sxm:tp2:kv-auto"), parse_candidate_id("nvidia_h100_sxm:tp2:kv-auto:ep"),
             parse_candidate_id("nvidia_h100_sxm:p1xtp1+d1xtp2:kv-auto")]
    entries = [{**c.to_dict(), "status": "rejected", "reason": "invalid setting"} for c in cands]
    rows = csv_rows(SimpleNamespace(ranking=[], frontier=[], entries=entries))
    assert [r["layout"] for r in rows] == ["tp2", "tp2+ep", "(p)1×tp1 + (d)1×tp2"]
    assert [r["tp"] for r in rows] == [2, 2, 1]


def test_default_tp_axis_keeps_tp8_for_four_kv_heads():
    # vLLM QKVParallelLinear at tp_size ≥ total_num_kv_heads keeps one head a rank, divide(tp, kv) copies: Qwen3-235B's
    # 4 KV heads run at TP 8 (2 copies each). The default axis dropped TP 8, so on H100 (TP 4: 109.55 GiB of weights
    # a GPU) a search found nothing that starts.
    from kvledger.analyses.search.spec import default_tps

    assert default_tps(4) == [1, 2, 4, 8] and default_tps(8) == [1, 2, 4, 8] and default_tps(1) == [1, 2, 4, 8]
    assert default_tps(6) == [1, 2]  # 4 and 8 neither divide 6 nor are multiples of it: vLLM's divide() refuses them
