"""Whether the ledger's plan holds the log's own KV pool, before the capacity options are sized from it.

The options (``capacity_options``) re-plan the log's available KV memory with the page of the model, KV dtype and TP
the ledger planned, while the "as logged" row keeps the log's printed block count. Where the two disagree beyond the
2-decimal rounding of the printed memory (``startup.blocks_row``: the ledger's floor(available / page) outside the
range the printed GiB allows), the page is not the server's (``--model`` names another model, or another KV dtype or
TP), and every option would set a pool of one page size against a pool of another: a fresh-user trial passed
``--model Qwen/Qwen2.5-7B`` on a Llama-3.1-8B log and read "--kv-cache-dtype fp8: 120,258 blocks" against the 26,306
as logged (×4.6 for a dtype that halves the page). No option is sized then; the words say why.
"""

from __future__ import annotations

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.startup import blocks_row
from kvledger.units import GiB

__all__ = ["pool_mismatch"]


def pool_mismatch(ctx: DoctorContext) -> str | None:
    """Why no option can be sized from the ledger's plan (its page does not make the log's pool), or None."""
    st, plan = ctx.log.startup, ctx.log_memory_plan
    row = blocks_row(ctx) if plan is not None and st.available_kv_bytes else None
    if row is None or row.agrees is not False or not row.log_value or row.ledger_value is None:
        return None
    m, logged = plan.memory, int(row.log_value)
    who = ctx.model.name if ctx.model is not None else "the model planned"
    return (f"The ledger's plan does not hold this server's pool: with {who}'s KV page ({m.bytes_per_block:,} B per "
            f"block of {m.block_size} tokens) the log's {st.available_kv_bytes / GiB:.2f} GiB of available KV memory "
            f"makes {int(row.ledger_value):,} blocks, against the {logged:,} the log prints "
            f"(≈{st.available_kv_bytes / logged:,.0f} B per block), so the model, KV dtype or TP planned are not the "
            "server's, and no option is sized from them (each would set one page size's pool against the other's). "
            "Drop --model, or pass the served model's config.json and the server's settings.")
