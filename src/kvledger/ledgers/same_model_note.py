"""The note a self-host verdict against another model's API row (``--api OpenAI:gpt-4o`` for an open model) needs when
a row serving the self-hosted model itself costs less than self-hosting: that row is the answer the default comparison
(no ``--api``: the rows serving the same model) gives, and a reader weighing "keep our API or self-host the open model"
must see that the third option, the same open model bought as an API, beats both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.ledgers.amounts import usd_text

if TYPE_CHECKING:
    from kvledger.ledgers.decision import Decision

__all__ = ["same_model_cheaper_lines"]


def same_model_cheaper_lines(decision: Decision | None) -> list[str]:
    """One note line when the verdict is self-host, the row compared is another model, and the cheapest catalog row
    serving the self-hosted model bills less for the same volume than self-hosting (``Decision.self_host_usd``: the
    rented bill, or the bought one where it is lower); none otherwise."""
    if decision is None or decision.verdict != "self-host" or decision.primary.same_model:
        return []
    same = [a for a in decision.apis if a.same_model]
    if not same:
        return []
    best = min(same, key=lambda a: a.bill.total_usd)
    sh = decision.self_host_usd
    if best.bill.total_usd >= sh:
        return []
    conf = "" if best.price.confidence == "high" else f", {best.confidence} confidence"
    return [f"  note: the same model bought as an API costs less than self-hosting it: {best.price.key} "
            f"{usd_text(best.bill.total_usd)}/month{conf}, against {usd_text(sh)}/month self-hosted "
            f"({sh / best.bill.total_usd:.1f}× as much) — the answer is the API without --api, which compares the rows "
            "serving this model"]
