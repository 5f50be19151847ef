"""Serving capacity and cost: SLO boundary search, simulations as ledger inputs, the decision data."""
