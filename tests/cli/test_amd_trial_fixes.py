"""A fresh-user trial of AMD MI300X/MI325X against NVIDIA H200/B200 (Llama-3.1-405B FP8, DeepSeek-V3): the search's
price flip, the vendor of plan's bigger GPUs, search's other-model API row, the report's break-even marker, the FP8
row note under --quantization fp8, AMD words (rocm-smi, HIP, gfx942), SMs and CUs per GPU, AMD price rows."""

from __future__ import annotations

import json

import pytest
from cli_run import refused, run_cli


def _entry(cid: str, gpu: str, usd: float, per_hour: float, replicas: int = 1, tier: float = 0.0) -> dict:
    return {"id": cid, "gpu_id": gpu, "price": {"usd_per_gpu_hour": per_hour},
            "sizing": {"rental_usd_per_month": usd, "replicas": replicas, "tier_usd_per_month_per_unit": tier}}


def test_the_price_flip_is_the_ratio_of_the_bills_on_either_gpu():
    from kvledger.analyses.search.price_flip import price_flip, price_flip_note

    # the trial's ranking: MI300X $43,625/month at $2.49/GPU-h, B200 $64,240/month at $5.50/GPU-h; both bills are
    # GPUs × $/GPU-h × 730 h, so they tie at 64,240 / 43,625 = 1.4726 × $2.49 = $3.66665/GPU-h on the MI300X, or at
    # 43,625 / 64,240 = 0.6791 × $5.50 = $3.73502/GPU-h on the B200
    p = price_flip([_entry("mi300x", "amd_mi300x", 43_625.0, 2.49), _entry("b200", "nvidia_b200", 64_240.0, 5.50)])
    assert p.against == "b200" and p.against_is_runner_up
    assert p.winner_factor == pytest.approx(1.47256, abs=1e-5)
    assert p.against_factor == pytest.approx(0.67909, abs=1e-5)
    assert p.winner_tie_usd_per_gpu_hour == pytest.approx(3.66665, abs=1e-5)
    assert p.against_tie_usd_per_gpu_hour == pytest.approx(3.73502, abs=1e-5)
    w = {"id": "mi300x", "price": {"confidence": "low", "provider": "RunPod", "instance_type": "pod", "as_of": "2025"}}
    note = price_flip_note(p, w)
    assert "the winner's GPU price 1.47× the one priced ($3.67/GPU-h against $2.49 priced)" in note
    assert "b200's 0.68× its own ($3.74/GPU-h against $5.50 priced)" in note
    assert "the winner's price is a low-confidence row (RunPod pod, as of 2025)" in note
    assert "low-confidence" not in price_flip_note(p, {"id": "mi300x", "price": {"confidence": "user input"}})


def test_the_price_flip_skips_a_runner_up_on_the_same_gpu_and_holds_the_tier_price():
    from kvledger.analyses.search.price_flip import price_flip

    # the runner-up shares the winner's GPU (its price moves both): the flip is read against the B200. The winner's
    # $1,000 holds 2 replicas × $50 of KV tier, so its GPU part is $900: (1,500 − 100) / 900 = 1.5556; the B200's
    # factor (900 + 100) / 1,500 = 0.6667
    ranked = [_entry("a", "amd_mi300x", 1_000.0, 2.0, replicas=2, tier=50.0), _entry("b", "amd_mi300x", 1_200.0, 2.0),
              _entry("c", "nvidia_b200", 1_500.0, 5.0)]
    p = price_flip(ranked)
    assert p.against == "c" and not p.against_is_runner_up
    assert p.winner_factor == pytest.approx(1400 / 900)
    assert p.against_factor == pytest.approx(1000 / 1500)
    assert price_flip(ranked[:2]) is None  # every candidate on the winner's GPU: no price separates them


def test_search_says_the_price_flip_and_that_the_named_api_row_is_another_model():
    r = run_cli("search", "deepseek-ai/DeepSeek-V3", "--gpus", "H200,MI300X", "--tp", "8", "--slo",
                "ttft=2s,tpot=50ms", "--rate", "2", "--num-requests", "100", "--api", "DeepSeek:deepseek-chat",
                "--json")
    d = json.loads(r.stdout)
    flip = d["winner"]["price_flip"]
    w, o = (next(e for e in d["candidates"] if e["id"] == i) for i in (d["ranking"][0], flip["against"]))
    usd = "rental_usd_per_month"
    assert flip["winner_factor"] == pytest.approx(o["sizing"][usd] / w["sizing"][usd])
    assert any(n.startswith("price flip: ") for n in d["notes"])
    assert d["api"]["same_model"] is False
    assert any("is not the same model as deepseek-ai/DeepSeek-V3: compare quality separately" in n
               for n in d["api"]["notes"])


