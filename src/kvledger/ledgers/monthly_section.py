"""The cost JSON's ``monthly`` section, kept for scripts beside ``decision``: the same facts under shorter names
(``monthly.requests`` is ``decision.requests_per_month``, ``monthly.cheaper`` is ``decision.verdict``). Each key is read
through the decision JSON key it spells again (``Decision.__json__``'s attribute for it), never computed apart, so the
two cannot disagree; ``api`` is the primary API's whole bill, whose total is ``decision.api_usd_per_month``."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

__all__ = ["MONTHLY_FROM_DECISION", "monthly_section"]

MONTHLY_FROM_DECISION: tuple[tuple[str, str | None], ...] = (
    ("requests", "requests_per_month"), ("input_tokens", "input_tokens_per_month"),
    ("output_tokens", "output_tokens_per_month"), ("how", "volume_how"), ("replicas", "replicas"),
    ("realized_utilization", "realized_utilization"), ("max_utilization", "max_utilization"),
    ("self_host", "self_host_rent"), ("buy", "self_host_buy"), ("api", None), ("cheaper", "verdict"))
"""(``monthly``'s key, the ``decision`` key whose value it is; None: the primary API's bill), in the JSON's order."""


def monthly_section(decision: Any) -> dict[str, Any]:
    """``monthly`` for a ``ledgers.decision.Decision``: each key the value of its ``decision`` key."""
    paths = dict(e if isinstance(e, tuple) else (e, e) for e in type(decision).__json__)
    return {key: decision.primary.bill if name is None else attrgetter(paths[name])(decision)
            for key, name in MONTHLY_FROM_DECISION}
