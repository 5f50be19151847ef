"""``search --gpu-usd-per-hour``: the user's GPU prices against the candidates searched.

One number prices every candidate's GPU. A list (``H100=2.49,A100-80GB=1.29``, read by
``kvledger.catalog.given_prices``) prices the GPUs it names; a searched GPU it leaves out keeps the price table's row
(the pricing note says which), and a GPU file it leaves out has none, so the search is refused naming that file. A
listed GPU that no candidate runs on is refused too (likely a typo, or a GPU missing from ``--gpus``), with the GPUs
searched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvledger.catalog.given_prices import FLAG, describe, given_usd
from kvledger.errors import InputError

__all__ = ["check_given_prices", "price_notes"]


def check_given_prices(spec: Any, cands: list[Any]) -> None:
    """Refuse a search whose GPU file has no price given, or whose price list names a GPU no candidate uses.

    Raises:
        InputError: the GPU file without a price; the listed GPUs not searched, with the GPUs searched.
    """
    given = spec.gpu_usd_per_hour
    searched = list(dict.fromkeys(c.gpu_id for c in cands))
    files = [g for g in searched if g.endswith((".json", ".toml")) and given_usd(given, g) is None]
    if files:
        raise InputError(f"GPU file {files[0]} has no catalog price (gpu_prices.csv rows are for catalog GPUs): give "
                         f"{FLAG}, your USD per GPU-hour, to rank it"
                         + (f" ({files[0]}=PRICE in the list)" if isinstance(given, Mapping) else ""))
    unused = [g for g in given if g not in searched] if isinstance(given, Mapping) else []
    if unused:
        raise InputError(f"{FLAG} prices {', '.join(unused)}, which no candidate of this search runs on (a typo, or "
                         f"a GPU to add to --gpus?); the GPUs searched: {', '.join(searched)}")


def price_notes(spec: Any, entries: list[dict[str, Any]]) -> list[str]:
    """The pricing note: the price given for every candidate, the listed prices and the GPUs the table prices, or
    the table's rule (none when ``--gpu-provider`` names the provider: each row states it)."""
    given = spec.gpu_usd_per_hour
    if given is not None and not isinstance(given, Mapping):
        return [f"GPU price: ${given:g}/GPU-h for every candidate, given ({FLAG})"]
    table = ("the cheapest on-demand row of each GPU in gpu_prices.csv (any provider); --gpu-provider fixes one"
             if spec.gpu_provider is None else f"{spec.gpu_provider}'s rows in gpu_prices.csv")
    if given is None:
        return [f"GPU prices: {table}"] if spec.gpu_provider is None else []
    priced = (e["gpu_id"] for e in entries if e.get("status") not in ("rejected", "error"))  # not: no price row
    others = [g for g in dict.fromkeys(priced) if g not in given]
    return [f"GPU prices: given ({FLAG}) for {describe(given)}"
            + (f"; {', '.join(others)} from the price table: {table}" if others else "")]
