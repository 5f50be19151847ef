"""A long-context trial's small findings: a tier size's error says the range the check holds (above 0: -5 and 0 read
alike), and simulate's --max-model-len help says the session workloads' 32K default beside the config's."""

from __future__ import annotations

import pytest
from cli_run import MODEL
from cli_run import refused as _refused
from cli_run import run_cli as _run

from kvledger.analyses.judgments.offload import SESSION_MAX_MODEL_LEN_TOKENS


@pytest.mark.parametrize("flag", ["--kv-offloading-size", "--kv-tier-nvme", "--kv-tier-remote"])
@pytest.mark.parametrize("size", ["-5", "0", "0GiB"])
def test_a_tier_size_at_or_below_zero_is_refused_with_the_ranges_words(flag, size):
    extra = ["--kv-offloading-backend", "lmcache", "--kv-offloading-size", "64"] if flag != "--kv-offloading-size" \
        else []
    msg = _refused("plan", MODEL, "--gpu", "H100", *extra, flag, size)
    assert f"{flag} {size} is out of range; allowed: (0, 1,048,576) GiB" in msg
    assert "non-negative" not in msg


def test_simulate_help_says_the_session_default_beside_the_configs():
    res = _run("simulate", "--help", columns=80)
    lines = res.output.splitlines()
    assert max(len(x) for x in lines) <= 80
    i = next(n for n, x in enumerate(lines) if x.strip().startswith("--max-model-len"))
    text = " ".join(x.strip() for x in lines[i:i + 5])
    # sessions: judgments.offload.session_context_cap, 32,768 tokens = 32K unless the config's context is smaller
    assert SESSION_MAX_MODEL_LEN_TOKENS == 32 * 1024
    assert "default: from the config, but 32K with --workload (the config's where smaller)." in text
