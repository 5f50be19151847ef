"""``kvledger.search`` takes every flag of ``kvledger search`` that changes the search, by its name with underscores, as
``kvledger.simulate`` and ``kvledger.goodput`` take theirs (tests/api/test_api_sim_flags.py) and ``kvledger.cost``
cost's (tests/api/test_api_cost.py). Before, it lacked --workload, --sessions, --session-rate, --offload, --disagg,
--disagg-splits, --enable-expert-parallel, --enable-dp-attention, --allreduce-link-share, --inter-node-link,
--mamba-ssm-cache-dtype, --wddm, --gpu, --backend, --ray-address and the host/NVMe tier prices: a script could not run
in Python what the command ran. Each runs through the command's own path (``analyses/search/search_run.py``)."""

from __future__ import annotations

import inspect
import json

import pytest
from api_cli_json import in_call_terms

import kvledger
from kvledger import InputError, strict_json

L8 = "meta-llama/Llama-3.1-8B"
# 60 requests of 512 + 64 tokens at 5 req/s on one H100: each capacity search takes a second or two
SMALL = dict(gpus=["H100"], num_requests=60, prompt_lengths="fixed:512", output_lengths="fixed:64", rate=5.0,
             cache=False)
SMALL_FLAGS = ("--gpus", "H100", "--num-requests", "60", "--prompt-lengths", "fixed:512", "--output-lengths",
               "fixed:64", "--rate", "5")

# what the command writes or shows, not settings of the search: the document is returned instead (--json), and a
# script writes its own files (--csv, --plot; --force: the call never replaces a file), tables (--top, --verbose) and
# launch lines (--show-command). --ledger and --resume are the call's too: a long search's record, continued
OUTPUTS = {"--json", "--csv", "--plot", "--force", "--top", "--verbose", "--show-command"}
# SGLang's spellings of the --tp, --max-num-seqs and --max-num-batched-tokens axes: the API takes vLLM's names, as
# kvledger.simulate and kvledger.cost do
SGLANG = {"--tp-size", "--max-running-requests", "--chunked-prefill-size"}


def _flags() -> set[str]:
    """The first spelling of each parameter of ``kvledger search``, as click reads the command."""
    import typer.main

    from kvledger.cli.main import app

    return {p.opts[0] for p in typer.main.get_command(app).commands["search"].params
            if p.name not in ("install_completion", "show_completion")}


def test_search_takes_every_flag_of_the_command():
    # MODEL is model; cache decides the on-disk store (the command reads KVLEDGER_NO_CACHE); a new flag of the
    # command that is neither an output nor an SGLang spelling fails here until the call takes it
    params = {f.lstrip("-").replace("-", "_") for f in _flags() - OUTPUTS - SGLANG}
    assert set(inspect.signature(kvledger.search).parameters) == params | {"cache"}


def test_search_defaults_are_the_commands():
    import typer.main

    from kvledger.cli.main import app

    cmd = typer.main.get_command(app).commands["search"]
    sig = inspect.signature(kvledger.search).parameters
    by_flag = {p.opts[0].lstrip("-").replace("-", "_"): p.default for p in cmd.params}
    # the axes are sequences in Python, comma-separated text on the command line
    as_text = {k: ",".join(v.default) for k, v in sig.items() if isinstance(v.default, tuple)}
    for name, p in sig.items():
        if name in by_flag and p.default is not inspect.Parameter.empty:
            assert as_text.get(name, p.default) == by_flag[name], name


def _cli(*argv: str) -> tuple[int, dict]:
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    r = CliRunner().invoke(app, ["search", *argv, "--json"], env={"KVLEDGER_NO_CACHE": "1"})
    return r.exit_code, in_call_terms(json.loads(r.stdout), "search")  # its notes name the call's parameters


def _plain(d: dict) -> dict:
    return json.loads(strict_json.dumps(d))  # as --json writes it


