"""cost --replicas N on a provider with one-GPU and eight-GPU rows: the unit's N engine replicas are rented on the
cheapest instances (each engine on one), and the answer counts the sized units as deployment units, a replica being
one engine (kvledger.ledgers.instances.pack, ledgers.amounts.units_text)."""

from __future__ import annotations

from cli_run import cli_json, run_cli

ARGV = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gpu-provider", "Lambda", "--replicas",
        "2", "--num-requests", "100", "--slo", "ttft=1s,tpot=100ms", "--api", "OpenAI:gpt-4.1", "--monthly-tokens",
        "3B"]


def test_two_engine_unit_rents_two_one_gpu_instances_and_says_deployment_unit():
    d = cli_json(*ARGV)
    item = d["monthly"]["self_host"]["items"][0]
    # 2 TP-1 engines on 2 Lambda gpu_1x_h100_sxm5 instances: 2 × $4.29/h × 730 h = $6,263.40 (before: one
    # gpu_8x_h100_sxm5 instance, 8 × $3.99 × 730 = $23,301.60, 6 GPUs idle)
    assert (item["quantity"], item["unit_price_usd"], item["amount_usd"]) == (1460.0, 4.29, 6263.4)
    assert d["decision"]["idle_gpus"] == 0 and d["decision"]["instances"] == 2
    people = d["ledgers"]["self_host_input"]["items"][-1]["note"]
    assert "(1 deployment unit × " in people and "one deployment unit's in a run" in people
    text = " ".join(run_cli(*ARGV).output.split())
    assert ("self-hosted: 2 replicas × 1 GPU (one deployment unit) rented on 2 gpu_1x_h100_sxm5 instances (1 GPU "
            "each, 0 idle)") in text
    assert "sizing: deployment units = ⌈" in text and "one deployment unit's break-even at" in text
    assert "one deployment unit and the people already cost more" in text
    assert "the volume's mean load per deployment unit" in text and "req/s per deployment unit" in text
    assert "1 replica at" not in text and "one replica's break-even" not in text and "sizing: replicas" not in text


def test_no_api_row_names_the_units_engines():
    # Qwen/Qwen3-8B: no API row serves it; one unit of 2 TP-1 engines on 2 Lambda gpu_1x_h100_sxm5 instances:
    # 2 × $4.29/h × 730 h = $6,263.40 + people 0.25 × $20,000 = $5,000 → $11,263.40/month
    d = cli_json("cost", "--simulate", "Qwen/Qwen3-8B", "--gpu", "H100", "--slo", "ttft=1s,tpot=60ms",
                 "--num-requests", "100", "--gpu-provider", "Lambda", "--replicas", "2")
    assert d["headline"][1].startswith(
        "  self-hosted, 2 replicas × 1 GPU (one deployment unit) on 2 gpu_1x_h100_sxm5 instances (1 GPU each, 0 idle) "
        "(Lambda H100 80GB SXM (gpu_1x_h100_sxm5, on_demand), $4.29/GPU-h): $11,263.40/month, people included")


def test_break_even_volume_names_its_figures_per_deployment_unit():
    bv = cli_json(*ARGV)["break_even_volume"]
    # the unit (2 TP-1 engines) sustains 26.25 SLO-capacity req/s (capacity_basis); at max utilization 0.8:
    # 26.25 × 3600 × 730 × 0.8 = 55,188,000 requests/month per deployment unit (one engine replica takes half)
    assert bv["capacity_requests_per_month_per_unit"] == 55_188_000.0 and bv["engine_replicas_per_unit"] == 2
    assert bv["tier_usd_per_month_per_unit"] == 0  # no --kv-tier: no tier line
    # before: the same figures under replica names, though a replica is one engine of the two
    assert "replica_capacity_requests_per_month" not in bv and "tier_usd_per_replica_month" not in bv
    # R = $31.92/h ÷ 8 engines per gpu_8x × 2 engines per unit × 730 h = $5,825.40; one unit alone is billed on 2 ×
    # gpu_1x, $6,263.40, the bill "at one deployment unit" (was "at one replica", a unit being 2 of them)
    assert bv["unit_rental_usd_per_month"] == 5825.40 and bv["unit_rental_usd_per_month_basis"].endswith(
        "one deployment unit (2 replicas) alone is billed $6,263.40/month on Lambda:gpu_1x_h100_sxm5 "
        "(rental_usd_per_month), which the break-even utilization and the monthly bill at one deployment unit price")


def test_the_report_counts_deployment_units_as_cost_does():
    from types import SimpleNamespace

    from kvledger.analyses.serving.cost_curves import utilization_curve, volume_curve
    from kvledger.report.figures_serving import cost_by_utilization, cost_by_volume
    from kvledger.report.html_report import break_even_text

    c = cli_json(*ARGV)
    # u* = (one unit on 2 gpu_1x_h100_sxm5, $6,263.40 + people $5,000) ÷ (26.25 req/s × 3600 × 730 × $0.0029681)
    #    = 11,263.40 ÷ 204,754.38 = 5.5%; the volume's 1 unit (its 55,188,000 requests/month at 80% each)
    assert break_even_text(c).startswith("Break-even utilization (one deployment unit, carrying the whole people "
                                         "line) 5.5%; break-even volume ")  # was "(one replica, …"
    data = SimpleNamespace(cost=c, curves={"volume": volume_curve(c), "utilization": utilization_curve(c)})
    by_volume = cost_by_volume(data)
    assert by_volume.caption.startswith("Deployment units come whole, each run at most at 80% of its SLO capacity "
                                        "(55,188,000 requests per month each).")  # was "Replicas come whole"
    assert by_volume.headers[1] == "deployment units"
    assert "(× deployment unit USD/month" in data.curves["volume"]["formula"]
    assert cost_by_utilization(data).caption.startswith("Self-hosted cost per request of one deployment unit ")
