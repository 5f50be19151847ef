"""How a step cost states its TP all-reduces: nothing at TP 1, NCCL alone where vLLM's custom kernel is off, the PCIe
share of the link and where it comes from (text and --json), and a GPU profile's link share read or refused."""

from __future__ import annotations

import json

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.errors import FormatError


def _setup(gpu: str, tp: int, **kw):
    return prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu=gpu, tp=tp, num_requests=5, **kw))


def test_tp1_states_no_all_reduce_and_pcie_states_its_share_and_range():
    assert "TP all-reduces" not in _setup("L40S", 1).cost_info["source"]
    assert "allreduce_link_share" not in _setup("L40S", 1).cost_info
    # L40S TP 2: peer access (gpu_cuda.csv), so vLLM's custom all-reduce takes calls under 8 MiB; the link is PCIe Gen4
    # x16, 64 GB/s bidirectional: 32 GB/s a direction, priced at 0.35 of it (tp_comm.PCIE_ALLREDUCE_SHARE)
    l40s = _setup("L40S", 2)
    src = l40s.cost_info["source"]
    assert "vLLM's custom all-reduce below 8 MiB a call, NCCL above" in src
    assert "over PCIe at 35% of the host link's 32 GB/s a direction (range 20%–65%" in src
    assert (l40s.cost_info["allreduce_link_share"], l40s.cost_info["allreduce_link_share_range"]) == (0.35, [0.2, 0.65])
    assert l40s.cost.link_bytes_per_s == pytest.approx(32e9 * 0.35)
    # the RTX PRO 6000 has no peer access by default: every call NCCL's, and the text says so
    rtx = _setup("RTX PRO 6000", 2).cost_info["source"]
    assert "every call NCCL's: vLLM's custom all-reduce is off for this GPU and TP" in rtx
    # SGLang runs its own custom all-reduce (on by default; at TP 2 with peer access and no NVLink, the legacy kernel:
    # _MAX_CAR_SIZE 8 MiB a call, sglang_rules.sglang_custom_ar_max_bytes)
    sg = _setup("L40S", 2, policy="sglang").cost_info["source"]
    assert "+ TP all-reduces (SGLang's custom all-reduce below 8 MiB a call, NCCL above" in sg
    assert "vLLM's custom" not in sg
    # an NVLink GPU: the catalog link, no share printed or stored
    h100 = _setup("H100", 2)
    assert "over PCIe" not in h100.cost_info["source"] and "allreduce_link_share" not in h100.cost_info


def test_a_profiles_link_share_is_read_from_version_4_and_refused_out_of_range_or_in_an_older_file(tmp_path):
    gpu = _setup("RTX PRO 6000", 1).gpu_name
    base = {"kind": "kvledger-gpu-profile", "gpu": gpu, "flops_fraction": 0.7, "bandwidth_fraction": 0.7}
    ok, wide, old = (tmp_path / f"{n}.json" for n in ("ok", "wide", "old"))
    ok.write_text(json.dumps({**base, "version": 4, "allreduce_link_share": 0.5}))
    wide.write_text(json.dumps({**base, "version": 4, "allreduce_link_share": 2.0}))
    old.write_text(json.dumps({**base, "version": 3, "allreduce_link_share": 0.5}))
    s = _setup("RTX PRO 6000", 2, gpu_profile=str(ok))
    # 128 GB/s bidirectional ÷ 2 × 0.5 = 32 GB/s a direction
    assert s.cost.link_bytes_per_s == pytest.approx(32e9) and s.cost_info["allreduce_link_share"] == 0.5
    with pytest.raises(FormatError, match=r"allreduce_link_share 2: each must be in \(0, 1\]"):
        _setup("RTX PRO 6000", 2, gpu_profile=str(wide))
    with pytest.raises(FormatError, match="allreduce_link_share in a version < 4 file"):
        _setup("RTX PRO 6000", 2, gpu_profile=str(old))


def test_a_given_link_share_prices_the_all_reduces_wins_over_a_profiles_and_is_not_refitted(tmp_path):
    from kvledger.calibration.link_fit import link_applies
    from kvledger.errors import InputError

    # L40S TP 2 with --allreduce-link-share 0.6 (a host with peer access behind a PCIe switch): 32 GB/s × 0.6
    s = _setup("L40S", 2, allreduce_link_share=0.6)
    assert s.cost.link_bytes_per_s == pytest.approx(19.2e9)
    assert s.cost_info["allreduce_link_share_source"] == "given by --allreduce-link-share"
    assert "over PCIe at 60% of the host link's 32 GB/s a direction (given by --allreduce-link-share;" in \
        s.cost_info["source"]
    # over a profile's fitted 0.5: the given 0.6 (64 GB/s a direction on the RTX PRO 6000 → 38.4 GB/s)
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 4, "gpu": _setup("RTX PRO 6000", 1).gpu_name,
                                "flops_fraction": 0.7, "bandwidth_fraction": 0.7, "allreduce_link_share": 0.5}))
    assert _setup("RTX PRO 6000", 2, gpu_profile=str(prof), allreduce_link_share=0.6).cost.link_bytes_per_s == \
        pytest.approx(38.4e9)
    # a calibration given the share holds it fixed: nothing for link_fit to fit
    assert not link_applies([(None, s)]) and link_applies([(None, _setup("L40S", 2))])
    # the Python API refuses it in the CLI's words (kvledger.ranges), as search and plan do
    with pytest.raises(InputError, match=r"^--allreduce-link-share 0 is out of range; allowed: \(0, 1\] \(fraction\)$"):
        _setup("L40S", 2, allreduce_link_share=0.0)
