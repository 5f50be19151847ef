"""Analyses built on the ledgers, one room each.

* ``serving/``: SLO capacity, simulations as ledger inputs, the cost run, the decision data (and the wiring from
  the names a user types to a simulation).
* ``doctor/``: ``kvledger doctor`` and start-ups replayed through the memory plan.
* ``judgments/``: FP8 KV cache, speculative decoding, KV eviction, prefill/decode disaggregation.
* ``search/``: the configuration search.
"""