def test_offload_variants_are_the_commands_json_and_typed():
    d = kvledger.search(L8, slo="ttft=500ms,tpot=50ms", tp=[1], offload=["none", "cpu:64GiB"],
                        host_memory_usd_per_gib_month=1.5, **SMALL)
    rc, cli = _cli(L8, "--slo", "ttft=500ms,tpot=50ms", *SMALL_FLAGS, "--tp", "1", "--offload", "none,cpu:64GiB",
                   "--host-memory-usd-per-gib-month", "1.5")
    assert rc == 0 and _plain(d.to_dict()) == cli and cli["offload"]
    (v,) = d.offload
    assert v.id == "nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB" and v.base == "nvidia_h100_sxm:tp1:kv-auto"
    # 64 GiB of host memory at the $1.50/GiB-month given = $96.00 a month per unit of one H100
    assert v.tier_price.usd_per_gib_month == 1.5 and v.tier_usd_per_month_per_unit == pytest.approx(96.0)
    # its base without the tier: one replica carries the 5 req/s, 730 h × RunPod's $2.69 = $1,963.70 a month; with
    # the tier, $1,963.70 + $96.00 = $2,059.70: not cheaper, and no fewer GPUs
    (row,) = v.vs_more_gpus
    assert (row.usd_per_month, row.tier_usd_per_month) == pytest.approx((730 * 2.69, 730 * 2.69 + 96.0))
    assert row.usd_per_1k_requests is None and row.tier_cheaper is False and v.beats_more_gpus is False
    assert v.slo_capacity_req_per_s == cli["offload"][0]["slo_capacity_req_per_s"] and d.sessions is None


def test_disaggregated_units_and_link_flags_are_the_commands_json():
    args = dict(slo="ttft=500ms,tpot=50ms", tp=[1, 2], disagg=True, disagg_splits=["1:1"], allreduce_link_share=0.5,
                inter_node_link="50GB/s", enable_expert_parallel=False, **SMALL)
    d = kvledger.search(L8, **args)
    rc, cli = _cli(L8, "--slo", "ttft=500ms,tpot=50ms", *SMALL_FLAGS, "--tp", "1,2", "--disagg", "--disagg-splits",
                   "1:1", "--allreduce-link-share", "0.5", "--inter-node-link", "50GB/s",
                   "--no-enable-expert-parallel")
    assert rc == 0 and _plain(d.to_dict()) == cli
    # TP 1 and 2 colocated, and one prefill and one decode engine at every pair of the TPs: 2 + 2 × 2 = 6 candidates
    assert sorted(e["id"] for e in cli["candidates"]) == sorted(
        ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"]
        + [f"nvidia_h100_sxm:p1xtp{p}+d1xtp{q}:kv-auto" for p in (1, 2) for q in (1, 2)])
    assert d.spec.allreduce_link_share == 0.5 and d.spec.inter_node_link == "50GB/s"


def test_sglang_mem_fraction_static_is_the_commands_json():
    # search --engine sglang --mem-fraction-static 0.85 and kvledger.search(engine="sglang", mem_fraction_static=0.85)
    # write the same document; every candidate's plan is at the fraction given (the CLI test works out its pool)
    args = ("meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4", "--tp", "1", "--max-model-len",
            "8K", "--num-requests", "60", "--rate", "5", "--engine", "sglang", "--max-running-requests", "32",
            "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.85")
    rc, cli = _cli(*args)
    d = kvledger.search("meta-llama/Llama-3.2-3B", slo="ttft=2s,tpot=100ms", gpus=["L4"], tp=[1], max_model_len="8K",
                        num_requests=60, rate=5.0, engine="sglang", max_num_seqs=[32], kv_cache_dtype=["fp8_e4m3"],
                        mem_fraction_static=0.85, cache=False)
    assert rc == 0 and _plain(d.to_dict()) == cli
    assert d.spec.mem_fraction_static == 0.85 and cli["candidates"][0]["plan"]["mem_fraction_static"] == 0.85


class _Stop(Exception):
    """Raised by the stand-in search: the spec is built, no candidate is run."""


def _spec_of(monkeypatch, run) -> object:
    """The SearchSpec ``run()`` hands the candidate run (``analyses.search.run_search``: the command's and the
    call's)."""
    import kvledger.analyses.search as search

    seen = []

    def stand_in(spec, axes, **_k):
        seen.append(spec)
        raise _Stop

    monkeypatch.setattr(search, "run_search", stand_in)
    run()
    return seen[0]


