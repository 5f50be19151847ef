"""The data-parallel flags of the simulator-based commands (simulate, goodput, cost, search, report): taken, so that
the engines' spellings get a clear refusal rather than "No such option"; ``kvledger plan`` models them
(accounting/dp_attention.py), the simulator does not yet."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.cli.flag_groups import flag
from kvledger.errors import InputError

__all__ = ["DataParallelFlags", "DP_REFUSAL"]

DP_REFUSAL = (
    "{flags}: `kvledger plan` models data-parallel attention's memory (vLLM --data-parallel-size with "
    "--enable-expert-parallel, SGLang --enable-dp-attention --dp-size: the weights per GPU, each DP rank's KV pool, "
    "requests per rank and in all), but the simulator steps one TP group per replica and does not yet model DP ranks "
    "stepping together (the router's choice of rank, the MoE all-to-all, idle ranks padding each step), so this "
    "command cannot take them; plan the memory with `kvledger plan ... {flags}`, and simulate without them (--tp for "
    "one replica, --replicas for independent ones)")
"""The refusal, formatted with the flags given."""


@dataclass(frozen=True, slots=True)
class DataParallelFlags:
    """vLLM's --data-parallel-size and SGLang's --dp-size / --enable-dp-attention, refused (plan only)."""

    data_parallel_size: int | None = flag("--data-parallel-size", "--dp-size", "-dp", help=(
        "Not simulated: `kvledger plan` models data parallelism's memory; refused here."))
    enable_dp_attention: bool = flag("--enable-dp-attention", default=False, help=(
        "SGLang's DP attention: not simulated (`kvledger plan` models its memory); refused here."))

    def __post_init__(self) -> None:
        given = ([f"--data-parallel-size {self.data_parallel_size}"] if self.data_parallel_size not in (None, 1)
                 else []) + (["--enable-dp-attention"] if self.enable_dp_attention else [])
        if given:
            raise InputError(DP_REFUSAL.format(flags=" ".join(given)))
