"""``kvledger.search`` mirrors ``kvledger search`` (checked arguments, the same dict as ``--json``),
``kvledger.simulate`` takes ``seeds`` as the command's ``--seeds``, and every public call says what it returns (an API
trial: no search in the API, simulate without seeds, ``simulate`` unannotated so a type checker saw Any)."""

from __future__ import annotations

import json

import pytest
from api_cli_json import in_call_terms
from typer.testing import CliRunner

import kvledger
from kvledger import strict_json
from kvledger.cli.main import app

L8 = "meta-llama/Llama-3.1-8B"


def _cli(*argv: str) -> tuple[int, dict]:
    r = CliRunner().invoke(app, [*argv, "--json"])
    return r.exit_code, in_call_terms(json.loads(r.stdout), argv[0])  # its notes name the call's parameters


def _plain(doc: object) -> dict:
    return json.loads(strict_json.dumps(doc))  # as --json writes it (dollar figures to the cent)


def test_search_returns_the_commands_json():
    d = kvledger.search(L8, slo="ttft=500ms,tpot=50ms", gpus=["H100"], tp=[1], rate=10, num_requests=200)
    rc, cli = _cli("search", L8, "--gpu", "H100", "--tp", "1", "--slo", "ttft=500ms,tpot=50ms", "--rate", "10",
                   "--num-requests", "200")
    assert rc == 0 and _plain(d.to_dict()) == cli
    assert d["winner"]["id"] == "nvidia_h100_sxm:tp1:kv-auto" and d["no_winner_reason"] is None
    # one replica of one H100 at RunPod's $2.69/GPU-h (the cheapest on-demand row) × 730 h = $1,963.70 a month
    assert d["candidates"][0]["sizing"]["rental_usd_per_month"] == pytest.approx(1963.70)


def test_search_with_no_candidate_meeting_the_slo_raises_no_answer_as_cost_does():
    # a 1 ms TTFT on an L4: the TTFT lower bound (one step reads 6.4 GB of weights at 80 % of 300 GB/s, ~27 ms)
    # rejects the only candidate; the command exits 1 with the document, the call raises NoAnswerError (exit_code 1,
    # as kvledger.cost raises it where `cost` exits 1) whose payload is that document (it returned it as an answer)
    with pytest.raises(kvledger.NoAnswerError) as err:
        kvledger.search("meta-llama/Llama-3.2-3B", slo="ttft=1ms", gpus=["L4"], tp=[1], num_requests=60,
                        max_model_len=8192, rate=1)
    rc, cli = _cli("search", "meta-llama/Llama-3.2-3B", "--gpu", "L4", "--tp", "1", "--slo", "ttft=1ms",
                   "--num-requests", "60", "--max-model-len", "8192", "--rate", "1")
    d = err.value.payload
    assert rc == err.value.exit_code == 1 and _plain(d) == cli and d["winner"] is None
    # the payload, as the message, in the call's terms: its parameter (target), not the command's flag (--target)
    assert d["no_winner_reason"].startswith("no candidate meets the SLO") and "lower target" in d["no_winner_reason"]
    assert str(err.value) == "kvledger.search: " + d["no_winner_reason"]


@pytest.mark.parametrize("kwargs, words", [
    (dict(tp=1), "kvledger.search(tp=...): expected a sequence of int or None, got int 1"),
    (dict(seeds=65), "seeds 65 is out of range"),
    (dict(target=1.5), "target 1.5 is out of range"),
])
def test_search_arguments_are_checked_in_python_terms(kwargs, words):
    with pytest.raises(kvledger.InputError) as err:
        kvledger.search(L8, slo="ttft=500ms", gpus=["H100"], **kwargs)
    assert words in str(err.value)


def test_simulate_seeds_as_the_command():
    # 20 requests of 50 output tokens at 5 req/s: the first seed's figures, each figure's min–max over seeds 0, 1, 2
    work = ["--prompt-lengths", "fixed:100", "--output-lengths", "fixed:50", "--num-requests", "20", "--rate", "5"]
    doc = kvledger.simulate(L8, "H100", prompt_lengths="fixed:100", output_lengths="fixed:50", num_requests=20, rate=5,
                            seeds=3)
    rc, cli = _cli("simulate", L8, "--gpu", "H100", *work, "--seeds", "3")
    assert rc == 0 and _plain(doc.to_dict()) == cli
    spread = cli["seed_spread"]["throughput_output_tok_per_s"]
    assert spread["n_seeds"] == 3 and spread["min"] <= cli["summary"]["throughput_output_tok_per_s"] <= spread["max"]
    with pytest.raises(kvledger.InputError, match="seeds 0 is out of range"):
        kvledger.simulate(L8, "H100", seeds=0)


def test_every_public_call_says_what_it_returns():
    import typing

    returns = {name: typing.get_type_hints(getattr(kvledger, name))["return"]
               for name in ("plan", "simulate", "goodput", "cost", "search")}
    assert returns == {"plan": kvledger.PlanResult, "simulate": kvledger.SimDocument,
                       "goodput": kvledger.GoodputResult, "cost": kvledger.CostResult,
                       "search": kvledger.SearchDocument}


def test_search_with_a_winner_and_a_failed_candidate_raises_as_the_command_exits_1(monkeypatch):
    # TP 1 and TP 2 on H100 at 10 req/s; TP 2's capacity search fails (a simulation error): TP 1 still meets the SLO,
    # but the ranking has a hole where TP 2 may have been cheaper, so the call raises as the command exits 1, with
    # the whole document (the winner among the others, the failed ids) as the payload
    from kvledger.analyses.search import capacity
    from kvledger.errors import InputError

    real = capacity.colocated_capacity

    def tp2_fails(spec, cand, *a, **k):
        if cand.tp == 2:
            raise InputError("a stand-in simulation error")
        return real(spec, cand, *a, **k)

    monkeypatch.setattr(capacity, "colocated_capacity", tp2_fails)
    with pytest.raises(kvledger.NoAnswerError) as err:
        kvledger.search(L8, slo="ttft=500ms,tpot=50ms", gpus=["H100"], tp=[1, 2], rate=10, num_requests=200,
                        cache=False)
    d = err.value.payload
    assert err.value.exit_code == 1 and d["failed_candidates"] == ["nvidia_h100_sxm:tp2:kv-auto"]
    assert d["winner"]["id"] == "nvidia_h100_sxm:tp1:kv-auto" and d["counts"] == {"feasible": 1, "simulation error": 1}
    assert "1 candidate(s) could not be evaluated (nvidia_h100_sxm:tp2:kv-auto;" in str(err.value)
    assert "the winner among the others, nvidia_h100_sxm:tp1:kv-auto, is in .payload['winner']" in str(err.value)
    rc, cli = _cli("search", L8, "--gpu", "H100", "--tp", "1,2", "--slo", "ttft=500ms,tpot=50ms", "--rate", "10",
                   "--num-requests", "200")
    assert rc == 1 and cli["failed_candidates"] == d["failed_candidates"]  # the command: the same, exit 1