def test_a_session_workload_is_the_commands(monkeypatch):
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    # a session search probes hundreds of sessions per candidate (minutes): the spec the two build is compared, which
    # is all the session flags decide (the candidates run the same path)
    argv = ["search", L8, "--slo", "ttft=2s", "--gpus", "H100", "--tp", "1", "--workload", "chat", "--sessions", "20",
            "--session-rate", "0.5"]
    cli = _spec_of(monkeypatch, lambda: isinstance(CliRunner().invoke(app, argv).exception, _Stop) or 1 / 0)

    def call():
        with pytest.raises(_Stop):
            kvledger.search(L8, slo="ttft=2s", gpus=["H100"], tp=[1], workload="chat", sessions=20, session_rate=0.5,
                            cache=False)

    api = _spec_of(monkeypatch, call)
    assert api == cli and api.synthetic.workload == "chat" and api.synthetic.num_sessions == 20
    # the load sized for: 0.5 session starts/s × the 20 drawn chat sessions' turns per session (77 turns: 3.85 each)
    assert api.rate_req_per_s == pytest.approx(0.5 * api.synthetic.turns_per_session(0, 32_768)) == 1.925


def _in_python_terms(cli_message: str) -> str:
    """The command's message as the call words it: each flag that is a parameter named as the parameter, a command
    line the user would run kept as the command spells it (``api.results.python_words``, tested on its own in
    test_api_notes.py)."""
    from kvledger.api.results import python_words

    return "kvledger.search: " + python_words(cli_message, frozenset(inspect.signature(kvledger.search).parameters))


# each refused before any candidate runs, by the command (exit 2) and the call with the same words
BAD = [
    (("--session-rate", "0.5"), dict(session_rate=0.5)),
    (("--sessions", "0", "--workload", "chat"), dict(sessions=0, workload="chat")),
    (("--workload", "chat", "--disagg"), dict(workload="chat", disagg=True)),
    (("--workload", "chat", "--rate", "2", "--session-rate", "1"), dict(workload="chat", rate=2.0, session_rate=1.0)),
    (("--enable-dp-attention",), dict(enable_dp_attention=True)),
    (("--disagg", "--disagg-splits", "1-1"), dict(disagg=True, disagg_splits=["1-1"])),
    (("--allreduce-link-share", "1.5"), dict(allreduce_link_share=1.5)),
    (("--inter-node-link", "bogus"), dict(inter_node_link="bogus")),
    (("--mamba-ssm-cache-dtype", "int3"), dict(mamba_ssm_cache_dtype="int3")),
    (("--wddm",), dict(wddm=True)),
    (("--offload", "gpu:1GiB"), dict(offload=["gpu:1GiB"])),
    (("--host-memory-usd-per-gib-month", "-1"), dict(host_memory_usd_per_gib_month=-1.0)),
    (("--offload", "cpu:64GiB", "--seeds", "2"), dict(offload=["cpu:64GiB"], seeds=2)),
    (("--mem-fraction-static", "0.85"), dict(mem_fraction_static=0.85)),  # SGLang's, under vLLM
    (("--engine", "sglang", "--gpu-memory-utilization", "0.9"), dict(engine="sglang", gpu_memory_utilization=0.9)),
    (("--engine", "sglang", "--mem-fraction-static", "1.5"), dict(engine="sglang", mem_fraction_static=1.5)),
]


@pytest.mark.parametrize(("flags", "kwargs"), BAD, ids=[" ".join(f) for f, _ in BAD])
def test_a_bad_argument_is_refused_in_the_commands_words(flags, kwargs):
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    base = ["search", L8, "--slo", "ttft=1s", "--gpus", "H100", "--tp", "1", "--num-requests", "60"]
    # the console entry prints the error the command ends with as "error: MESSAGE" and exits 2 for an InputError
    # (none of DoesNotFitError's or NoAnswerError's other statuses here)
    cli = CliRunner().invoke(app, [*base, *flags, "--json"]).exception
    assert type(cli) is InputError, cli
    with pytest.raises(InputError) as err:
        kvledger.search(L8, slo="ttft=1s", gpus=["H100"], tp=[1], num_requests=60, cache=False, **kwargs)
    assert type(err.value) is InputError and str(err.value) == _in_python_terms(str(cli))
