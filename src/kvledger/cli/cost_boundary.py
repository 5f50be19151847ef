"""Where ``kvledger cost`` and ``kvledger.cost`` check their inputs, once, and turn them into the declared request
(``analyses.serving.cost_request.CostRequest``) that ``analyses.serving.cost_compute.compute_cost`` prices.

The checks run in this order, before any file is read or simulation run: ``--seeds`` (:func:`check_seeds_given`),
FILE(s) or ``--simulate`` (:func:`check_choice`; the command then checks its outputs), simulation flags with a FILE,
every input's value at once (``cost_inputs.check_inputs``), the bill's words and pairs (:func:`check_bill`: the team
capability, a KV tier's price without its size, the decision factors), FILE-only flags with ``--simulate``, the
simulation's request, its trace's arrivals and its KV tiers against one node (:func:`cost_request`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.analyses.serving.cost_compute import CostOutcome, compute_cost
from kvledger.analyses.serving.cost_request import CostBill, CostPrices, CostRequest, FileSource, SimSource
from kvledger.cli.cost_flags import CostBillFlags, CostFlags, CostMoreFlags
from kvledger.cli.cost_inputs import check_inputs, check_seeds
from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags

__all__ = ["CostArgs", "args_of", "check_seeds_given", "check_choice", "check_source_choice", "check_bill",
           "cost_request", "cost_outcome"]


@dataclass(frozen=True)
class CostArgs:
    """What ``kvledger cost`` was given: the FILE(s) or the model to simulate, the flag groups, every parameter by its
    name (``params``: the range checks read them) and each parameter's flag (``flags``: what an error names)."""

    files: list[Path] | None
    simulate: str | None
    prices: CostFlags
    bill: CostBillFlags
    more: CostMoreFlags
    workload: WorkloadFlags
    engine: EngineFlags
    params: dict[str, Any]
    flags: dict[str, str]
    dp: Any = None  # SimDataParallelFlags: vLLM's DP ranks of a MoE model for --simulate (dp_flags.with_dp)


def args_of(files: list[Path] | None, simulate: str | None, values: dict[str, Any], flags: dict[str, str]) -> CostArgs:
    """The arguments from every given value by its field name (the groups' fields; the others keep their defaults)."""
    groups = [cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})
              for cls in (CostFlags, CostBillFlags, CostMoreFlags, WorkloadFlags, EngineFlags)]
    params: dict[str, Any] = {"files": files}  # in the command's order: FILE(s), the cost groups, --simulate, the rest
    for i, g in enumerate(groups):
        if i == 3:
            params["simulate"] = simulate
        params.update({f.name: getattr(g, f.name) for f in dataclasses.fields(g)})
    return CostArgs(files, simulate, *groups, params, flags)


def check_seeds_given(a: CostArgs) -> None:
    """``--seeds N`` (N ≠ 1) only where there is a capacity search to repeat per seed: refused before any work."""
    if a.more.seeds != 1:
        check_seeds(bool(a.files), a.more.at_offered_load, a.params)


def check_source_choice(file: Path | None, simulate: str | None) -> None:
    """FILE(s) or --simulate, not both nor neither."""
    from kvledger.errors import InputError

    if (file is None) == (simulate is None):
        raise InputError(
            "give either FILE(s) to read or --simulate MODEL (with --gpu) to simulate, not "
            + ("both" if file else "neither")
        )


def check_choice(a: CostArgs) -> None:
    """``--seeds``, then FILE(s) or ``--simulate``: the checks before the command's outputs are."""
    check_seeds_given(a)
    check_source_choice(a.files[0] if a.files else None, a.simulate)


def cost_request(a: CostArgs) -> CostRequest:
    """The request of ``a``, every remaining input checked (all value errors at once: ``check_inputs``).

    Raises:
        InputError, UnknownNameError, FormatError: bad inputs, named by their flags (``a.flags``).
    """
    from kvledger.cli.sim_opts import reject_sim_flags
    from kvledger.errors import InputError

    c, more = a.prices, a.more
    if a.files:
        reject_sim_flags(a.workload, a.engine)
        if more.at_offered_load:
            raise InputError("--at-offered-load apply to --simulate (a measured FILE cannot be re-run at another "
                             "load)")
    api_price, gpu_rate, slo, usd = check_inputs(a.params, c.gpu, a.flags)
    bill = check_bill(a)
    prices = CostPrices(slo, api_price, gpu_rate, usd, c.gpu, c.gpu_provider, c.instance, c.utilization,
                        c.max_utilization, c.prefill_share, c.batch_share, c.cache_hit_rate, c.cache_write_rate)
    source = (FileSource(tuple(a.files), more.format, more.run_index, c.num_gpus, c.served_model) if a.files
              else _sim_source(a))
    return CostRequest(source, prices, bill, more.data_sovereignty, more.model_control, more.team_capability,
                       more.target)


