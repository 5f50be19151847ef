"""``kvledger.cli.flag_groups``: a flag group is declared once and every command that takes it gets the same flags."""

from __future__ import annotations

import dataclasses

import typer
import typer.main
from typer.testing import CliRunner

from kvledger.cli.flag_groups import EngineFlags, GroupUse, WorkloadFlags, given_flags, with_groups
from kvledger.cli.main import build_app
from kvledger.cli.session_flags import SESSION_MAX_MODEL_LEN_HELP
from kvledger.cli.sim_opts import sim_request


def _params(command: str) -> dict[str, object]:
    return {p.name: p for p in typer.main.get_command(build_app(command)).commands[command].params}


def test_simulate_cost_and_goodput_take_the_same_engine_and_workload_flags():
    sim, cost, goodput = _params("simulate"), _params("cost"), _params("goodput")
    for group in (WorkloadFlags, EngineFlags):
        for f in dataclasses.fields(group):
            decls = f.metadata["decls"]
            for params in (sim, cost, goodput):
                p = params[f.name]
                assert tuple(p.opts[:1]) == (decls[0].split("/")[0],) and p.default is None
            assert cost[f.name].help == "[--simulate] " + f.metadata["help"] == goodput[f.name].help
            # simulate's --max-model-len says its session workloads' 32K default too (it takes --workload)
            own = SESSION_MAX_MODEL_LEN_HELP if f.name == "max_model_len" else f.metadata["help"]
            assert sim[f.name].help == own


def test_a_command_receives_its_group_filled_with_its_subset_and_defaults():
    got = {}
    app = typer.Typer()

    @app.command()
    @with_groups(w=GroupUse(WorkloadFlags, only=("rate", "seed"), defaults={"seed": 0}))
    def run(name: str = typer.Argument(...), w: WorkloadFlags = WorkloadFlags(), json_out: bool = False) -> None:
        got.update(name=name, w=w, json_out=json_out)

    runner = CliRunner()
    assert runner.invoke(app, ["x", "--rate", "2.5", "--json-out"]).exit_code == 0
    # --seed left out: the command's default 0; the fields it does not take keep the group's default None
    assert got == {"name": "x", "w": WorkloadFlags(rate=2.5, seed=0), "json_out": True}
    assert runner.invoke(app, ["x", "--trace", "azure-conv"]).exit_code == 2  # not part of this command's subset
    assert given_flags(got["w"]) == ["--rate", "--seed"]


def test_sim_request_renames_to_the_record_and_keeps_its_defaults():
    args, synthetic = sim_request("M", "H100", WorkloadFlags(concurrency=8, think_time=1.5),
                                  EngineFlags(prefix_caching=False, tp=2), num_requests_default=2000)
    assert (args.think_time_s, args.enable_prefix_caching, args.tp, args.num_requests) == (1.5, False, 2, 2000)
    # flags left None take SimRequestArgs's defaults (the same as kvledger simulate's)
    assert (args.trace, args.seed, args.kv_cache_dtype, args.replicas, args.router, args.step_cost) == (
        "azure-conv", 0, "auto", 1, "round_robin", "roofline")
    assert synthetic is None
