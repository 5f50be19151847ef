"""The headline of a search with no feasible candidate says why: memory rejections are named as such, with their fix,
instead of an SLO miss (fresh-user trial: `search meta-llama/Llama-3.1-70B --gpu L40S --tp 4` said "no candidate meets
the SLO … loosen the SLO" when the only candidate could not hold one max_model_len request)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.report.search_answer import no_winner_line as _no_winner_line


def _result(*reasons: str) -> SimpleNamespace:
    return SimpleNamespace(entries=[{"id": f"c{i}", "status": "rejected", "reason": r} for i, r in enumerate(reasons)],
                           spec=SimpleNamespace(target=0.9))  # the search's attainment target (its default)


def test_memory_rejections_are_named_with_their_fix():
    line = _no_winner_line(_result("max_model_len", "max_model_len", "does not fit"))
    assert line.startswith("no candidate can start: 2 rejected for max_model_len; 1 rejected for does not fit")
    assert "lower --max-model-len" in line and "SLO" not in line


def test_an_slo_miss_among_them_keeps_the_slo_headline():
    line = _no_winner_line(_result("max_model_len", "SLO not met at any rate"))
    assert line.startswith("no candidate meets the SLO")


def test_none_can_start_only_when_every_candidate_is_refused_for_memory():
    from kvledger.analyses.search.frontier import none_can_start

    assert none_can_start(_result("max_model_len", "does not fit").entries)
    assert not none_can_start(_result("max_model_len", "SLO not met at any rate").entries)  # an SLO miss: exit 1, not 3
    assert not none_can_start(_result("does not fit", "no price row").entries)
    assert not none_can_start([])  # no candidate at all is not "none can start"
    feasible = {"id": "f", "status": "feasible", "reason": None}
    assert not none_can_start(_result("does not fit").entries + [feasible])


def test_search_exits_3_when_no_candidate_can_start():
    # Llama-3.1-70B in BF16 on one L40S: ~131 GiB of weights (70.6e9 params × 2 B) against 44.55 GiB of device
    # memory, so the only candidate is rejected "does not fit"; the headline is printed, then exit 3 (was 0)
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    argv = ["search", "meta-llama/Llama-3.1-70B", "--gpu", "L40S", "--tp", "1", "--slo", "ttft=500ms", "--rate", "1"]
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 3 and "no candidate can start: 1 rejected for does not fit" in " ".join(res.output.split())
    res = CliRunner().invoke(app, [*argv, "--json"])
    assert res.exit_code == 3 and json.loads(res.stdout)["winner"] is None
    assert "3 when no candidate can start" in " ".join(CliRunner().invoke(app, ["search", "--help"]).output.split())


def test_a_candidate_the_engine_refuses_on_its_gpu_cannot_start_either():
    # gpt-oss-20b (MXFP4, Mxfp4Config.get_min_capability 80) searched on a T4 (7.5) only: screened "engine refuses to
    # start", so the search ends as plan does for it, exit 3, naming the fix (was "invalid setting", exit 2)
    from kvledger.analyses.search.frontier import none_can_start

    assert none_can_start(_result("engine refuses to start", "does not fit").entries)
    line = _no_winner_line(_result("engine refuses to start"))
    assert line.startswith("no candidate can start: 1 rejected for engine refuses to start (a GPU or engine release "
                           "that starts this setting")

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    argv = ["search", "openai/gpt-oss-20b", "--gpu", "T4", "--tp", "1", "--slo", "ttft=500ms", "--rate", "1"]
    res = CliRunner().invoke(app, argv)
    out = " ".join(res.output.split())
    assert res.exit_code == 3 and "no candidate can start: 1 rejected for engine refuses to start" in out


def test_does_not_fit_names_the_term_that_overflows_with_its_numbers():
    # Before: "the weights alone do not fit" for every "does not fit", even where the weights fit. On an L4 (CUDA total
    # 23,681,040,384 B = 22.05 GiB) at gpu_memory_utilization 0.7 the budget is 0.7 × 22.0547 = 15.44 GiB per GPU.
    gib = 2**30

    def entry(i, tp, weights_gib, available_gib):
        plan = {"gpu_memory_utilization": 0.7, "weight_bytes_per_gpu": round(weights_gib * gib),
                "available_kv_bytes": round(available_gib * gib)}
        return {"id": f"nvidia_l4:tp{tp}:{i}", "gpu_id": "nvidia_l4", "tp": tp, "status": "rejected",
                "reason": "does not fit", "plan": plan}

    # weights 14.99 GiB fit in 15.44; available −1.05 GiB, so the need is 15.44 + 1.05 = 16.49 GiB, of which
    # 16.49 − 14.99 = 1.50 GiB is the activation peak, non-torch memory and CUDA graphs
    line = _no_winner_line(SimpleNamespace(entries=[entry("a", 1, 14.99, -1.05)], spec=SimpleNamespace(target=0.9)))
    assert "the weights alone" not in line
    assert ("the weights fit but not with the activation peak and non-torch memory (1 of them; the widest "
            "nvidia_l4:tp1:a: weights 14.99 GiB + activation peak, non-torch memory and CUDA graphs 1.50 GiB = "
            "16.49 GiB against gpu_memory_utilization 0.7 × 22.05 GiB = 15.44 GiB per GPU)") in line
    # weights 20 GiB > 15.44 GiB: the weights alone (the widest of the two named, TP 2)
    both = [entry("b", 1, 30.0, -16.0), entry("c", 2, 20.0, -6.0), entry("a", 1, 14.99, -1.05)]
    line = _no_winner_line(SimpleNamespace(entries=both, spec=SimpleNamespace(target=0.9)))
    assert ("more TP or bigger GPUs: the weights alone do not fit (2 of them; the widest nvidia_l4:tp2:c: weights "
            "20.00 GiB per GPU against gpu_memory_utilization 0.7 × 22.05 GiB = 15.44 GiB per GPU)") in line
    assert "(1 of them; the widest nvidia_l4:tp1:a" in line
