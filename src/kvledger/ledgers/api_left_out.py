"""Why the API mix (``--batch-share``, ``--cache-hit-rate``) leaves API rows out, and the refusal when it leaves out
every row there was to compare with: each row with its reason and the flag behind it, and what to do.

A row without a batch API (a blank batch discount) cannot price a batch share, and one without a listed cached-input
price cannot price cache reads (blank means not found, not "no discount"): no price is made up for either, so such a
row is priced only with that flag at 0.
"""

from __future__ import annotations

from kvledger.catalog.prices import ApiPrice
from kvledger.errors import InputError

__all__ = ["blocking_flags", "no_row_left"]


def blocking_flags(mix: object, price: ApiPrice) -> list[tuple[str, str]]:
    """(flag, why) for each part of ``mix`` (an ``api_cost.ApiMix``) that ``price`` cannot price: a batch share on a
    row with no batch API, a cache-hit rate on a row with no cached-input price."""
    out = []
    if getattr(mix, "batch_share", 0) > 0 and price.batch_discount is None:
        out.append(("--batch-share", "no batch API"))
    if getattr(mix, "cache_hit_rate", 0) > 0 and price.cached_input_usd_per_mtok is None:
        out.append(("--cache-hit-rate", "no cached-input price listed"))
    return out


def no_row_left(mix: object, rows: list[ApiPrice]) -> InputError:
    """The refusal when ``mix`` leaves out every one of ``rows``: each row, its reasons and flags (with their values),
    and what to do: drop a flag (the rows it alone left out are then priced), or name a row of another model."""
    flags = {"--batch-share": getattr(mix, "batch_share", 0), "--cache-hit-rate": getattr(mix, "cache_hit_rate", 0)}
    why = {r.key: blocking_flags(mix, r) for r in rows}
    each = "; ".join(f"{k} ({', '.join(f'{w}: {f} {flags[f]:g}' for f, w in ws) or 'not priceable'})"
                     for k, ws in why.items())
    fixes = []
    for flag in flags:
        alone = [k for k, ws in why.items() if [f for f, _ in ws] == [flag]]
        if alone:
            fixes.append(f"drop {flag} (set it to 0) to compare with {', '.join(alone)}")
    both = [k for k, ws in why.items() if len(ws) > 1]
    if both and not fixes:
        fixes.append(f"drop both {' and '.join(flags)} to compare with {', '.join(both)}")
    return InputError(f"no API row to compare with: the API mix left out every catalog row serving this model — {each}"
                      f". No price is assumed where the catalog lists none: {'; or '.join(fixes) or 'change the mix'}"
                      "; or name a row of another model with --api PROVIDER:MODEL (kvledger prices --kind api lists "
                      "them)")
