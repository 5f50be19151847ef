"""What ``kvledger validate`` says when the replay of a run refuses a name the run's record gave (its model, its GPU),
the user having named neither: where the name came from, and, for a start-up refusal (``EngineRefusalError``), that
the record contradicts the rule, since the run it records did start.

A refusal about the record's GPU is bad input (exit 2) whether the memory plan does not fit it (``DoesNotFitError``)
or the engine release refuses a setting on it: the record, not the hardware, is then what is wrong (a GPU or engine
version misread from the manifests, or a launch flag the run did not have). With ``--gpu`` given the refusal stands as
it is (exit 3 for either), as ``kvledger plan`` gives it.
"""

from __future__ import annotations

from kvledger.errors import DoesNotFitError, EngineRefusalError, InputError, KvLedgerError

__all__ = ["record_refusal"]

CONTRADICTS = ("The record is of a run that started, so it contradicts this start-up rule: check the GPU and engine "
               "version the record names (or pass --gpu and --engine-version for the ones that ran)")
"""Said after an ``EngineRefusalError`` about the record's GPU."""


def record_refusal(err: KvLedgerError, source: str, model: str | None, gpu: str | None, model_note: str | None,
                   gpu_note: str | None) -> InputError | None:
    """The error to raise in place of ``err`` (raised replaying ``source`` with the record's ``model`` and ``gpu``,
    ``model_note`` / ``gpu_note`` saying where each came from: None where a flag named it); None where ``err`` stands
    as it is (another flag's error)."""
    why = str(err).rstrip(".")
    refused = isinstance(err, EngineRefusalError)
    about_gpu = _about_gpu(err, gpu)  # a start-up refusal on the GPU, given or the record's: not the model's fault
    if model_note is not None and model and model in why and not (refused and about_gpu):
        hint = "" if "divisible" in why or refused else " Or pass --model with a bundled name or a config.json."
        return InputError(f"{source}: {model_note}, but {why}.{hint}")
    if gpu_note is None or not about_gpu:
        return None
    more = f" {CONTRADICTS}." if refused else ""
    return InputError(f"{source}: {gpu_note.split('; --gpu ', 1)[0]}, but {why}.{more}")  # no alias


def _about_gpu(err: KvLedgerError, gpu: str | None) -> bool:
    """Whether a refusal is about the GPU ``gpu``: the memory plan does not fit it (``DoesNotFitError``), or the error
    names it (as given or its catalog name). Only then does it say where the record's GPU came from (a fresh-user trial
    got "GPU … from manifests.yaml, but --engine-version 'banana' is not a version")."""
    from kvledger.catalog.gpus import get_gpu

    if isinstance(err, DoesNotFitError):
        return True
    try:
        names = {str(gpu), get_gpu(gpu).name} if gpu else set()
    except KvLedgerError:
        names = {str(gpu)}
    return any(n and n in str(err) for n in names)
