"""The roofline's words under pipeline parallelism: what a step is (one pass through the stages, not one GPU's step),
the sends between stages it includes, and the bubble it leaves out (``accounting/pipeline_pass.py``)."""

from __future__ import annotations

from typing import Any

from kvledger.units import fmt_duration

__all__ = ["decode_title", "pipeline_rows"]


def decode_title(p: Any) -> str:
    """The decode table's title: each GPU's step at PP 1; under --pp, a pass through every stage in turn."""
    s = p.settings
    n = s.tp * s.pp
    gpus = f"tok/s: the replica's {n} GPU{'s' * (n > 1)} together, and per GPU"
    if s.pp == 1:
        return f"Decode step vs concurrency (step: each GPU's; {gpus})"
    return (f"Decode step vs concurrency (step: one batch's pass through the {s.pp} stages in turn, each stage's "
            f"{s.tp} GPUs running 1/{s.pp} of the layers, with the sends between them; {gpus})")


def pipeline_rows(r: Any) -> list[tuple[str, str, str]]:
    """Rows for the roofline table under --pp (none at PP 1): the pass's scope, its sends and the bubble."""
    pl = r.pipeline
    if not pl:
        return []
    pp, tp = pl["stages"], pl["gpus_per_stage"]
    across, within = pl["boundaries_across_nodes"], pl["boundaries_within_node"]
    where = ", ".join(w for w in (f"{across} across nodes at {pl['nic_bytes_per_s'] / 1e9:g} GB/s a GPU's NIC "
                                  f"({pl['nic_source']})" if across else "",
                                  f"{within} within a node at {pl['scaleup_bytes_per_s'] / 1e9:g} GB/s"
                                  if within else "") if w)
    return [
        ("pipeline step", f"{pp} stages × TP {tp}",
         f"every step time here is one pass through the {pp} stages in turn; its FLOPs and bytes are the whole pass's, "
         f"each GPU reading only its stage's share (about 1/{pp})"),
        ("stage-to-stage sends", f"{fmt_duration(pl['decode_send_s'])} a decode token, "
         f"{fmt_duration(pl['prefill_send_s'])} a {pl['prefill_tokens']:,}-token chunk",
         f"{pp - 1} boundar{'y' if pp == 2 else 'ies'} ({where}): hidden_states + residual, "
         f"{pl['send_bytes_per_token']:,} B a token, each GPU sending 1/{tp} and the next stage all-gathering it "
         "(vLLM send_tensor_dict); in every step time; the metadata sent over the CPU group not priced"),
        ("pipeline bubble", "not in these times",
         f"vLLM keeps up to {pp} batches in flight: a decode row is one batch's pass, each stage busy about 1/{pp} "
         f"of it; the running requests split into {pp} batches give up to {pp} × the row's tok/s at 1/{pp} the batch"),
    ]
