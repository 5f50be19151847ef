"""The tier flags the report's command lines carry (``report_tiers.tier_flags_text``) are the ones the user gave, as the
commands read them back: a size typed 1048575 is not printed 1.04858e+06 (a different size), and ``plan``'s line
leaves out the simulator-only flags it does not take."""

from __future__ import annotations

import dataclasses

from kvledger.analyses.serving.report_tiers import tier_flags_text
from kvledger.cli.tier_flags import TierFlags
from kvledger.cli.tier_opts import tier_settings


def test_the_flags_read_back_to_the_same_settings():
    given = TierFlags(kv_offloading_size="1048575", kv_offloading_backend="lmcache", kv_tier_nvme="0.5",
                      nvme_read_bandwidth=3.5, store_threshold=2, eviction_policy="arc")
    t = tier_settings(given)
    text = tier_flags_text(t)
    assert text == (" --kv-offloading-size 1048575 --kv-offloading-backend lmcache --kv-tier-nvme 0.5 "
                    "--nvme-read-bandwidth 3.5 --store-threshold 2 --eviction-policy arc")
    words = text.split()
    back = {f.name: None for f in dataclasses.fields(TierFlags)}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        name = flag[2:].replace("-", "_")
        back[name] = float(value) if name == "nvme_read_bandwidth" else int(value) if name == "store_threshold" \
            else value
    assert tier_settings(TierFlags(**back)) == t
    # plan sizes the tiers without the simulator's store gate and eviction policy (cli/tier_flags.SIM_ONLY)
    assert tier_flags_text(t, simulator=False) == (" --kv-offloading-size 1048575 --kv-offloading-backend lmcache "
                                                   "--kv-tier-nvme 0.5 --nvme-read-bandwidth 3.5")
    assert tier_flags_text(None) == ""
