"""A plan's steps priced as ``kvledger simulate`` prices them, for the commands that judge one change on a deployment
(``fp8-kv``, ``spec-decode``, ``disagg``, ``offload``): one rule, so the same deployment and flags give the same step
time in every command.

Two steps, both ``simulate``'s own code: the plan's roofline fractions (``plan_fractions``: the fractions given, else
the GPU profile ``--gpu-profile`` selects — the GPU's bundled default where one is bundled — else 0.7/0.8, or a FLOP
fraction of 1 on the measured GEMM curve), then ``step_cost_choice.make_step_cost`` for ``--step-cost roofline``
under the engine config ``from_plan`` gives the plan (its async scheduling and batching): the roofline with the
profile's host terms and GEMM curve, wrapped in the engine's host term (``accounting/host_overhead.py``: eager launches
with ``--enforce-eager``, V0's and V1's CPU time per step). ``--cpu-overhead``, ``--enforce-eager`` and ``--wddm`` reach
it through the plan's settings, as in ``simulate``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PricingFlags", "plan_fractions", "priced_settings", "simulate_step_cost", "split_host",
           "priced_by_run", "simulate_priced_tiers"]


@dataclass(frozen=True)
class PricingFlags:
    """``simulate``'s flags that price a step and live outside the plan settings (None: simulate's default).

    Attributes:
        gpu_profile: ``--gpu-profile`` (None: the GPU's bundled default profile, if any; "none"; a file).
        gemm_efficiency: ``--gemm-efficiency`` (None: the profile's mode, else measured; carried: as unprofiled).
        achievable_flops_fraction / achievable_bandwidth_fraction: the fractions as given, 0–1 (None: not given;
            both given: no GPU profile).
        allreduce_link_share: ``--allreduce-link-share``, the TP all-reduces' share of their link, in (0, 1] (None: the
            GPU profile's fitted share, else ``tp_comm``'s rule); ``roofline_choice`` prices and checks it.
    """

    gpu_profile: str | None = None
    gemm_efficiency: str | None = None
    achievable_flops_fraction: float | None = None
    achievable_bandwidth_fraction: float | None = None
    allreduce_link_share: float | None = None


def plan_fractions(a: Any, gpu, model: Any = None) -> dict[str, float | None]:
    """The roofline fractions ``simulate`` plans with (None: the settings' default): the given ones, the rest from the
    GPU profile ``a.gpu_profile`` selects; without a profile a FLOP fraction of 1 when the measured GEMM curve prices
    the matmuls as measured (``gemm_efficiency.py``) — for ``model``'s GEMMs (``curve_applies``: not an MoE's or an
    FP8 model's, which keep the flat default). The TP all-reduces' link share likewise: ``--allreduce-link-share``,
    else the profile's fitted share (None: ``tp_comm``'s rule). The one place that decides either; ``Plan.step_cost``
    reads the settings. ``a``: any object with ``PricingFlags``' attributes."""
    from kvledger.accounting.gemm_efficiency import curve_applies
    from kvledger.accounting.settings import PlanSettings
    from kvledger.analyses.serving.gemm_choice import gemm_curve_of
    from kvledger.analyses.serving.step_cost_choice import gpu_profile_of

    share = getattr(a, "allreduce_link_share", None)
    if share is not None:  # the CLI's range (kvledger.ranges), checked again for the Python API, in the same words
        from kvledger.ranges import check_options

        check_options("simulate", {"allreduce_link_share": share})
    fractions = {"achievable_flops_fraction": a.achievable_flops_fraction,
                 "achievable_bandwidth_fraction": a.achievable_bandwidth_fraction, "allreduce_link_share": share}
    prof = gpu_profile_of(a, gpu.name)
    if prof is not None:  # the GPU's fitted efficiency and link share where the user gave none
        ff = prof.flops_fraction
        if prof.gemm_efficiency == "measured" and model is not None and not curve_applies(model, gpu):
            # the fraction scales measured GEMM efficiencies (1.0: as measured), which this model's GEMMs (MoE, FP8)
            # have none of: it scales the flat default they get uncalibrated instead, not taken as a share of peak
            ff *= PlanSettings.achievable_flops_fraction
        fractions = {"achievable_flops_fraction": a.achievable_flops_fraction or ff,
                     "achievable_bandwidth_fraction": a.achievable_bandwidth_fraction or prof.bandwidth_fraction,
                     "allreduce_link_share": prof.allreduce_link_share if share is None else share}
    elif a.achievable_flops_fraction is None and gemm_curve_of(a, gpu, prof) is not None and (
            model is None or curve_applies(model, gpu)):
        fractions["achievable_flops_fraction"] = 1.0  # the measured curve as measured (gemm_efficiency.py)
    if prof is None and a.achievable_bandwidth_fraction is None:  # a GPU without measured tables: its measured share
        from kvledger.accounting.carried_kernels import carried_bandwidth
        from kvledger.analyses.serving.gemm_choice import carried

        fractions["achievable_bandwidth_fraction"] = carried_bandwidth(gpu, carried(a))  # None: the default 0.8
    return fractions


def priced_settings(settings, gpu, flags: PricingFlags, model: Any = None):
    """``settings`` (PlanSettings) with the fractions ``simulate`` would plan with for ``flags`` (``plan_fractions``).

    Raises:
        FormatError / InputError: an unreadable ``--gpu-profile`` file, one fitted on another GPU, a GEMM mode the
            profile was not fitted with.
    """
    from kvledger.accounting.plan import roofline_model

    served = None if model is None else roofline_model(model, settings)  # --quantization fp8: the FP8 weights' GEMMs
    update = {k: v for k, v in plan_fractions(flags, gpu, served).items() if v is not None}
    return settings.model_copy(update=update) if update else settings


def simulate_step_cost(plan, flags: PricingFlags | None = None, *, policy: str | None = None,
                       engine_plan: Any = None) -> tuple[Any, dict]:
    """(step-cost model, its description) ``kvledger simulate --step-cost roofline`` uses for ``plan`` with ``flags``
    (the plan built from ``priced_settings``), under the engine config ``from_plan`` gives it with ``policy``.
    ``flags`` None: the plan's fractions taken as given (no GPU profile, flat matmuls), the host term still the
    engine's.

    The description is simulate's ``step_cost`` (name, source, scope, ``priced_by`` with a GPU profile), which
    ``report.step_cost_view.step_cost_lines`` prints as simulate does. ``engine_plan``: the plan whose engine config
    (its scheduling: async or not, the batching) runs the step, where ``plan`` itself does not start (a 16-bit KV pool
    too short for max_model_len, priced as the same engine with FP8 KV would run it); default ``plan``.
    """
    from types import SimpleNamespace

    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.analyses.serving.step_cost_choice import make_step_cost

    s = plan.settings
    if flags is None:  # the plan's own fractions, as given: no GPU profile (gpu_profile_of), no GEMM curve on top
        flags = PricingFlags(gemm_efficiency="flat", achievable_flops_fraction=s.achievable_flops_fraction,
                             achievable_bandwidth_fraction=s.achievable_bandwidth_fraction)
    # simulate's request (sim_setup.SimRequestArgs) in the fields make_step_cost reads
    a = SimpleNamespace(**asdict(flags), model=plan.model.name, gpu=plan.gpu.name, tp=s.tp, step_cost="roofline")
    if policy is None and s.engine == "sglang":
        policy = "sglang"
    cfg, _ = engine_config_from_plan(plan if engine_plan is None else engine_plan, policy=policy)
    return make_step_cost(a, plan, overlap_cpu=cfg.async_scheduling, batching=cfg.batching)


def split_host(cost: Any) -> tuple[Any, Any]:
    """(the roofline inside ``cost``, its host term or None): a judgment that reads the roofline's FLOPs and bytes
    (``costs``, ``time_s``) prices a step as ``host.step(roofline.time_s(c), prefill tokens, sequences)``, which is
    ``cost.step_time_s`` of the same shape (``host_overhead.HostStepCost``)."""
    from kvledger.accounting.host_overhead import HostStepCost

    return (cost.inner, cost.host) if isinstance(cost, HostStepCost) else (cost, None)


def priced_by_run(info: dict) -> str:
    """A step cost of a simulated run in words, for a figure derived from it (``TierPlan.priced_by``)."""
    return f"the run's step cost ({info.get('name', 'roofline')}: the step cost line)"


def simulate_priced_tiers(plan, tiers, flags: PricingFlags, *, suffix_tokens: int = 1):
    """``plan``'s KV tiers (``accounting.kv_tiers.build_tier_plan``) with their break-evens priced as ``offload`` and
    ``simulate`` price a prefill (``simulate_step_cost`` of the plan ``priced_settings`` gives for ``flags``), so
    ``plan`` and the commands that simulate print one break-even for the same flags. A plan the engine cannot start
    (no KV block fits, no config to price) keeps the memory plan's roofline, and its ``priced_by`` says why.

    Raises:
        InputError: tier settings the engine refuses or ignores; an unreadable ``--gpu-profile``.
    """
    from kvledger.accounting.kv_tiers import PLAN_ROOFLINE, build_tier_plan
    from kvledger.accounting.plan import build_plan
    from kvledger.errors import DoesNotFitError

    priced = priced_settings(plan.settings, plan.gpu, flags, plan.model)
    try:
        at = plan if priced == plan.settings else build_plan(plan.model, plan.gpu, priced, with_advice=False)
        cost, info = simulate_step_cost(at, flags)
    except DoesNotFitError:  # nothing to simulate: the memory plan's roofline, said
        return build_tier_plan(plan, tiers, suffix_tokens=suffix_tokens, step_cost=plan.step_cost(),
                               priced_by=f"{PLAN_ROOFLINE}: the engine would not start, so no engine step cost")
    curve = "the measured GEMM efficiency" if info.get("gemm_efficiency") == "measured" else "peak FLOP/s"
    words = (f"simulate's step cost, as `offload` and `simulate` price these steps ({info.get('name', 'roofline')}: "
             f"matmuls at {info.get('flops_fraction', 0):.0%} of {curve}, {info.get('bandwidth_fraction', 0):.0%} of "
             "peak bandwidth, the engine's CPU term; not the plan's bare roofline tables)")
    return build_tier_plan(plan, tiers, suffix_tokens=suffix_tokens, step_cost=cost, priced_by=words)