def check_bill(a: CostArgs) -> CostBill:
    """The bill of ``a``, once what pricing would refuse after the run is read or simulated is refused here, with
    the same words, in pricing's order: the team capability (``host_bill.people_cost``), a KV tier's price without
    its size (``CostBill.kv_tiers``), then the decision factors (``cost_summary.DecisionFactors.check``).

    Raises:
        InputError: the first of them.
    """
    from kvledger.ledgers.cost_summary import DecisionFactors

    bill, more = CostBill(**dataclasses.asdict(a.bill)), a.more
    bill.people(more.team_capability)
    bill.kv_tiers()
    DecisionFactors(more.data_sovereignty, more.model_control, more.team_capability).check()
    return bill


def _sim_source(a: CostArgs) -> SimSource:
    """The simulation to price, its flags checked: none of a FILE's, no --target with --at-offered-load, the
    simulation's request (``sim_opts.sim_request``), a trace with arrivals for the search, the KV tiers on a node."""
    from kvledger.analyses.serving.sim_boundary import PROBE_NUM_REQUESTS
    from kvledger.cli.dp_flags import with_dp
    from kvledger.cli.sim_opts import sim_request
    from kvledger.errors import InputError

    c, more, model = a.prices, a.more, str(a.simulate)
    given = [flag for value, flag in ((c.num_gpus, "--num-gpus"), (more.run_index, "--run"), (more.format, "--format"),
                                      (c.served_model, "--model")) if value is not None]
    if given:
        raise InputError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a FILE; with --simulate "
                         "the GPU count is replicas × TP (× --data-parallel-size) (--replicas, --tp)")
    if more.at_offered_load:
        if more.target is not None:
            raise InputError("--target sets the attainment target of the capacity search, which --at-offered-load "
                             "skips; give one of them")
        args, synthetic = sim_request(model, c.gpu, a.workload, a.engine)
        return SimSource(model, with_dp(args, a.dp), synthetic, at_offered_load=True, seeds=more.seeds)
    args, synthetic = sim_request(model, c.gpu, a.workload, a.engine, num_requests_default=PROBE_NUM_REQUESTS)
    tier_gib = _tiers_on_a_node(a.bill, args)
    args = with_dp(args, a.dp, "--kv-tier-host" if tier_gib is not None else None)
    if synthetic is None:
        from kvledger.dynamics.workload.traces import require_arrivals

        require_arrivals(args.trace, "cost --simulate's SLO-capacity search replays a trace's own arrivals at scaled "
                         "rates", "; or price this trace at a load you give: --at-offered-load with --rate R (and "
                         "--seed S) or --concurrency N")
    return SimSource(model, args, synthetic, host_tier_gib=tier_gib, seeds=more.seeds)


def _tiers_on_a_node(bill: CostBillFlags, args: Any) -> float | None:
    """--kv-tier-host in GiB per GPU (None: not given), once it and --kv-tier-nvme are within one node's host memory
    and NVMe (``accounting.tier_bounds``), checked before any search."""
    from kvledger.accounting.tier_bounds import refuse_beyond_a_node
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.cli.analysis_opts import gib_option

    host, nvme = gib_option(bill.kv_tier_host, "--kv-tier-host"), gib_option(bill.kv_tier_nvme, "--kv-tier-nvme")
    for flag, kind, gib in (("--kv-tier-host", "host", host), ("--kv-tier-nvme", "nvme", nvme)):
        if gib is not None:
            refuse_beyond_a_node(f"{flag} {gib:,.6g} GiB (per GPU)", kind, gib, resolve_gpu(args.gpu), args.tp)
    return host


def cost_outcome(r: CostRequest) -> CostOutcome:
    """``compute_cost(r)`` with a terminal's progress line, and for a simulation the KV tiers' notes
    (``report.cost_tier_notes``) after the ledger's."""
    from kvledger.report.progress import working

    out = compute_cost(r, working)
    wl = (out.document.get("simulation") or {}).get("workload") or {}
    if isinstance(r.source, SimSource) and r.source.synthetic is None and "output_tokens_mean" in wl:
        from kvledger.analyses.serving.reasoning_note import reasoning_note

        if (note := reasoning_note(r.source.model, wl.get("trace", ""), wl["output_tokens_mean"])) is not None:
            out.report.notes.append(note)  # the simulation's own notes do not reach cost's (its probes' do not)
            out.document["notes"] = [*out.document.get("notes", []), note]
    if isinstance(r.source, SimSource) and out.kv_tiers is not None and out.kv_tiers.tiers:
        from kvledger.report.cost_tier_notes import tier_notes

        for tier_note in tier_notes(out.kv_tiers, out.capacity):
            out.report.notes.append(tier_note)
            out.document["notes"] = [*out.document.get("notes", []), tier_note]
    return out
