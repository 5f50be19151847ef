"""The sticker (throughput-priced) self-host cost beside the goodput-priced one, and the JSON view of a capacity
(``ledgers/cost.py``'s ``Capacity``)."""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.cost import Capacity, SelfHostSetup, self_host_unit_ledgers
from kvledger.ledgers.instances import Packing
from kvledger.ledgers.items import Ledger

__all__ = ["sticker_prices", "capacity_dict"]


def sticker_prices(cap: Capacity, setup: SelfHostSetup, sh_out: Ledger, replicas: int | None = None,
                   packing: Packing | None = None,
                   split: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """The sticker (throughput-priced) self-host cost beside the goodput-priced ``sh_out``, and the multiplier
    (``replicas``, ``packing``, ``split``: as ``self_host_unit_ledgers``)."""
    sticker_cap = Capacity(cap.goodput_req_per_s, cap.throughput_input_tok_per_s or cap.good_input_tok_per_s,
                           cap.throughput_output_tok_per_s or cap.good_output_tok_per_s, 0.0, 0.0, cap.prefill_share,
                           cap.prefill_share_method, cap.estimate,
                           load=None if cap.load is None else cap.load.as_throughput())
    st_in, st_out = self_host_unit_ledgers(sticker_cap, setup, replicas=replicas, packing=packing, split=split)
    # the figures the multiplier divides: the capacity run's, or those of the run at the volume's load it priced
    at = (lambda c: c.good_output_tok_per_s) if cap.load is None else (lambda c: c.load.tok_per_s("output"))
    return {"usd_per_mtok_input": st_in.total_usd, "usd_per_mtok_output": st_out.total_usd,
            "multiplier_output": sh_out.total_usd / st_out.total_usd if st_out.total_usd else None,
            "throughput_output_tok_per_s": at(sticker_cap), "good_output_tok_per_s": at(cap),
            "formula": "effective cost = sticker × throughput ÷ goodput",
            "note": "same GPU cost spread over all completed tokens (throughput), as a price sheet would; goodput ÷ "
                    "this = "
                    "the effective-cost multiplier"}


def capacity_dict(cap: Capacity) -> dict[str, Any]:
    """JSON-ready view of a Capacity with the mean tokens per good request."""
    return {"goodput_req_per_s": cap.goodput_req_per_s, "good_input_tok_per_s": cap.good_input_tok_per_s,
            "good_output_tok_per_s": cap.good_output_tok_per_s,
                "throughput_input_tok_per_s": cap.throughput_input_tok_per_s,
            "throughput_output_tok_per_s": cap.throughput_output_tok_per_s, "mean_input_tokens": cap.mean_input_tokens,
            "mean_output_tokens": cap.mean_output_tokens, "prefill_share": cap.prefill_share,
            "prefill_share_method": cap.prefill_share_method, "prefill_floor": cap.prefill_floor,
                "estimate": cap.estimate, "slo_capacity_req_per_s": cap.slo_capacity_req_per_s,
            "sized_on_req_per_s": cap.capacity_bound_req_per_s,  # the bound where it caps the SLO capacity, else null
            "sizing_req_per_s": cap.sizing_req_per_s, "sizing_basis": cap.sizing_words,
            "workload_input_tokens_mean": cap.workload_input_tokens_mean,
            "workload_output_tokens_mean": cap.workload_output_tokens_mean,
            "at_volume_load": None if cap.load is None else cap.load.to_dict(),  # null: priced at the capacity run
            "capacity_lower_bound": cap.lower_bound, "attainment_at_sizing_rate": cap.attainment}
