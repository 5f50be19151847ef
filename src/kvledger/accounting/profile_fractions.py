"""The roofline fractions ``kvledger plan`` prices its roofline view and tier break-evens at: the fractions given, the
rest from the GPU profile ``--gpu-profile`` selects (the GPU's bundled one where none is given and one is bundled),
else 0.7 of peak FLOP/s and the GPU's carried bandwidth share (``carried_kernels.carried_bandwidth``) or 0.8; the
all-reduce link share given, else the profile's fitted one. One rule for ``plan`` and ``report``'s plan section."""

from __future__ import annotations

from typing import Any

__all__ = ["plan_view_fractions"]


def plan_view_fractions(gpu_profile: str | None, gpu: Any, flops: float | None = None, bandwidth: float | None = None,
                        share: float | None = None) -> tuple[float, float, float | None, Any]:
    """(FLOP fraction, bandwidth fraction, all-reduce link share or None, the ``GpuProfile`` read or None) for
    ``gpu`` (a catalog ``Gpu``).

    Raises:
        FormatError / InputError: an unreadable profile file, one fitted on another GPU.
    """
    prof = None
    if flops is None or bandwidth is None:  # as simulate (step_cost_choice.gpu_profile_of): the GPU's bundled profile
        from kvledger.accounting.carried_kernels import carried_bandwidth  # as simulate (plan_pricing.plan_fractions)
        from kvledger.accounting.gpu_profile import resolve_gpu_profile

        prof = resolve_gpu_profile(gpu_profile, gpu.name)
    flops = flops if flops is not None else prof.flops_fraction if prof is not None else 0.7
    if bandwidth is None:
        bandwidth = prof.bandwidth_fraction if prof else carried_bandwidth(gpu) or 0.8
    if share is None and prof is not None:  # given wins over a profile's fitted share (roofline_step_cost's rule)
        share = prof.allreduce_link_share
    return flops, bandwidth, share, prof
