"""The suite runs without the on-disk store of simulations and reports (kvledger.analyses.serving.sim_cache): each test
computes what it checks; the store's own tests turn it on in a temporary folder."""

from __future__ import annotations

import os

os.environ["KVLEDGER_NO_CACHE"] = "1"
