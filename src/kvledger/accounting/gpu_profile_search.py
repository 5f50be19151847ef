"""``--gpu-profile`` over a search's several GPUs: which GPU a profile file applies to, and the refusal of a file
fitted on none of them."""

from __future__ import annotations

from kvledger.accounting.gpu_profile import load_gpu_profile, same_gpu
from kvledger.errors import InputError

__all__ = ["choice_for_gpu", "check_profile_gpus"]


def choice_for_gpu(choice: str | None, gpu_name: str) -> str | None:
    """``--gpu-profile`` as it applies to one GPU of a search over several: a file fitted on ``gpu_name`` stays, a
    file fitted on another GPU leaves this one its default (None: its bundled profile, if any); "none" and "auto" stay.

    Raises:
        FormatError: unreadable file.
    """
    if choice is None or choice in ("auto", "none"):
        return choice
    return choice if same_gpu(load_gpu_profile(choice).gpu, gpu_name) else None


def check_profile_gpus(choice: str | None, gpu_names: list[str]) -> None:
    """Refuse ``--gpu-profile FILE`` for a search none of whose GPUs (catalog names) is the one it was fitted on.

    Raises:
        FormatError: unreadable file. InputError: the profile's GPU is not searched.
    """
    if choice is None or choice in ("auto", "none") or not gpu_names:
        return
    prof = load_gpu_profile(choice)
    if not any(same_gpu(prof.gpu, g) for g in gpu_names):
        raise InputError(f"--gpu-profile {choice} was fitted on {prof.gpu}, which this search does not try "
                         f"({', '.join(gpu_names)}): a GPU's efficiency does not carry to another GPU (add --gpu "
                         f"for {prof.gpu}, or drop --gpu-profile)")
