"""``search --allreduce-link-share X``: every candidate at TP > 1 priced with the given share of its link, in its
simulations (``screen.sim_args``), in the analytic bounds that decide candidates unsimulated (the same step cost) and in
the disaggregated pools (``capacity._study``'s ``PricingFlags``); the spec carries it only when given, a ledger of
another share is not resumed, and a share outside (0, 1] is refused in simulate's words.

Worked by hand (``accounting/tp_comm.py``): the L40S's host link is PCIe Gen4 x16, 64 GB/s both ways, 32 GB/s a
direction; the default rule prices the all-reduces at 0.35 of it (11.2 GB/s), the share 0.7 at 22.4 GB/s. Llama-3.1-8B
(hidden 4,096, 32 layers) at TP 2 on L40S (peer access: vLLM's custom all-reduce, one-shot at 2 ranks, ``6 µs + (n −
1)·S / link``): a one-token decode step's 64 calls of S = 8,192 B take 64 × (6 µs + 8,192 B / 11.2e9 B/s) = 430.81 µs
at 0.35 and 64 × (6 µs + 8,192 / 22.4e9) = 407.41 µs at 0.7: 23.4057 µs less, which is what every request's TPOT lower
bound (one decode step) loses, so 1 ÷ the tokens/s-per-user bound falls by it exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from kvledger.analyses.search import SearchSpec
from kvledger.analyses.search.spec import Candidate
from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
# one colocated TP 2 candidate and one disaggregated 1×TP 2 + 1×TP 2 unit on L40S, 100 fixed-length requests a probe,
# priced flat: about a second a search
SEARCH = ["search", MODEL, "--gpus", "L40S", "--tp", "2", "--gemm-efficiency", "flat", "--prompt-lengths",
          "fixed:512", "--output-lengths", "fixed:64", "--num-requests", "100", "--utilization", "0.5", "--slo",
          "ttft=200ms,tpot=30ms", "--disagg", "--disagg-splits", "1:1"]
COLOCATED, DISAGG = "nvidia_l40s:tp2:kv-auto", "nvidia_l40s:p1xtp2+d1xtp2:kv-auto"
ONE_TOKEN_STEP_SAVED_S = 64 * 8192 * (1 / 11.2e9 - 1 / 22.4e9)  # 23.4057 µs
NOTE = ("TP all-reduces of the candidates at TP > 1: nvidia_l40s over PCIe at 70% of the host link's 32 GB/s a "
        "direction (given by --allreduce-link-share; the default rule 35%, range 20%–65%)")
# without it the L40S (no scale-up link) is priced at the PCIe rule's default, which sets its TP 2 capacity: said too,
# in simulate's words (tp_comm.link_words)
DEFAULT_NOTE = ("TP all-reduces of the candidates at TP > 1: nvidia_l40s over PCIe at 35% of the host link's 32 GB/s a "
                "direction (range 20%–65%, from NCCL and one-shot all-reduces measured over PCIe: "
                "accounting/tp_comm.py) — the share is the host's (peer access, PCIe switches) and moves these "
                "candidates' capacity: --allreduce-link-share X gives yours")


def _search(*extra: str) -> dict:
    res = runner.invoke(app, [*SEARCH, *extra, "--json"])
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads(res.stdout)


def _entry(doc: dict, cid: str) -> dict:
    (e,) = [c for c in doc["candidates"] if c["id"] == cid]
    return e


def _spec(**kw) -> SearchSpec:
    return SearchSpec(model=MODEL, slo="ttft=200ms,tpot=30ms", utilization=0.5, gemm_efficiency="flat", **kw)


def test_the_spec_leaves_the_key_out_by_default_and_refuses_a_share_outside_0_1_as_simulate_does():
    assert "allreduce_link_share" not in _spec().to_dict()
    assert _spec(allreduce_link_share=0.7).to_dict()["allreduce_link_share"] == 0.7
    for bad in (0.0, 1.5):
        with pytest.raises(InputError) as err:
            _spec(allreduce_link_share=bad).check()
        sim = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "simulate", MODEL, "--gpu", "L40S", "--tp",
                              "2", "--allreduce-link-share", f"{bad:g}"], capture_output=True, text=True)
        assert sim.returncode == 2 and sim.stderr.strip() == f"error: {err.value}", sim.stderr  # simulate's words
        assert str(err.value) == f"--allreduce-link-share {bad:g} is out of range; allowed: (0, 1] (fraction)"


def test_the_share_reaches_each_candidates_simulation_bounds_and_disaggregated_pools():
    from kvledger.analyses.search.capacity import _study
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.serving.plan_pricing import split_host
    from kvledger.analyses.serving.work_bounds import run_lengths
    from kvledger.ledgers.slo import parse_slo

    spec, cand = _spec(allreduce_link_share=0.7, num_requests=50), Candidate("nvidia_l40s", 2)
    args = sim_args(spec, cand)
    assert args.allreduce_link_share == 0.7 and sim_args(replace(spec, allreduce_link_share=None),
                                                         cand).allreduce_link_share is None
    # the bounds' step cost (bounds.candidate_bounds → run_lengths(sim_args(...))): 32 GB/s × 0.7
    assert run_lengths(args, spec.synthetic)[0].link_bytes_per_s == pytest.approx(22.4e9)
    study, _, _ = _study(spec, Candidate("nvidia_l40s", 2, prefill_replicas=1, decode_replicas=1, decode_tp=2),
                         parse_slo(spec.slo))
    assert study.pricing.allreduce_link_share == 0.7
    cost, info = study.priced(2)
    assert split_host(cost)[0].link_bytes_per_s == pytest.approx(22.4e9)
    assert info["allreduce_link_share_source"] == "given by --allreduce-link-share"
    default, _, _ = _study(replace(spec, allreduce_link_share=None), Candidate("nvidia_l40s", 2, prefill_replicas=1,
                                                                               decode_replicas=1, decode_tp=2),
                           parse_slo(spec.slo))
    assert split_host(default.priced(2)[0])[0].link_bytes_per_s == pytest.approx(11.2e9)  # the rule's 0.35


def test_a_search_prices_its_candidates_and_bounds_with_the_share_and_says_so():
    base, given = _search(), _search("--allreduce-link-share", "0.7")
    assert "allreduce_link_share" not in base["spec"] and given["spec"]["allreduce_link_share"] == 0.7
    assert NOTE in given["notes"] and DEFAULT_NOTE in base["notes"] and DEFAULT_NOTE not in given["notes"]
    b, g = _entry(base, COLOCATED), _entry(given, COLOCATED)
    # every request here has 512 prompt and 64 output tokens: the TPOT bound is one decode step of one sequence, so
    # 1 ÷ the tokens/s-per-user bound falls by that step's all-reduce saving (module doc), up to the bound's 1e-9 shade
    saved = 1 / b["bounds"]["tok_per_s_per_user"] - 1 / g["bounds"]["tok_per_s_per_user"]
    assert saved == pytest.approx(ONE_TOKEN_STEP_SAVED_S, rel=1e-5)
    # faster all-reduces: a higher capacity bound and simulated capacity, colocated and disaggregated
    assert g["bounds"]["capacity_bound_req_per_s"] > b["bounds"]["capacity_bound_req_per_s"]
    assert g["capacity"]["slo_capacity_req_per_s"] > b["capacity"]["slo_capacity_req_per_s"]
    assert _entry(given, DISAGG)["capacity"]["slo_capacity_req_per_s"] > \
        _entry(base, DISAGG)["capacity"]["slo_capacity_req_per_s"]


def test_a_ledger_of_another_share_is_not_resumed(tmp_path):
    ledger = tmp_path / "l.jsonl"
    first = runner.invoke(app, [*SEARCH, "--allreduce-link-share", "0.7", "--ledger", str(ledger), "--json"])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, [*SEARCH, "--allreduce-link-share", "0.7", "--resume", str(ledger), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["ranking"] == json.loads(first.stdout)["ranking"]
    for other in (["--allreduce-link-share", "0.6"], []):
        res = runner.invoke(app, [*SEARCH, *other, "--resume", str(ledger), "--json"])
        assert isinstance(res.exception, InputError) and "is the ledger of another search" in str(res.exception)


@pytest.mark.parametrize("value", ["0", "1.5"])
def test_search_refuses_a_share_outside_0_1_in_one_line_and_exits_2(value):
    res = runner.invoke(app, [*SEARCH, "--allreduce-link-share", value])
    assert isinstance(res.exception, InputError), res.output
    words = f"--allreduce-link-share {value} is out of range; allowed: (0, 1] (fraction)"
    assert str(res.exception) == words
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *SEARCH, "--allreduce-link-share", value],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip() == f"error: {words}", p.stderr


def test_a_given_share_is_named_on_a_scale_up_link_too():
    # was: the note contrasted the share with the PCIe default only, though it prices an H100's NVLink as well (fresh-
    # user trial: H100 TP 2 fell from 55 to 53.5 req/s at 0.6, unsaid); the L40S at TP 1 has no all-reduce to name
    from types import SimpleNamespace

    from kvledger.analyses.search.gemm_note import link_note

    entries = [{"gpu_id": "nvidia_h100_sxm", "tp": 2, "status": "feasible"},
               {"gpu_id": "nvidia_l40s", "tp": 1, "status": "feasible"}]
    given = SimpleNamespace(step_cost="roofline", allreduce_link_share=0.6, gpu_profile=None)
    assert link_note(given, entries) == (
        "TP all-reduces of the candidates at TP > 1: nvidia_h100_sxm at 60% of the scale-up link's 450 GB/s a "
        "direction (given by --allreduce-link-share; by default the catalog's figure, 100%)")
    # without the flag the H100's NVLink is priced at the catalog figure: nothing to say
    plain = SimpleNamespace(step_cost="roofline", allreduce_link_share=None, gpu_profile=None)
    assert link_note(plain, entries) is None
