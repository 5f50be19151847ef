"""Where a replay's GPU comes from when ``--gpu`` is not given: the run's record (a Kubernetes Deployment's
accelerator, meta.json's hardware), else, for ``validate``, the GPU a ``--gpu-profile`` file was fitted on; and for
``calibrate``, the one GPU every run's record names (a fit is one GPU's). Each says where it read the GPU in a note.
(Fresh-user trials: ``calibrate`` asked for --gpu that ``validate`` read from the same stage's record, and ``validate
--gpu-profile G.json`` on an inference-sim/training stage, whose launch record names no GPU, asked for --gpu though
the profile names the GPU it was fitted on.)"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvledger.errors import InputError

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

__all__ = ["with_record_gpu", "runs_gpu", "profile_gpu"]

_PASS = "pass --gpu (the GPU it ran on: a catalog name, see `kvledger gpus`, or a GPU file)"


def _named(t: Any) -> str | None:
    """The GPU the run's record names, as written there (None: none)."""
    meta = t.run.measured.metadata if t.run.measured is not None else None
    return str(meta.hardware) if meta is not None and meta.hardware else None


def profile_gpu(choice: str | None) -> tuple[str, str] | None:
    """(catalog name, the GPU as the profile writes it) of the GPU the ``--gpu-profile`` file (or ``bundled:NAME``)
    was fitted on; None for no profile, ``auto`` or ``none`` (the GPU's own bundled one: it needs the GPU first).

    Raises:
        FormatError: an unreadable profile. InputError: it names a GPU the catalog does not know.
    """
    if choice in (None, "auto", "none"):
        return None
    from kvledger.accounting.gpu_profile import load_gpu_profile
    from kvledger.calibration.recorded_gpu import recorded_gpu

    named = load_gpu_profile(str(choice)).gpu
    gpu = recorded_gpu(named)
    if gpu is None:
        raise InputError(f"--gpu-profile {choice} was fitted on {named!r}, which the GPU catalog does not know, and "
                         f"neither --gpu nor the run's record names the GPU: {_PASS}")
    return gpu, named


def with_record_gpu(t: Any, args: SimRequestArgs, *, from_profile: bool = True) -> tuple[SimRequestArgs, str | None]:
    """``args`` with the GPU the run's record names (as the catalog knows it) when ``--gpu`` was not given, else (with
    ``from_profile``) the GPU the ``--gpu-profile`` file was fitted on; and the note that says where it was read (None
    when --gpu was given: the flag wins, as for the model). A profile of another GPU than the record's is refused
    where the replay resolves it (``gpu_profile.resolve_gpu_profile``).

    Raises:
        InputError: no --gpu, and neither the record nor a --gpu-profile names a GPU; or the record names one the
            catalog does not know.
    """
    if args.gpu:
        return args, None
    from kvledger.calibration.recorded_gpu import recorded_gpu
    from kvledger.catalog.gpus import gpu_alias_note

    meta = t.run.measured.metadata if t.run.measured is not None else None
    named = _named(t)
    if named is None:
        got = profile_gpu(args.gpu_profile) if from_profile else None
        if got is None:
            raise InputError(f"{t.run.source}: the run's record names no GPU; {_PASS}")
        return replace(args, gpu=got[0]), (f"GPU {got[0]} from --gpu-profile {args.gpu_profile} (the GPU it was "
                                           "fitted on; neither --gpu nor the run's record names one)")
    gpu = recorded_gpu(named)  # the rule check_recorded_gpu holds a --gpu to
    if gpu is None:
        raise InputError(f"{t.run.source}: the run's record names the GPU {named!r}, which the catalog does not know; "
                         "pass --gpu (a catalog name, see `kvledger gpus`, or a GPU file)")
    where = (meta.extra.get("gpu_source") or meta.extra.get("record_file")
             or f"the run's record ({meta.source_format})")
    alias = gpu_alias_note(named)  # a family name several rows answer to: which one, and the others
    return replace(args, gpu=gpu), (f"GPU {gpu} from {where} ({named}; no --gpu given)"
                                    + (f"; {alias}" if alias else ""))


def runs_gpu(targets: list[Any], args: SimRequestArgs) -> tuple[SimRequestArgs, list[str]]:
    """``calibrate``'s GPU: ``--gpu`` when given (a record naming another is refused per run,
    ``recorded_gpu.check_recorded_gpu``), else the one GPU the runs' records name (``with_record_gpu``), with the
    notes saying where, each once.

    Raises:
        InputError: no --gpu, and a record names no GPU (or one the catalog does not know), or the records name
            several: which run named what, and to pass --gpu.
    """
    if args.gpu:
        return args, []
    if len(targets) == 1:
        got, note = with_record_gpu(targets[0], args, from_profile=False)
        return got, [note] if note else []
    from kvledger.calibration.recorded_gpu import recorded_gpu

    named = [(t.run.label, _named(t)) for t in targets]
    gpus = {recorded_gpu(n) if n else None for _, n in named}
    if len(gpus) > 1 or None in gpus:
        said = "; ".join(f"{label}: {_said(n)}" for label, n in named)
        several = len(gpus - {None}) > 1
        why = "they name several GPUs" if several else "not every one names a GPU the catalog knows"
        raise InputError(f"calibrate fits runs of one GPU, and without --gpu it takes the GPU from the runs' "
                         f"records, but {why} ({said}): pass --gpu (the GPU they ran on: a catalog name, see `kvledger "
                         "gpus`, or a GPU file)" + (", and leave out the runs of the other GPUs" if several else ""))
    done = [with_record_gpu(t, args, from_profile=False) for t in targets]
    return done[0][0], list(dict.fromkeys(n for _, n in done if n))


def _said(named: str | None) -> str:
    """What one run's record names, in words."""
    from kvledger.calibration.recorded_gpu import recorded_gpu

    if named is None:
        return "no GPU"
    gpu = recorded_gpu(named)
    return f"{named} ({gpu})" if gpu and gpu != named else (named if gpu else f"{named!r}, not in the GPU catalog")
