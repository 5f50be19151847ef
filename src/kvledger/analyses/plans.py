"""Guards the analyses share: a plan must leave a KV pool before any analysis of it means anything."""

from __future__ import annotations

from kvledger.accounting.plan import Plan
from kvledger.errors import DoesNotFitError, InputError

__all__ = ["require_kv_pool", "plan_document"]


def require_kv_pool(plan: Plan) -> None:
    """Raise when the plan leaves no usable KV block (the model does not fit at these settings).

    Raises:
        InputError: the model keeps no KV cache of its own.
        DoesNotFitError: no KV block left (exit 3), naming the model, GPU and TP, with the command that shows the
            options.
    """
    if plan.memory.kv_free:
        raise InputError(f"{plan.model.name} keeps no KV cache of its own (every layer reads another model's K/V, as a "
                         "speculative draft does): this analysis weighs KV memory, so run it on the target model")
    if plan.memory.num_gpu_blocks <= 1:
        s = plan.settings
        raise DoesNotFitError(f"{plan.model.name} leaves no KV cache memory on {plan.gpu.name} at TP {s.tp} "
                         f"(available {plan.memory.available_kv_bytes / 2**30:,.2f} GiB): run `kvledger plan` with the "
                         f"same "
                         "settings for the options (more TP, a larger GPU, a quantized checkpoint)")


def plan_document(plan: Plan, profile, link_given: bool) -> dict:
    """``kvledger plan --json``'s document (without the tier section): the plan's JSON with simulate's keys in its
    roofline, what priced it (``profile``: the GPU profile, or None) and its step cost's link terms (``link_given``:
    the TP all-reduces' link share was given, not a profile's fit)."""
    d = plan.to_dict()
    if d.get("roofline") is not None:
        from kvledger.analyses.serving.roofline_choice import link_data

        if profile is not None:
            d["roofline"]["priced_by"] = f"gpu: {profile.label}"
        d["roofline"].update(link_data(plan.step_cost(), link_given))
    return d
