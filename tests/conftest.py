"""Suite-wide settings.

- The suite runs without the on-disk store of simulations and reports (kvledger.analyses.serving.sim_cache): each test
  computes what it checks; the store's own tests turn it on in a temporary folder.
- Property tests (hypothesis) draw the same examples on every run ("derandomize"), so a run on CI checks what a run
  here checked; `HYPOTHESIS_PROFILE=explore pytest ...` draws fresh random examples to hunt for new failures (each one
  found becomes a named regression test).
"""

from __future__ import annotations

import os

from hypothesis import settings

os.environ["KVLEDGER_NO_CACHE"] = "1"

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
