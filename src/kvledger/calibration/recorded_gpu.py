"""The GPU a measured run's record names, checked against the one a validation or calibration replays it on: a run is
compared with the engine that served it, so a record naming another GPU than ``--gpu`` is refused (fresh-user trial: an
RTX 4090 run validated with --gpu H100 ran, and a 4090 profile was fitted on an RTX PRO 6000 run)."""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["recorded_gpu", "check_recorded_gpu"]


def recorded_gpu(hardware: str | None) -> str | None:
    """The catalog name of the GPU a run's record names (meta.json's device_name, a manifest's accelerator), matched
    by the catalog's names or its full name; None when the record names none or one the catalog does not know."""
    from kvledger.catalog.gpus import get_gpu, gpu_catalog
    from kvledger.errors import UnknownNameError

    if not hardware:
        return None
    try:
        return get_gpu(hardware).name
    except (UnknownNameError, InputError):
        key = " ".join(hardware.lower().split())
        return next((g.name for g in gpu_catalog().values() if g.name.lower() == key), None)


def check_recorded_gpu(run: Any, gpu_name: str, given: str | None) -> None:
    """Refuse to replay a run on another GPU than the one its record names: a validation or a calibration compares
    the run with the engine that served it (a profile fitted so would be another GPU's)."""
    md = run.measured.metadata if run.measured is not None else None
    rec = recorded_gpu(md.hardware if md is not None else None)
    if rec is not None and rec != gpu_name:
        raise InputError(f"{run.source}: the run's record says it ran on {md.hardware} ({rec} in the GPU catalog), "
                         f"but --gpu {given} is the {gpu_name}: a validation or calibration replays a run on the GPU "
                         f"that served it (pass --gpu for {rec}, or leave this run out)")
