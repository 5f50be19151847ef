"""search prices what its bill rents, as cost does: without a volume one replica's whole instance (its idle GPUs
carried), a disaggregated unit's and an offload tier variant's packing (a mix at its bill ÷ the GPUs billed), so that
USD per 1k requests × the volume's requests is the bill; a mix's price names every row it rents."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

LLAMA = ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1", "--slo", "ttft=500ms,tpot=50ms",
         "--num-requests", "200"]
GCP_8X = 87.83248 / 8  # GCP a3-highgpu-8g, the only GCP H100 row: $87.83248 per 8-GPU instance-hour


def _feasible(*args: str) -> dict[str, dict]:
    res = CliRunner().invoke(app, [*LLAMA, *args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return {c["id"]: c for c in json.loads(res.stdout)["candidates"] if c["status"] == "feasible"}


def _good_requests(c: dict) -> float:
    """The volume's good requests a month: the offered rate × the share within the SLO in the run at the load each
    replica carries (``at_volume_load``, as cost --simulate counts them), else at the rate sized on (a disaggregated
    unit: no run at the load)."""
    cap, s = c["capacity"], c["sizing"]
    share = cap["at_volume_load"]["attainment"] if cap["at_volume_load"] else (cap["attainment_at_sized_rate"]
                                                                                 or cap["attainment"])
    return s["rate_req_per_s"] * share * 3600 * 730


def test_without_a_volume_search_prices_one_replicas_whole_instance():
    # --utilization 0.8, one TP-1 replica on GCP's 8-GPU instance: 8 GPUs billed for 1 used. At capacity (its own GPU
    # alone) a request costs $10.979/GPU-h × 1000 ÷ (3600 × the sustained good req/s); at 80% on the whole instance,
    # × 8 GPUs billed ÷ 0.8 (was × 1 ÷ 0.8: the 7 idle GPUs left out, as cost carries them)
    c = _feasible("--gpu-provider", "GCP", "--utilization", "0.8")["nvidia_h100_sxm:tp1:kv-auto"]
    cost, cap = c["cost"], c["capacity"]
    assert cost["usd_per_1k_requests_at_capacity"] == pytest.approx(
        GCP_8X * 1000 / (3600 * cap["goodput_req_per_s"]), rel=1e-9)
    assert cost["usd_per_1k_requests"] == pytest.approx(cost["usd_per_1k_requests_at_capacity"] * 8 / 0.8, rel=1e-9)
    # per token likewise: the output side at 8 GPUs' price (the rental + 7 idle)
    per_gpu = _feasible("--gpu-usd-per-hour", str(GCP_8X), "--utilization", "0.8")["nvidia_h100_sxm:tp1:kv-auto"]
    assert cost["usd_per_mtok_output"] == pytest.approx(8 * per_gpu["cost"]["usd_per_mtok_output"], rel=1e-9)
    assert cost["usd_per_mtok_input"] == pytest.approx(8 * per_gpu["cost"]["usd_per_mtok_input"], rel=1e-9)


def test_a_disaggregated_unit_on_a_mix_is_priced_at_its_bill():
    # 200 req/s on Lambda: 10 units of 1 prefill + 1 decode engine (TP 1); each width packs 10 GPUs on 1 gpu_8x
    # ($3.99/GPU-h) + 2 gpu_1x ($4.29): 2 × (8 × $3.99 + 2 × $4.29) = $81.00/h, $59,130/month, 20 GPUs, none idle;
    # USD per 1k requests = that bill ÷ the good requests (was the cheapest row's $3.99 alone: 0.12247 vs 0.12431)
    found = _feasible("--gpu-provider", "Lambda", "--disagg", "--disagg-splits", "1:1", "--rate", "200")
    c = found["nvidia_h100_sxm:p1xtp1+d1xtp1:kv-auto"]
    s = c["sizing"]
    assert (s["replicas"], s["idle_gpus"]) == (10, 0)
    assert s["rental_usd_per_month"] == pytest.approx(2 * (8 * 3.99 + 2 * 4.29) * 730)
    assert c["cost"]["usd_per_1k_requests"] * _good_requests(c) / 1000 == pytest.approx(
        s["rental_usd_per_month"], rel=1e-9)
    # its price is the mix: $81.00/h ÷ 20 GPUs = $4.05 per billed GPU-hour, both rows named
    assert c["price"]["usd_per_gpu_hour"] == pytest.approx(81.0 / 20)
    assert [(r["key"], r["instances"]) for r in c["price"]["rows"]] == [
        ("Lambda:gpu_8x_h100_sxm5", 2), ("Lambda:gpu_1x_h100_sxm5", 4)]


def test_an_offload_variant_is_priced_at_its_bill_idle_gpus_included():
    # 20 req/s on GCP at 14.5 req/s per replica: ⌈20 ÷ (14.5 × 0.8)⌉ = 2 TP-1 replicas on one a3-highgpu-8g (6 idle),
    # $64,117.71/month + 2 × the host tier's month; the variant's USD per 1k requests × its good requests = that bill
    # (was 0.277 against its bill's 1.085)
    found = _feasible("--gpu-provider", "GCP", "--offload", "none,cpu:64GiB", "--rate", "20")
    v = found["nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB"]
    s, tier = v["sizing"], v["offload"]["tier_usd_per_month_per_unit"]
    assert (s["replicas"], s["idle_gpus"], s["instances"]) == (2, 6, 1)
    assert s["rental_usd_per_month"] == pytest.approx(8 * GCP_8X * 730 + 2 * tier, abs=0.005)  # JSON: to the cent
    assert v["cost"]["usd_per_1k_requests"] * _good_requests(v) / 1000 == pytest.approx(
        s["rental_usd_per_month"], abs=0.005)
    # its per-token ledgers carry the idle GPUs as the colocated candidates' do
    assert any(i["name"].startswith("idle GPUs of the rented instance (6 of 8)")
               for i in v["cost"]["ledgers"]["output"]["items"])


def test_the_winners_price_names_the_mix():
    # 110 req/s at 14.5 req/s per replica: ⌈110 ÷ (14.5 × 0.8)⌉ = 10 TP-1 replicas on Lambda: 1 gpu_8x + 2 gpu_1x,
    # $40.50/h for 10 GPUs = $4.05 per billed GPU-hour (was "$3.99 per GPU-hour", the first row's alone)
    res = CliRunner().invoke(app, [*LLAMA, "--gpu-provider", "Lambda", "--rate", "110"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert ("winner's price: $4.05 per GPU-hour billed, a mix: 1 × Lambda:gpu_8x_h100_sxm5 at $3.99/GPU-h + 2 × "
            "Lambda:gpu_1x_h100_sxm5 at $4.29/GPU-h, Lambda gpu_8x_h100_sxm5 + gpu_1x_h100_sxm5") in text