def test_plan_offers_bigger_gpus_of_the_planned_gpus_vendor():
    amd = run_cli("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "MI250X", "--tp", "8").stdout
    assert "--gpu amd-mi300x" in amd and "--gpu amd-mi325x" in amd and "--gpu amd-mi355x" in amd
    assert "--gpu h200" not in amd and "--gpu b200" not in amd
    nv = run_cli("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H100", "--tp", "8").stdout
    assert "--gpu amd-" not in nv and "--gpu h200" in nv


def test_the_utilization_curve_marks_where_its_own_one_replica_curve_meets_the_api():
    from kvledger.analyses.serving.cost_curves import utilization_curve

    # one replica: $10,000 rental + $5,000 people a month, 1,000,000 requests a month at full load, API $0.03 a
    # request: 15,000 / (1e6 × 0.03) = 50%; the ledger's 40% is the volume's 3 replicas sharing the people line
    cost = {"inputs": {"utilization": 0.3}, "decision": None,
            "break_even_utilization": {"unit_rental_usd_per_month": 10_000.0,
                                       "one_unit_rental_usd_per_month": 10_000.0,
                                       "people_usd_per_month": 5_000.0, "requests_per_month_at_full_load": 1e6,
                                       "api_usd_per_request": 0.03, "utilization": 0.4, "reachable": True,
                                       "replicas": 3}}
    c = utilization_curve(cost)
    assert c["break_even_utilization"] == pytest.approx(0.5)
    assert c["ledger_break_even_utilization"] == pytest.approx(0.4) and c["ledger_break_even_replicas"] == 3
    at_half = next(p for p in c["points"] if p["utilization"] == 0.5)
    assert at_half["self_host_usd_per_1k_requests"] == pytest.approx(at_half["api_usd_per_1k_requests"])


def test_report_passes_its_quantization_to_the_fp8_row_note():
    from types import SimpleNamespace

    from kvledger.analyses.serving.decision_inputs import decision_inputs

    people = SimpleNamespace(source="default")
    inputs, _ = decision_inputs("meta-llama/Llama-3.1-8B", None, "nvidia_h100_sxm", None, None, people, 1.0, "fp8")
    assert inputs.quantization == "fp8"


def test_gpus_speaks_rocm_on_amd_rows_and_keeps_the_old_keys():
    rows = {g["gpu_id"]: g for g in json.loads(run_cli("gpus", "--json").stdout)}
    mi, h = rows["amd_mi300x"], rows["nvidia_h100_sxm"]
    assert (mi["smi_tool"], mi["device_runtime"], mi["device_arch"]) == ("rocm-smi", "HIP", "gfx942")
    assert mi["nvidia_smi_mib"] == mi["smi_mib"] == 196_288 and mi["arch"] == ""
    assert (h["smi_tool"], h["device_runtime"], h["device_arch"]) == ("nvidia-smi", "CUDA", "sm90")
    assert rows["amd_mi355x"]["device_arch"] == "gfx950" and rows["amd_mi250x"]["device_arch"] == "gfx90a"
    text = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "MI300X", "--verbose").stdout
    assert "back-of-envelope: rocm-smi 191.69 GiB" in text and "engine: HIP device total 191.98 GiB" in text


def test_the_sampler_buffer_takes_the_gpus_own_sms_or_cus():
    from kvledger.accounting.vllm_profile import sm_count

    assert (sm_count("amd_mi300x"), sm_count("amd_mi325x"), sm_count("amd_mi355x")) == (304, 304, 256)
    assert (sm_count("nvidia_h100_sxm"), sm_count("nvidia_b200"), sm_count("nvidia_a100_80gb_sxm")) == (132, 148, 108)
    # 1,024 dummy requests ≥ 304 CUs: min(304, 1,024) = 304 rows of the 128,256-token vocab × 4 B
    text = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "MI300X", "--verbose").stdout
    assert "Triton top-k/top-p buffer 304 × vocab × 4 B" in text


def test_mi325x_has_a_price_row_and_mi355x_is_refused_with_the_priced_alternative():
    from kvledger.catalog.prices import find_gpu_prices

    row = find_gpu_prices("amd_mi325x")[0]
    assert (row.provider, row.usd_per_gpu_hour, row.confidence) == ("TensorWave", 1.95, "low")
    msg = refused("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "MI355X", "--slo", "ttft=2s,tpot=50ms",
                  "--monthly-tokens", "1e9", "--num-requests", "50")
    assert "the nearest priced GPU of the same vendor: amd_mi325x" in msg
