"""The rejection reasons of a search candidate held to the SLO, shared by the passes that set them and the views that
read them (one string each, so a comparison cannot drift from the text it compares against).

- :data:`SLO_NOT_MET`: no probed rate (or no rate a bound allows) has the target share of requests within the SLO;
- :data:`ITL_UNREACHABLE`: no probed rate meets the target and, at the lightest load probed, the requests that missed
  the ITL limit alone are more than 1 − target of them while a step carrying a full prefill chunk of the token budget
  takes longer than the limit (``kvledger.analyses.serving.itl_budget``): a smaller max_num_batched_tokens is the fix;
- :data:`SLO_WITHIN_NOISE`: the target is met even near idle only within one standard error of the run's sampling
  noise (``kvledger.analyses.serving.idle_edge``), so no capacity can be banked on; more requests per probe
  (``--num-requests``) shrink that noise.
"""

from __future__ import annotations

__all__ = ["SLO_NOT_MET", "ITL_UNREACHABLE", "SLO_WITHIN_NOISE", "SLO_REASONS", "NOISE_ADVICE", "NO_PRICE_ROW",
           "NO_INSTANCE", "NO_INSTANCE_DP", "PRICE_REASONS", "CAPACITY_NOT_MEASURED", "ENGINE_REFUSES"]

SLO_NOT_MET = "SLO not met at any rate"
SLO_WITHIN_NOISE = "SLO met only within the run's noise"
ITL_UNREACHABLE = "ITL unreachable"
#: the reasons of a candidate that was held to the SLO (simulated or bounded) and did not qualify
SLO_REASONS = (SLO_NOT_MET, SLO_WITHIN_NOISE, ITL_UNREACHABLE)
#: screening: no rental row for the GPU (of ``--gpu-provider`` when given)
NO_PRICE_ROW = "no price row"
#: screening: rows exist, but none sells an instance wide enough for an engine's TP group (nor prices per GPU)
NO_INSTANCE = "no instance holds the TP group"
#: screening: rows exist, but none sells an instance wide enough for vLLM's DP ranks of TP GPUs each (DP × TP GPUs)
NO_INSTANCE_DP = "no instance holds the DP × TP ranks"
#: the reasons of a candidate not priced (no simulation spent on it)
PRICE_REASONS = (NO_PRICE_ROW, NO_INSTANCE, NO_INSTANCE_DP)
#: the fix of :data:`SLO_WITHIN_NOISE`, in words
NOISE_ADVICE = "run more requests per probe with --num-requests to shrink the noise, lower --target or loosen the SLO"
#: a session workload's boundary probe too short to carry its rate (``session_spec.steady_goodput``): not sized
CAPACITY_NOT_MEASURED = "capacity not measured"
#: screening: the engine release refuses the candidate at start-up on its GPU (a quantization method below its minimum
#: compute capability or one the release lacks, bfloat16 below 8.0, an FP8 KV cache no attention backend there takes:
#: ``errors.EngineRefusalError``); nothing can start, as for memory
ENGINE_REFUSES = "engine refuses to start"
