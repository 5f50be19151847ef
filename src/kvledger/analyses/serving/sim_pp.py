"""``--pp P`` (vLLM ``--pipeline-parallel-size``) in ``kvledger simulate``, ``goodput --simulate`` and ``cost
--simulate``: the checks, whether the release schedules asynchronously under PP, the step cost split over the stages
(``accounting/pipeline_cost.py``) and the note that says which engine loop ran.

Which loop vLLM runs, read in 0.19.0 and 0.33.0:

* Async scheduling off under PP (0.33's V1 model runner: ``config/vllm.py : VllmConfig.__post_init__`` turns it off
  for "pipeline parallelism" and refuses ``--async-scheduling``; any release with ``--no-async-scheduling``): the
  batch queue holds ``pipeline_parallel_size`` batches, each request in at most one (``dynamics/pipeline.py``).
* The V2 model runner (the default for every model from 0.29, ``vllm_runner.model_runner``) keeps async scheduling
  under PP with ``max_concurrent_batches`` = P + 1, each request's decodes P scheduler steps apart (``AsyncScheduler
  .decode_stagger``; empty schedules advance ``current_step`` and the worker's ring alike) and the sampled tokens
  passed back on a ring (``v1/worker/gpu/pp_utils.py : PPHandler``): read in 0.23.0–0.25.0, 0.29.0, 0.31.0 and
  0.33.0, ``dynamics/pipeline_v2.py``. 0.22 (V2 for some models from then) passes the tokens back each batch with no
  stagger (``pp_utils.pp_receive``): not modelled, refused. The V2
  runner without async scheduling runs the plain scheduler with the batch queue of P (the first bullet); its ring's
  wait (call m on call m − P) then falls before the schedule (call m − P's output was processed), so that loop holds.
* Async scheduling on under PP (0.19's default: ``VllmConfig.__post_init__`` turns it on for the mp executor;
  ``max_concurrent_batches`` = P): the ``AsyncScheduler`` puts every running request in every batch (its
  ``num_output_placeholders``), and the V1 model runner's ``sample_tokens`` on each stage before the last receives the
  batch's sampled tokens from the last stage (``_pp_receive_prev_sampled_token_ids_to_input_batch``: a
  ``torch.distributed.broadcast`` on the PP group, ordered on the stage's stream before its next forward), so the
  first stage starts batch k + 1 after batch k left the last: one pass at a time, each step the whole pipeline's pass,
  simulated as the async replica's batch queue of two with that step cost. At P > 2 vLLM schedules up to P − 1 batches
  ahead, which that replica does not model: refused.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["PP_FROM", "V2_PP_FROM", "check_pp_request", "pp_overrides", "pipelined_cost", "pp_figures", "loop_name",
           "runs_v2"]

PP_FROM = (0, 19, 0)
"""The first vLLM release whose PP engine loop was read (0.19.0; also 0.33.0)."""

V2_PP_FROM = (0, 23, 0)
"""The first release whose V2 model runner runs the staggered PP loop (read in 0.23.0, 0.24.0, 0.25.0, 0.29.0, 0.31.0
and 0.33.0; 0.22.0's broadcasts each batch's sampled tokens in its ``sample_tokens``, ``pp_utils.pp_receive``, with no
stagger: not modelled)."""

_FEWER = ("plan the stages with `kvledger plan --pp {pp}`, or simulate one TP group on the same GPUs (--tp × {pp}, its "
          "all-reduces over the NICs across nodes)")


def check_pp_request(a: Any) -> None:
    """Refuse what the PP simulation does not model, before any planning.

    Raises:
        InputError: SGLang's policy, DP ranks, several replicas or a router, a batching other than vLLM v1's.
    """
    pp, fewer = a.pp, _FEWER.format(pp=a.pp)
    if a.policy == "sglang":
        raise InputError(f"--pp {pp} with --policy sglang: SGLang's pipeline loop (its own scheduler, micro-batches) "
                         f"was not read, so it is not simulated; simulate vLLM's (drop --policy sglang), or {fewer}")
    if (a.data_parallel_size or 1) > 1:
        raise InputError(f"--pp {pp} with --data-parallel-size {a.data_parallel_size}: DP ranks with pipeline stages "
                         "are not modelled (`kvledger plan` refuses them too); drop one of them")
    if a.replicas > 1 or a.router != "round_robin":
        raise InputError(f"--pp {pp} with --replicas/--router: the pipeline is simulated for one engine (its stages on "
                         f"TP × {pp} GPUs); drop --replicas and --router (several such engines serve as many times the "
                         "load)")
    if a.batching not in (None, "continuous") or a.policy not in (None, "vllm"):
        raise InputError(f"--pp {pp} with --policy/--batching: the pipeline loop is vLLM v1's (continuous batching, "
                         "its scheduler); drop them")


def pp_overrides(a: Any, plan: Any) -> tuple[dict[str, Any], str]:
    """({"async_scheduling": …} as vLLM resolves it under PP, its reason) for ``a.pp`` > 1; ({}, "") at PP 1.

    Raises:
        InputError: a release before 0.19.0; --async-scheduling where the release refuses it under PP; async
            scheduling with P > 2 (module doc).
    """
    if a.pp <= 1:
        return {}, ""
    from kvledger.accounting.resolved_defaults import resolved_from
    from kvledger.accounting.vllm_rules import LATEST, parse_version

    ver = parse_version(plan.settings.engine_version or LATEST)
    if ver < PP_FROM:
        raise InputError(f"--pp {a.pp} with --engine-version {plan.settings.engine_version}: vLLM's pipeline engine "
                         "loop was read from 0.19.0 on; simulate a release from 0.19.0")
    auto, v2 = resolved_from(plan)["async_scheduling"], runs_v2(plan)
    if v2 and ver < V2_PP_FROM:
        raise InputError(f"--pp {a.pp} on vLLM {'.'.join(map(str, ver))}'s V2 model runner: its pipeline loop was "
                         "read from 0.23.0 on (decodes pipeline_parallel_size scheduler steps apart; 0.22's "
                         "differs); simulate it with --engine-version 0.23.0 or later, or the V1 runner's loops with "
                         "--engine-version 0.19.0, or " + _FEWER.format(pp=a.pp))
    on, why = (auto["value"], auto["source"]) if a.async_scheduling is None else (a.async_scheduling, "given")
    if on and v2:
        return {"async_scheduling": True}, why
    if on and not auto["value"] and ver >= (0, 33, 0):
        raise InputError(f"--pp {a.pp} with --async-scheduling: {auto['source']}; vLLM refuses the pair (\"Async "
                         "scheduling is not supported by the V1 model runner with pipeline parallelism\"): drop "
                         "--async-scheduling")
    if on and a.pp > 2:
        raise InputError(f"--pp {a.pp} with async scheduling ({why}): vLLM then schedules up to {a.pp - 1} batches "
                         "ahead of the one passing through the stages, which is not modelled (--pp 2 is); give "
                         f"--no-async-scheduling, or {_FEWER.format(pp=a.pp)}")
    return {"async_scheduling": on}, why


_LOOP_WORDS = {
    "v2": ("up to {pp1} batches in flight (pipeline_parallel_size + 1: max_concurrent_batches with async scheduling), "
           "each request's decodes "
           "{pp} scheduler steps apart (decode_stagger; empty schedules count), and the stages before the last wait "
           "for the sampled tokens of the batch {pp} schedules back before their next forward: a request's next token "
           "waits for its batch's pass through every stage, and the stages overlap other requests' batches"),
    "queue": ("up to {pp} batches in flight, each request in one (vLLM's batch queue of pipeline_parallel_size without "
              "async scheduling): a request's next token waits for its batch's pass through every stage, and the "
              "stages overlap other batches"),
    "one": ("one batch through every stage at a time (async scheduling: each stage before the last waits for the last "
            "stage's sampled tokens before its next forward), each step the pipeline's whole pass")}
_LOOP_FILES = {"v2": ", v1/core/sched/async_scheduler.py AsyncScheduler._update_after_schedule "
                     "(next_decode_eligible_step), v1/worker/gpu/pp_utils.py PPHandler (V2 model runner)",
               "queue": "",
               "one": ", v1/worker/gpu_model_runner.py sample_tokens (async scheduling: one pass at a time)"}


def _loop_key(cost: Any) -> str:
    return "v2" if getattr(cost, "staggered", False) else "queue" if cost.overlapping else "one"


def loop_name(ver: str | None, cost: Any) -> str:
    """The engine loop's name with the release (``ver``: the plan's vLLM version) for a ``PipelineStepCost``."""
    return {"v2": f"vLLM {ver} V2 model runner pipeline loop (async scheduling)",
            "queue": f"vLLM {ver} batch-queue pipeline loop (no async scheduling)",
            "one": f"vLLM {ver} V1 model runner async loop (one pass at a time)"}[_loop_key(cost)]


def runs_v2(plan: Any) -> bool:
    """Whether the plan's engine starts vLLM's V2 model runner (given or the release's default)."""
    from kvledger.accounting.vllm_rules import LATEST, parse_version
    from kvledger.accounting.vllm_runner import model_runner

    s = plan.settings
    ver = parse_version(s.engine_version or LATEST)
    return model_runner(plan.model, ver, s.model_runner, plan.gpu.gpu_id.startswith("amd_"), bool(s.quantization)).v2


def pipelined_cost(plan: Any, config: Any, cost: Any, info: dict[str, Any], why: str,
                   notes: list[str]) -> tuple[Any, dict]:
    """(the stages' step cost around the whole model's ``cost``, its description) for a plan at ``--pp`` P > 1
    (module doc); the run's note appended to ``notes``."""
    from kvledger.accounting.pipeline_cost import PipelineStepCost
    from kvledger.accounting.pipeline_pass import pipeline_sends
    from kvledger.accounting.vllm_profile import pp_stages

    s = plan.settings
    layers = tuple(st.end_layer - st.start_layer for st in pp_stages(plan.model.num_layers, s.pp))
    staggered = config.async_scheduling and runs_v2(plan)
    out = PipelineStepCost(cost, pipeline_sends(plan.model, plan.gpu, s), layers, not config.async_scheduling,
                           staggered)
    split = " + ".join(map(str, layers))
    loop = f"{loop_name(plan.memory.engine_version, out)}: " + _LOOP_WORDS[_loop_key(out)].format(pp=s.pp, pp1=s.pp + 1)
    cross = sum(out.sends.crossing)
    said = (f"pipeline: --pp {s.pp} × --tp {s.tp}, stages of {split} layers, each stage its layers' share of the step "
            f"cost plus the send of hidden_states and residual to the next ({cross} of {s.pp - 1} boundaries across "
            f"nodes, {out.sends.nic_source}); {loop}; simulated in the Python engine loop (the C fast path steps one "
            "batch at a time)")
    note = (f"pipeline parallelism: {loop}; async scheduling {'on' if config.async_scheduling else 'off'} ({why}); "
            f"each stage holds its layers' KV: the plan's pool of the binding stage, {plan.memory.num_gpu_blocks:,} "
            f"blocks of {plan.memory.block_size} tokens; the error bands come from measured runs without pipeline "
            "stages (none with them)")
    notes.append(note)
    return out, {**info, "source": f"{info['source']}; {said}", "pipeline_parallel_size": s.pp}


def pp_figures(setup: Any, result: Any) -> dict[str, Any] | None:
    """The run's pipeline figures for the document (None without stages): stages and their layers, GPUs, the loop, and
    (the overlapping loop) how busy the stages were: Σ stage compute / (stages × the engine's busy time)."""
    cost = setup.cost
    if getattr(cost, "pp", 1) <= 1:
        return None
    ver = setup.plan.memory.engine_version
    key = _loop_key(cost)
    out = {"pipeline_parallel_size": cost.pp, "layers_per_stage": list(cost.layers), "gpus": cost.pp * setup.tp,
           "loop": loop_name(ver, cost), "batches_in_flight_max": {"v2": cost.pp + 1, "queue": cost.pp}.get(key, 1),
           "rule_source": f"vLLM {ver} v1/engine/core.py EngineCore.step_with_batch_queue, v1/core/sched/scheduler.py "
                          f"Scheduler.schedule{_LOOP_FILES[key]}"}
    facts = result.extra.get("pipeline")
    if facts is not None:
        out["stage_busy_share"] = facts["stage_busy_share"]
    return out
