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


def test_tier_variants_are_simulated_priced_ranked_and_compared():
    # Llama-3.1-8B on H100 at TP 1 and 2, 100 azure-conv requests per probe, 40 req/s to serve; cpu:64GiB at
    # $2/GiB-month.
    from kvledger.analyses.search.rank import build_result

    spec = SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=200ms,tpot=30ms", num_requests=100,
                      rate_req_per_s=40.0)
    res = run_search(spec, Axes(gpus=("H100",), tps=(1, 2)))
    variants = offload_pass(spec, res.entries, parse_offload("none,cpu:64GiB"), {"host": 2.0, "nvme": None})
    by = {e["id"]: e for e in res.entries}
    assert [v["id"] for v in variants] == ["nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB",
                                           "nvidia_h100_sxm:tp2:kv-auto:offload-cpu-64GiB"]
    usd_h = price_row("nvidia_h100_sxm", None).usd_per_gpu_hour
    for v, gpus in zip(variants, (1, 2)):
        off = v["offload"]
        assert v["status"] == "feasible" and off["tier"]["tier"] == "host_dram" and v["tp"] == gpus
        # cpu:64GiB is per replica (vLLM's --kv-offloading-size, summed over the TP ranks): 64 GiB ÷ GPUs each, so
        # the tier per unit and month is (64 ÷ GPUs) GiB × GPUs × $2 = $128 at TP 1 and TP 2
        assert off["size_gib_per_replica"] == 64.0 and off["size_gib_per_gpu"] == 64.0 / gpus
        assert off["sizes"] == (f"cpu:64GiB = 64 GiB host memory per replica, {64 // gpus} GiB per GPU at {gpus} "
                                f"GPU{'s' if gpus > 1 else ''} per replica")
        assert off["tier_usd_per_month_per_unit"] == pytest.approx(128.0)
        assert off["tier_price"]["source"] == "user input (--host-memory-usd-per-gib-month)"
        # vLLM's --kv-offloading-size 64, the ranks' sum: 64 GiB ÷ TP per GPU, 64 GiB over the ranks
        assert off["tier"]["capacity_bytes"] == pytest.approx(64 * 2**30 / gpus, rel=0.01)
        assert off["tier"]["total_capacity_bytes"] == pytest.approx(64 * 2**30, rel=0.01)
        assert off["tier"]["num_ranks"] == gpus
        assert "--kv-offloading-size 64 --kv-offloading-backend native" in v["launch"]["vllm"]
        # on this trace the tier holds at least the base's own boundary (its search starts there)
        cap = v["capacity"]
        assert cap["slo_capacity_req_per_s"] >= off["base_slo_capacity_req_per_s"]
        assert cap["operating_points"] and cap["operating_points"][-1]["rate_req_per_s"] == cap[
            "slo_capacity_req_per_s"]
        # replicas = ⌈40 req/s offered ÷ (SLO capacity × 0.8)⌉; bill = replicas × (GPUs × $/GPU-h × 730 + tier)
        s = v["sizing"]
        assert s["replicas"] == math.ceil(40.0 / (cap["slo_capacity_req_per_s"] * 0.8) - 1e-12)
        assert s["rental_usd_per_month"] == pytest.approx(s["replicas"] * (gpus * usd_h * 730 + 128.0))
        # USD per 1k requests at capacity: (GPUs × $/GPU-h + tier ÷ 730 h) × 1000 ÷ (3600 × good req/s sustained,
        # the capacity × its run's attainment, as the variant without a tier is priced: ledgers/sustained_rate.py)
        assert cap["goodput_req_per_s"] == pytest.approx(cap["slo_capacity_req_per_s"] * cap["attainment"])
        assert v["cost"]["usd_per_1k_requests_at_capacity"] == pytest.approx(
            (gpus * usd_h + 128.0 / 730) * 1000 / (3600 * cap["goodput_req_per_s"]))
        # the output ledger carries the tier: 64 ÷ GPUs GiB per GPU × (the rental's GPU-hours) ÷ 730 GiB-months at $2
        items = v["cost"]["ledgers"]["output"]["items"]
        gpu_h, host = items[0], items[1]
        assert host["name"] == "host memory for the KV tier" and host["unit_price_usd"] == 2.0
        assert host["quantity"] == pytest.approx(64.0 / gpus * gpu_h["quantity"] / 730.0)
        # compared with the same setup without a tier and every larger TP
        rivals = [x["id"] for x in off["vs_more_gpus"]]
        assert rivals == (["nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"] if gpus == 1
                          else ["nvidia_h100_sxm:tp2:kv-auto"])
        best = min(by[r]["sizing"]["rental_usd_per_month"] for r in rivals)
        assert off["cheaper_than_without"] == (s["rental_usd_per_month"] < best)
        assert ("does not beat" in off["verdict"]) == (not off["cheaper_than_without"])
    # first-class: ranked with the rest by the monthly bill (ties: USD per 1k requests at capacity)
    ranked = build_result(spec, res.entries + variants)
    assert len(ranked.ranking) == 4 and set(ranked.ranking) == set(by) | {v["id"] for v in variants}
    bills = [(ranked.entry(c)["sizing"]["rental_usd_per_month"],
              ranked.entry(c)["cost"]["usd_per_1k_requests_at_capacity"]) for c in ranked.ranking]
    assert bills == sorted(bills)
    assert {p["id"] for p in ranked.cost_frontier} <= set(ranked.ranking)


