""""Add a GPU" has two shapes, and the capacity options show one: ``--tensor-parallel-size`` doubled (one server over
more GPUs). The other is one more server like the logged one, the traffic split between them. On a capacity finding,
this note puts the two side by side on the same GPU count, from the option rows the ledger already re-planned: per
server the pool and the requests it holds are the logged ones, so N servers hold N times as many."""

from __future__ import annotations

import dataclasses

from kvledger.analyses.doctor.types import Finding

__all__ = ["MORE_SERVERS", "with_replica_note"]

MORE_SERVERS = "more servers instead: "
"""How the note begins (the summary prints it after the options)."""


def with_replica_note(f: Finding) -> Finding:
    """``f`` with the note when it is a triggered capacity finding whose rows size a TP option and the logged pool by
    the requests observed at saturation; ``f`` unchanged otherwise."""
    rows = f.options
    base = rows[0] if rows and f.name == "capacity" and f.triggered else None
    tp = next((r for r in rows if r["action"].startswith("--tensor-parallel-size")), None)
    if base is None or tp is None or not base.get("requests_of_observed_size") or not tp["requests_of_observed_size"]:
        return f
    k, n, gpus = tp["gpus_per_replica"] // base["gpus_per_replica"], base["requests_of_observed_size"], tp[
        "gpus_per_replica"]
    note = (f"{MORE_SERVERS}{k} servers {base['action']} on the {gpus} GPUs of {tp['action']}, the traffic split "
            f"between them: {k} × {n:,} = {k * n:,} requests of the size observed at saturation (each keeps its "
            f"{base['num_gpu_blocks']:,} blocks), against {tp['requests_of_observed_size']:,} for {tp['action']}; "
            + ("no all-reduce in their steps" if base["gpus_per_replica"] == 1 else
               f"their steps {base['action']}, each over {base['gpus_per_replica']} GPUs")
            + f", but each preempts again once its share of the traffic outgrows {n:,} such requests")
    return dataclasses.replace(f, notes=(*f.notes, note))
