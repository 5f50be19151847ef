"""`kvledger experiment kv-waste`: the contiguous row's token-state share has a closed form the setup prints, so a
reader can see why it is not PagedAttention's 20.4 %."""

from __future__ import annotations

import re

import pytest

from kvledger.analyses.serving.experiments import run_experiment


def test_contiguous_share_matches_its_closed_form_and_says_why_it_is_not_the_papers():
    # --quick: 562 Azure-conversation requests with p + o ≤ 2,048. A slot reserved for 2,048 tokens holds, over its
    # o decode steps, p + o/2 tokens on average; weighted by o: Σ o·(p + o/2) / Σ o = 1,087 tokens = 53.1 % of 2,048.
    # The simulator's contiguous row measures 53.2 %. PagedAttention's 20.4 % is 0.204 × 2,048 = 418 tokens held.
    r = run_experiment("kv-waste", quick=True)
    line = next(x for x in r.setup if x.startswith("contiguous in closed form"))
    m = re.search(r"= ([\d,]+) tokens held of the 2,048 reserved = ([\d.]+)%", line)
    assert m and m.group(1) == "1,087" and m.group(2) == "53.1"
    contiguous = next(x for x in r.rows if x["kv_allocation"] == "contiguous")
    assert contiguous["token_state_share"] == pytest.approx(0.531, abs=0.01)
    assert "the published 20.4 % is 418 of 2,048 tokens held" in line
