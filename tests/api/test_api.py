"""The Python API (``kvledger.plan``, ``simulate``, ``goodput``): each result's ``to_dict()`` is the command's
``--json`` for the same inputs, arguments are checked at the call in Python's words, and what a call hands back
cannot change what the next one computes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from api_cli_json import in_call_terms

import kvledger
from kvledger import DoesNotFitError, InputError, strict_json

L8 = "meta-llama/Llama-3.1-8B"


def cli(*argv: str) -> tuple[int, str]:
    """(exit status, stdout) of ``kvledger ARGV`` run in this process."""
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    r = CliRunner().invoke(app, list(argv))
    return r.exit_code, r.stdout


def _same(result, *argv: str) -> dict:
    rc, out = cli(*argv, "--json")
    assert rc == 0
    doc = in_call_terms(json.loads(out), argv[0])  # its notes name the call's parameters
    assert json.loads(strict_json.dumps(result.to_dict())) == doc
    return doc


def test_plan_is_the_plan_commands_json():
    p = kvledger.plan(L8, "H100", contexts=[8192, "32K"])
    doc = _same(p, "plan", L8, "--gpu", "H100", "--context", "8K,32K")
    # vLLM 0.33 on one H100: 28,160 blocks of 16 tokens, block 0 the null block → 28,159 usable;
    # an 8,192-token request takes 8,192 / 16 = 512 blocks → 28,159 // 512 = 54 whole requests
    assert p.fits and doc["memory"]["num_gpu_blocks"] == 28160
    assert p.plan.row_at(8192).max_requests == 54
    # 4,096 tokens was not asked for: computed on demand by the same rule, 28,159 // 256 = 109
    assert 4096 not in p.plan.planned_contexts and p.plan.row_at(4096).max_requests == 109
    assert p.plan.kv.bytes_per_token == 131072 and type(p.plan.kv.bytes_per_token) is int  # 2·32·8·128·2 B


def test_simulate_is_the_simulate_commands_json():
    s = kvledger.simulate(L8, "H100", prompt_lengths="fixed:512", output_lengths="fixed:64", rate=5.0,
                          num_requests=60)
    doc = _same(s, "simulate", L8, "--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths",
                "fixed:64", "--rate", "5", "--num-requests", "60")
    assert doc["summary"]["num_requests"] == 60 and doc["summary"]["num_finished"] == 60


def test_goodput_is_the_goodput_commands_json():
    g = kvledger.goodput(L8, "H100", slo="ttft=200ms,tpot=50ms", prompt_lengths="fixed:512",
                         output_lengths="fixed:64", rate=5.0, num_requests=60, cache=False)
    _same(g, "goodput", "--simulate", L8, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms",
          "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--rate", "5", "--num-requests", "60")


@pytest.mark.parametrize(("call", "words"), [
    (lambda: kvledger.plan(L8, 3), "kvledger.plan(gpu=...): expected str, got int 3"),
    (lambda: kvledger.simulate(L8, "H100", rate="fast"), "kvledger.simulate(rate=...): expected float or None"),
    # the range the CLI checks its --tp against (kvledger.ranges: [1, 1024] GPUs), named as the parameter
    (lambda: kvledger.plan(L8, "H100", tp=0), "kvledger.plan: tp 0 is out of range; allowed: [1, 1,024] GPUs"),
    # numpy's default_rng said "expected non-negative integer"; the CLI's --seed range is [0, 2**63 - 1]
    (lambda: kvledger.simulate(L8, "H100", trace="azure-conv", num_requests=5, seed=-1),
     "kvledger.simulate: seed -1 is out of range; allowed: [0, 9,223,372,036,854,775,807]"),
    # the closed loop said "num_users must be an integer ≥ 1", a name the API does not have
    (lambda: kvledger.simulate(L8, "H100", trace="azure-conv", num_requests=5, concurrency=0),
     "kvledger.simulate: concurrency 0 is out of range; allowed: [1, 1,000,000] users"),
    # a misspelt axis was accepted without target; the command's --axis is refused with or without --target
    (lambda: kvledger.goodput(L8, "H100", slo="ttft=1s", axis="foo", rate=5.0, cache=False),
     "kvledger.goodput: unknown search axis 'foo'"),
    (lambda: kvledger.goodput(L8, "H100", slo="ttft=1s", target=1.5, cache=False),
     "kvledger.goodput: target 1.5 is out of range; allowed: (0, 1]"),
    (lambda: kvledger.goodput(L8, "H100", slo="ttft=1s", seed=-1, cache=False), "kvledger.goodput: seed -1 is out"),
    (lambda: kvledger.plan(L8, "H100", contexts=("8Q",)), "kvledger.plan: contexts: cannot read '8Q'"),
    (lambda: kvledger.plan(L8, "H100", gpu_mem_util=0.9), "unexpected keyword argument 'gpu_mem_util'"),
])
def test_a_wrong_argument_is_an_input_error_in_python_terms(call, words):
    with pytest.raises(InputError) as err:
        call()
    assert words in str(err.value) and "--" not in str(err.value)


def test_settings_name_python_fields_outside_a_command():
    from kvledger.accounting.settings import PlanSettings, make_settings
    from kvledger.errors import command_named

    with pytest.raises(InputError, match=r"gpu_mem_util is not a setting \(did you mean gpu_memory_utilization\?\)"):
        make_settings(gpu_mem_util=0.9)
    with pytest.raises(InputError, match=r"contexts\[0\] must be a whole number, got '8K'"):
        make_settings(contexts=("8K",))
    with pytest.raises(InputError, match="tp must be ≥ 1, got 0"):
        PlanSettings(tp=0)  # was pydantic's ValidationError
    with command_named("plan"), pytest.raises(InputError, match="--context must be a whole number"):
        make_settings(contexts=("8K",))  # inside a command: its flag


def test_documented_functions_refuse_wrong_types():
    from kvledger.accounting.plan import build_plan
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.catalog.gpu_file import gpu_file
    from kvledger.catalog.gpus import get_gpu

    with pytest.raises(InputError, match=r"build_plan\(model=...\): expected what .*load_model"):
        build_plan("meta-llama/Llama-3.1-8B", "H100-SXM")
    with pytest.raises(InputError, match=r"get_gpu\(name\): a GPU name as a string"):
        get_gpu(None)
    with pytest.raises(InputError, match=r"SimRequestArgs\(rate=...\): expected float or None, got str 'fast'"):
        SimRequestArgs(model=L8, gpu="H100", rate="fast")
    with pytest.raises(InputError, match=r"gpu_file\(path\)"):
        gpu_file(3)


def test_gpu_file_takes_a_path_string(tmp_path: Path):
    from kvledger.catalog.gpu_file import gpu_file

    f = tmp_path / "g.toml"
    f.write_text('name = "lab card"\nmemory = "40GiB"\nbandwidth_tb_s = 2.0\nbf16_tflops = 300\n')
    assert gpu_file(str(f)).memory_bytes == 40 * 2**30


def test_a_context_beyond_max_model_len_holds_no_request():
    r = kvledger.plan("google/gemma-2-9b-it", "H100", contexts=[8192, 32768])
    beyond = r.plan.row_at(32768)
    # max_model_len 8,192 (the config's): vLLM rejects a 32,768-token request, so none is served; the pool figure,
    # usable blocks // blocks per request, stays under its own key
    assert r.plan.memory.max_model_len == 8192 and not beyond.within_max_model_len
    assert beyond.max_requests == 0 and beyond.max_running == 0 and beyond.decode_requests == 0
    assert beyond.pool_requests == r.plan.memory.usable_blocks // beyond.blocks_per_request == 5
    row = next(x for x in r.to_dict()["concurrency"] if x["context_tokens"] == 32768)
    assert (row["max_requests"], row["pool_requests"]) == (0, 5)
    assert r.to_dict()["concurrency"][0]["pool_requests"] is None  # within max_model_len: null, the key always there


def test_sglang_mamba_slots_that_serve_no_request_are_a_non_fit():
    # Nemotron-H-56B on an H200 at mem_fraction_static 0.79: the state pool keeps 4 slots, 5 per request (3 + 2
    # tracking slots under the extra_buffer strategy) → 4 // 5 = 0 requests: SGLang refuses to start
    r = kvledger.plan("nvidia/Nemotron-H-56B-Base-8K", "H200", engine="sglang", mem_fraction_static=0.79)
    assert not r.fits and r.advice.verdict == "state_does_not_fit"
    assert "4 Mamba state slots serve no request at 5 slots each" in r.advice.message
    rc, _ = cli("plan", "nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H200", "--engine", "sglang",
                "--mem-fraction-static", "0.79")
    assert rc == 3  # was 2 (an InputError), as every other non-fit now
    with pytest.raises(DoesNotFitError, match="serve no request"):
        kvledger.simulate("nvidia/Nemotron-H-56B-Base-8K", "H200", policy="sglang", mem_fraction_static=0.79,
                          num_requests=5)


def test_gpu_catalog_is_read_only():
    from kvledger.catalog.gpus import get_gpu, gpu_catalog

    with pytest.raises(AttributeError):  # a read-only mapping: no pop
        gpu_catalog().pop("nvidia_h100_sxm")
    with pytest.raises(TypeError):
        gpu_catalog()["nvidia_h100_sxm"] = None
    assert get_gpu("H100").gpu_id == "nvidia_h100_sxm"


def test_a_runs_step_cost_is_its_own(monkeypatch):
    from kvledger.analyses.serving.sim_ledgers import simulate_run
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    monkeypatch.setenv("KVLEDGER_NO_CACHE", "1")  # the per-process plan and step cost are kept for the next run
    a = SimRequestArgs(model=L8, gpu="H100", trace="azure-conv", num_requests=50)
    first = simulate_run(a)
    before = first.result.summary.to_dict()["ttft_s"]["mean"]
    first.setup.cost.flops_fraction = first.setup.cost.bandwidth_fraction = 0.1
    second = simulate_run(a)
    assert second.setup.cost is not first.setup.cost and second.setup.cost.flops_fraction != 0.1
    assert second.result.summary.to_dict()["ttft_s"]["mean"] == before


def test_the_cache_parameter_wins_over_the_environment(monkeypatch, tmp_path):
    from kvledger.analyses.serving import sim_cache

    monkeypatch.setenv("KVLEDGER_NO_CACHE", "1")
    with sim_cache.using(True):
        assert sim_cache.enabled()
    monkeypatch.delenv("KVLEDGER_NO_CACHE")
    with sim_cache.using(False):
        assert not sim_cache.enabled()
    assert sim_cache.enabled()


def test_a_request_id_given_twice_is_refused():
    from kvledger.accounting.stepcost import FixedStepCost
    from kvledger.dynamics.engine.config import EngineConfig
    from kvledger.dynamics.engine.request import RequestSpec
    from kvledger.dynamics.simulator import simulate

    reqs = [RequestSpec("a", 0.0, 16, 4), RequestSpec("a", 0.1, 16, 4)]
    with pytest.raises(InputError, match="request id 'a' is given twice"):
        simulate(reqs, EngineConfig(num_gpu_blocks=64, block_size=16, max_model_len=256), FixedStepCost(0.01))


def test_type_hints_ship_with_the_package():
    import tomllib

    pkg = Path(kvledger.__file__).parent
    assert (pkg / "py.typed").is_file()
    project = tomllib.loads((pkg.parents[1] / "pyproject.toml").read_text())
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/kvledger"]  # ships py.typed


def test_every_result_is_strict_json_when_every_request_arrives_at_once():
    # rate=inf: every request at t = 0, an infinite offered rate. to_dict() used to carry float inf (json.dumps with
    # allow_nan=False raised) while --json wrote the string "inf"; both now write null with "all_at_once": true
    kw = {"prompt_lengths": "fixed:512", "output_lengths": "fixed:64", "rate": float("inf"), "num_requests": 5}
    sim = kvledger.simulate(L8, "H100", **kw)
    gp = kvledger.goodput(L8, "H100", slo="ttft=2s", cache=False, **kw)
    cost = kvledger.cost(simulate=L8, gpu="H100", slo="ttft=2s", api="OpenAI:gpt-4.1", utilization=0.5,
                         gpu_usd_per_hour=2.0, at_offered_load=True, cache=False, **kw)
    plan = kvledger.plan(L8, "H100")
    for result in (sim, gp, cost, plan):
        text = json.dumps(result.to_dict(), allow_nan=False)
        assert '"inf"' not in text
    workload = sim.to_dict()["workload"]
    assert workload["offered_rate_req_per_s"] is None and workload["all_at_once"] is True
    assert gp.to_dict()["request_rate_req_per_s"] is None and gp.to_dict()["all_at_once"] is True
    assert cost.to_dict()["simulation"]["workload"]["all_at_once"] is True
    _same(sim, "simulate", L8, "--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64",
          "--rate", "inf", "--num-requests", "5")


def test_every_probe_record_carries_the_same_keys():
    # a probe that missed the target left out queue_grew (None: not checked) and one long enough left out too_short;
    # every probe now carries both: queue_grew null where not checked, too_short false where long enough
    g = kvledger.goodput(L8, "H100", slo="ttft=200ms,tpot=50ms", target=0.9, prompt_lengths="fixed:512",
                         output_lengths="fixed:64", num_requests=60, cache=False).to_dict()
    keys = {tuple(p) for p in g["probes"]}
    assert len(keys) == 1 and {"queue_grew", "too_short", "stopped_early"} <= set(next(iter(keys)))
    assert {p["meets_target"] for p in g["probes"]} == {True, False}  # both kinds of probe were run
    assert all(p["too_short"] in (True, False) for p in g["probes"])
