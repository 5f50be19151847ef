"""The waterfall of terms: concurrency at the headline context as each memory term is added, from the marketed
capacity to the engine's figure (moved out of advice.py, which re-exports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvledger.catalog.vendor_words import device_runtime, smi_tool
from kvledger.units import GB, GiB, MiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["waterfall"]


def waterfall(p: Plan) -> list[dict[str, Any]]:
    """Concurrency at the headline context as each term is added, from the back-of-envelope to the engine's figure."""
    m = p.memory
    ctx = 8192 if m.max_model_len >= 8192 else m.max_model_len
    per_req = p.kv.bytes_per_request(ctx)
    if per_req <= 0 or m.available_given:
        return []
    d = {x.name: x.bytes for x in m.deductions}
    w = d.get("weights", 0.0)
    u = m.fraction
    steps = [(f"marketing capacity: {p.gpu.memory_gb_marketed:g} GB × {u} − weights",
              p.gpu.memory_gb_marketed * GB * u - w)]
    if p.gpu.nvidia_smi_mib:
        smi = p.gpu.nvidia_smi_mib * MiB
        steps.append(
            (
                f"back-of-envelope: {smi_tool(p.gpu)} {smi / GiB:.2f} GiB × {u} − weights − 2 GiB rule-of-thumb "
                "overhead",
                smi * u - w - 2 * GiB,
            )
        )
    avail = m.requested_bytes - w
    steps.append(
        (f"engine: {(device_runtime(p.gpu) + ' ').lstrip()}device total {m.gpu_total_bytes / GiB:.2f} GiB × {u} − "
         "weights, before its other terms", avail)
    )
    for name, b in d.items():
        if name != "weights" and b:
            avail -= b
            steps.append((f"− {name} ({b / GiB:.2f} GiB)", avail))
    out = [{"step": s, "available_kv_bytes": a, "max_concurrency": a / per_req} for s, a in steps]
    row = p.row_at(ctx) if ctx in p.planned_contexts else None  # the headline row, where the plan holds it
    if row:
        out.append({"step": f"whole {m.block_size}-token blocks, engine's per-request demand "
                            f"({row.blocks_per_request:,} blocks)",
                    "available_kv_bytes": m.num_gpu_blocks * m.bytes_per_block, "max_concurrency": row.max_concurrency})
    for o in out:
        o["context_tokens"] = ctx
    return out
