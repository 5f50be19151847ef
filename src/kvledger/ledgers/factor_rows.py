"""The deciding factors beside the price comparison, in words: utilization against break-even, data sovereignty,
model control and team capability (``cost_summary.build_cost_report``'s ``factors`` rows)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.cost_summary import DecisionFactors

__all__ = ["factor_rows"]


def factor_rows(setup: SelfHostSetup, f: DecisionFactors, u_star: float) -> list[dict[str, str]]:
    """The deciding factors' rows (factor, value, effect): utilization against its break-even ``u_star`` (fraction),
    then data sovereignty, model control and team capability as ``f`` gives them."""
    util = (
        f"{setup.utilization:.0%} of billed hours; break-even at {u_star:.0%}"
        if math.isfinite(u_star)
        else f"{setup.utilization:.0%}; no break-even"
    )
    util_effect = ("above break-even: self-hosting costs less for the same requests" if setup.utilization >= u_star
                   else "below break-even: the API costs less for the same requests")
    sov = {"required": "data must stay in your boundary: the API column applies only to a provider endpoint that meets "
                       "it (regional/residency endpoints cost more than these list prices)",
           "preferred": "a reason to self-host that the price comparison does not capture",
           "not_required": "no constraint: decide on cost and the other factors"}[f.data_sovereignty]
    ctl = {"custom_weights": "you need your own weights (fine-tunes): the API column is valid only if the provider "
                             "hosts custom models at this price",
           "open_weights": "an open-weights model: API hosts of the same model are comparable; check the row is that "
                           "model",
           "any": "no constraint on the model"}[f.model_control]
    team = {"experienced": "an experienced team: the people line is what running it costs",
            "some": "some experience: expect the people line to be higher while learning",
            "none": "no serving experience: budget engineer-months before relying on self-hosting"}[f.team_capability]
    if f.team_capability == "none" and setup.engineer_months_per_month == 0:
        team += " (people cost is 0 here: enter it)"
    return [{"factor": "utilization", "value": util, "effect": util_effect},
            {"factor": "data sovereignty", "value": f.data_sovereignty, "effect": sov},
            {"factor": "model control", "value": f.model_control, "effect": ctl},
            {"factor": "team capability", "value": f.team_capability, "effect": team}]
