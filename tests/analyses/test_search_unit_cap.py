"""--max-gpus-per-replica (search.unit_cap): candidates of more GPUs per replica are pruned before planning, counted."""

from __future__ import annotations

import pytest

from kvledger.analyses.search.runner import plan_candidates
from kvledger.analyses.search.spec import Axes, SearchSpec
from kvledger.analyses.search.unit_cap import DEFAULT_MAX_GPUS_PER_REPLICA, cap_candidates, cap_note
from kvledger.errors import InputError

DSV3 = "deepseek-ai/DeepSeek-V3"


def _trial() -> list:
    # the fresh-user trial: --gpu H200,H100 --tp 1,2,8,16 -dp 1,2,4,8,16 (a per-GPU price: no instance row refuses any)
    spec = SearchSpec(model=DSV3, slo="ttft=2s,tpot=50ms", target=0.99, rate_req_per_s=20.0)
    return plan_candidates(spec, Axes(gpus=("H200", "H100"), tps=(1, 2, 8, 16), data_parallel_sizes=(1, 2, 4, 8, 16)))


def test_the_default_is_two_of_the_largest_instance():
    from kvledger.catalog.prices import gpu_prices

    # gpu_prices.csv sells at most 8 GPUs an instance (the HGX rows); 2 such nodes = 16
    assert max(r.gpus_per_instance for r in gpu_prices()) == 8
    assert DEFAULT_MAX_GPUS_PER_REPLICA == 16


def test_the_trial_grid_prunes_sixteen_by_hand():
    # per GPU: TP × DP GPUs per unit for DP 1, 2, 4, 8, 16 —
    #   TP 1: 1, 2, 4, 8, 16      none over 16; DP 1 one candidate (no EP at TP 1), DP > 1 one each (EP on): 5
    #   TP 2: 2, 4, 8, 16, 32     DP 16 over;  DP 1 twice (EP off and on), DP > 1 once each: 6
    #   TP 8: 8, 16, 32, 64, 128  DP 4, 8, 16 over: 6
    #   TP 16: 16, 32, 64, 128, 256  DP 2, 4, 8, 16 over: 6
    # 23 candidates a GPU, 46 for two; over 16: 1 + 3 + 4 = 8 a GPU (each DP > 1, so one EP setting), 16 for two
    cands = _trial()
    assert len(cands) == 46
    kept, over = cap_candidates(cands, 16)
    assert (len(kept), len(over)) == (30, 16)
    assert max(c.num_gpus for c in over) == 256 and min(c.num_gpus for c in over) == 32
    assert [c.id for c in kept] == [c.id for c in cands if c.num_gpus <= 16]  # candidate order kept
    note = cap_note(over, 16)
    assert note.startswith("--max-gpus-per-replica 16 (the default: 2 nodes of the catalog's largest instance, 8 "
                           "GPUs): 16 candidates of more GPUs per replica pruned before planning, up to 256 GPUs (e.g. "
                           "nvidia_h200_sxm:dp16xtp2:kv-auto:ep)")
    assert note.endswith("give --max-gpus-per-replica 256 to search them")
    # a cap of 256 keeps all 46; a cap of 64: 256 and 128 out (TP 8 × DP 16, TP 16 × DP 8 and 16): 3 a GPU, 6
    assert cap_candidates(cands, 256)[1] == [] and cap_note([], 256) is None
    assert len(cap_candidates(cands, 64)[1]) == 6
    assert cap_candidates(cands, None) == (cands, [])


def test_every_candidate_over_the_cap_is_refused_naming_the_smallest():
    cands = [c for c in _trial() if c.num_gpus >= 32]
    with pytest.raises(InputError, match=r"more than --max-gpus-per-replica 16 GPUs per replica \(the smallest, 32\); "
                                         r"give --max-gpus-per-replica 32 or more"):
        cap_candidates(cands, 16)