def _entry(cid, tp, status="feasible", sizing=None, **extra):
    return {"id": cid, "tp": tp, "num_gpus_per_unit": tp, "status": status, "gpu_id": "nvidia_h100_sxm",
            "kv_cache_dtype": "auto", "max_num_seqs": None, "max_num_batched_tokens": None,
            "enable_prefix_caching": None, "sizing": sizing, **extra}


def test_a_tier_beats_more_gpus_when_it_saves_a_replica():
    from kvledger.analyses.search.evaluate import size_for_load
    from kvledger.analyses.search.tier_entries import compare

    # 8 req/s at most 80 % per replica, H100 at $2.69/GPU-h × 730 h = $1,963.70 per GPU-month:
    # TP 1 without a tier, 2.0 req/s SLO capacity: ⌈8 ÷ 1.6⌉ = 5 replicas = 5 GPUs, $9,818.50
    # TP 2 without a tier, 3.5 req/s SLO capacity: ⌈8 ÷ 2.8⌉ = 3 replicas = 6 GPUs, $11,782.20
    # TP 1 with cpu:256GiB, 2.6 req/s SLO capacity: ⌈8 ÷ 2.08⌉ = 4 replicas = 4 GPUs
    gpu_month = 2.69 * 730
    assert [size_for_load(8.0, g, 0.8)[0] for g in (2.0, 3.5, 2.6)] == [5, 3, 4]
    base = _entry("h100:tp1", 1, sizing={"replicas": 5, "num_gpus": 5, "rental_usd_per_month": 5 * gpu_month})
    tp2 = _entry("h100:tp2", 2, sizing={"replicas": 3, "num_gpus": 6, "rental_usd_per_month": 3 * 2 * gpu_month})
    for tier_month, beats in ((0.0, True), (256 * 3.25, False)):
        # host memory already in the instance ($0): 4 × $1,963.70 = $7,854.80 < $9,818.50, with 4 GPUs < 5 → beats;
        # at $3.25/GiB-month (the 2018 GCP row, tier_prices.csv's default until 2026-12-06):
        # 4 × ($1,963.70 + $832) = $11,182.80 > $9,818.50 → does not beat
        v = _entry("h100:tp1:offload-cpu-256GiB", 1, offload={"label": "cpu:256GiB"},
                   sizing={"replicas": 4, "num_gpus": 4, "rental_usd_per_month": 4 * (gpu_month + tier_month)})
        compare(v, base, [base, tp2])
        off = v["offload"]
        assert [x["id"] for x in off["vs_more_gpus"]] == ["h100:tp1", "h100:tp2"]
        assert off["beats_more_gpus"] is beats and off["cheaper_than_without"] is beats
        assert off["verdict"].endswith("the tier beats more GPUs") is beats
        assert "h100:tp1, no tier, replicas for the load: 5 GPUs, $9,818" in off["verdict"]
    # a base that met the SLO at no rate: only larger TPs are rivals; none feasible → "meets the SLO where … not"
    lost = _entry("h100:tp1", 1, status="rejected", reason="SLO not met at any rate")
    v = _entry("h100:tp1:offload-cpu-256GiB", 1, sizing={"replicas": 4, "num_gpus": 4, "rental_usd_per_month": 1.0},
               offload={"label": "cpu:256GiB", "base_status": "rejected: SLO not met at any rate"})
    compare(v, lost, [])
    assert v["offload"]["vs_more_gpus"] == [] and "does not" in v["offload"]["verdict"]
