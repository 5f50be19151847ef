"""The search's offload axis (``analyses/search/offload_axis.py``): parsing, prices, and a tiny search whose tier
variants are simulated with the host tier, priced with its line item and compared with more GPUs."""

from __future__ import annotations

import math

import pytest

from kvledger.analyses.search import Axes, SearchSpec, run_search
from kvledger.analyses.search.offload_axis import OffloadOption, check_prices, offload_pass, parse_offload
from kvledger.analyses.search.screen import price_row
from kvledger.errors import InputError


def test_parse_offload():
    assert parse_offload(None) == (OffloadOption("none"),)
    # 1 TiB = 2^40 B = 1024 GiB; a bare number is GiB; duplicates kept once
    assert parse_offload("none, cpu:256GiB,disk:1TiB,cpu:256") == (
        OffloadOption("none"), OffloadOption("cpu", 256.0), OffloadOption("disk", 1024.0))
    assert parse_offload("cpu:256GiB")[0].label == "cpu:256GiB"
    for bad in ("cpu", "gpu:1GiB", "cpu:0", "disk:-5"):
        with pytest.raises(InputError):
            parse_offload(bad)


def test_a_tier_price_is_checked_and_defaults_to_the_bundled_row():
    opts = parse_offload("none,cpu:64GiB,disk:1TiB")
    with pytest.raises(InputError, match="--nvme-usd-per-gib-month"):
        check_prices(opts, {"host": 2.0, "nvme": -1.0})
    assert [o.kind for o in check_prices(opts, {"host": 2.0, "nvme": None})] == ["cpu", "disk"]  # tier_prices.csv
    assert [o.kind for o in check_prices(opts, {"host": 2.0, "nvme": 0.1})] == ["cpu", "disk"]
    assert check_prices(parse_offload("none"), {"host": None, "nvme": None}) == []


def test_tier_variants_are_simulated_priced_and_compared():
    # Llama-3.1-8B on H100 at TP 1 and 2, 100 azure-conv requests per probe, 40 req/s to serve; cpu:64GiB at
    # $2/GiB-month.
    spec = SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=200ms,tpot=30ms", num_requests=100,
                      rate_req_per_s=40.0)
    res = run_search(spec, Axes(gpus=("H100",), tps=(1, 2)))
    variants = offload_pass(spec, res.entries, parse_offload("none,cpu:64GiB"), {"host": 2.0, "nvme": None})
    by = {e["id"]: e for e in res.entries}
    assert [v["candidate"] for v in variants] == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"]
    usd_h = price_row("nvidia_h100_sxm", None).usd_per_gpu_hour
    for v, gpus in zip(variants, (1, 2)):
        assert v["status"] == "feasible" and v["tier"]["tier"] == "host_dram"
        # tier per unit and month: 64 GiB × GPUs × $2 → $128 (TP 1), $256 (TP 2)
        assert v["tier_usd_per_month_per_unit"] == pytest.approx(128.0 * gpus)
        # vLLM's --kv-offloading-size = 64 GiB × TP, the plan's host tier holds it all
        assert v["tier"]["capacity_bytes"] == pytest.approx(64 * 2**30 * gpus, rel=0.01)
        # on this trace the tier holds at least the base's own boundary (its search starts there)
        assert v["boundary_rate_req_per_s"] >= v["base_boundary_rate_req_per_s"]
        # replicas = ⌈40 ÷ (goodput × 0.8)⌉; bill = replicas × (GPUs × $/GPU-h × 730 + tier)
        s = v["sizing"]
        assert s["replicas"] == math.ceil(40.0 / (v["goodput_req_per_s"] * 0.8) - 1e-12)
        assert s["monthly_usd"] == pytest.approx(s["replicas"] * (gpus * usd_h * 730 + 128.0 * gpus))
        # the output ledger carries the tier: 64 GiB × (the rental's GPU-hours) ÷ 730 GiB-months at $2
        items = v["cost"]["ledgers"]["output"]["items"]
        gpu_h, host = items[0], items[1]
        assert host["name"] == "host memory for the KV tier" and host["unit_price_usd"] == 2.0
        assert host["quantity"] == pytest.approx(64.0 * gpu_h["quantity"] / 730.0)
        # compared with the same setup without a tier and every larger TP
        rivals = [x["id"] for x in v["vs_more_gpus"]]
        assert rivals == (["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"] if gpus == 1
                          else ["nvidia_h100_sxm:tp2:kv-auto"])
        best = min(by[r]["sizing"]["monthly_usd"] for r in rivals)
        assert v["cheaper_than_without"] == (s["monthly_usd"] < best)
        assert ("does not beat" in v["verdict"]) == (not v["cheaper_than_without"])
