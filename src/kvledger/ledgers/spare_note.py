"""What a one-replica self-hosted bill leaves out, said beside the verdict: the ledger sizes replicas for the load
alone (⌈peak ÷ (capacity × max utilization)⌉), so a volume one replica carries is priced with no spare — a GPU or host
failure, a driver or model upgrade, stops the service. The note prices one more replica on the same rental staircase
(``breakeven.rental_curve``: whole instances, so a second replica on an instance's idle GPUs costs nothing more) and
says whether the verdict survives it; and it names what neither side's bill carries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.ledgers.amounts import usd_text

if TYPE_CHECKING:
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.decision import Decision

__all__ = ["spare_replica_lines"]

_NOT_PRICED = "network egress, storage, evaluation and staging are priced on neither side"


def spare_replica_lines(decision: Decision | None, setup: SelfHostSetup) -> list[str]:
    """One line where the volume's bill is one rented replica: a second for failover adds rental(2) − rental(1) per
    month (``setup``: the rented row the replicas are billed on), with the bill it makes and the verdict against the
    API row compared; none for several replicas, a bought bill, or no volume."""
    from kvledger.ledgers.breakeven import rental_curve

    if decision is None or decision.replicas != 1 or decision.self_host_usd != decision.self_host.total_usd:
        return []
    rental = rental_curve(setup)
    extra = rental(2) - rental(1)
    with_spare = decision.self_host.total_usd + extra
    api = decision.primary.bill.total_usd
    turn = "self-hosting stays cheaper" if with_spare < api else "the API is cheaper"
    if decision.verdict == "API":
        turn = "the API stays cheaper"
    head = ("  not priced: a spare replica — the bill is one replica, so a GPU or host failure or an upgrade stops the "
            "service")
    if extra <= 0:  # the instance billed already holds idle GPUs enough for a second
        return [f"{head}; a second for failover fits the billed instance's idle GPUs at no extra rental; {_NOT_PRICED}"]
    return [f"{head}; a second for failover adds {usd_text(extra)}/month of rental → {usd_text(with_spare)}/month "
            f"self-hosted against {usd_text(api)}: {turn}; {_NOT_PRICED}"]
