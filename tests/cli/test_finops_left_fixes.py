"""A head of platform's fresh-user trial (build vs buy): report's --out refuses what it cannot write, report takes
cost's --instance, the replicas × GPUs wording, and a bought GPU's bill through the per-token ledgers."""

from __future__ import annotations

from cli_run import cli_json, refused, run_cli

REPORT = ["report", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api",
          "OpenAI:gpt-4.1", "--num-requests", "50"]


def test_report_refuses_an_out_it_cannot_write_before_any_work(tmp_path):
    pdf = tmp_path / "r.pdf"
    msg = refused(*REPORT, "-o", str(pdf))
    assert msg.startswith(f"--out {pdf}: the report writes one self-contained HTML file")
    assert "not a .pdf file" in msg and "ending in .html or .htm" in msg and msg.endswith("Nothing was run.")
    assert not pdf.exists()
    # an unknown model would fail later: the suffix is refused first, so nothing was planned or simulated
    assert refused("report", "no-such/model", *REPORT[2:], "-o", str(pdf)) == msg
    assert "without a suffix" in refused(*REPORT, "-o", str(tmp_path / "r"))
    pdf.write_text("a real PDF")  # --force does not make HTML into a .pdf either
    assert refused(*REPORT, "-o", str(pdf), "--force") == msg and pdf.read_text() == "a real PDF"


def test_report_never_replaces_a_file_without_force_nor_an_input_even_with_it(tmp_path):
    old = tmp_path / "r.html"
    old.write_text("mine")
    assert refused(*REPORT, "-o", str(old)).startswith(f"--out {old} already exists; refusing to overwrite it")
    trace = tmp_path / "t.html"  # a trace named .html: the output check still knows it is an input
    trace.write_text('{"arrival_s": 0, "num_prompt_tokens": 100, "num_output_tokens": 10}\n')
    assert "is also an input of this command" in refused(*REPORT, "--trace", str(trace), "-o", str(trace), "--force")
    assert old.read_text() == "mine" and trace.read_text().startswith('{"arrival_s"')


SIM = ["meta-llama/Llama-3.2-3B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api", "OpenAI:gpt-4.1",
       "--num-requests", "50", "--gpu-provider", "Lambda", "--monthly-tokens", "2B"]


def test_report_takes_costs_instance_and_bills_what_cost_bills():
    eight = ["--instance", "gpu_8x_h100_sxm5"]
    cost, report = cli_json("cost", "--simulate", *SIM, *eight), cli_json("report", *SIM, *eight)
    # gpu_prices.csv Lambda gpu_8x_h100_sxm5: $31.92 per 8-GPU instance-hour; one 1-GPU replica rents the whole
    # instance: 31.92 × 730 h = $23,301.60 a month, + 0.25 engineer-month × $20,000 (team 'some') = $28,301.60
    assert report["cost"]["monthly"]["self_host"]["total_usd"] == cost["monthly"]["self_host"]["total_usd"]
    assert cost["monthly"]["self_host"]["total_usd"] == 28_301.6
    assert report["cost"]["monthly"]["self_host"]["items"][0]["amount_usd"] == 23_301.6
    assert report["inputs"]["gpu_price_choice"].startswith("the row named (--instance): Lambda H100 80GB SXM "
                                                           "(gpu_8x_h100_sxm5")
    assert "--gpu-provider Lambda --instance gpu_8x_h100_sxm5" in report["commands"]["cost"]
    # without it the report packs on Lambda's cheapest: the 1-GPU row, 4.29 × 730 = $3,131.70
    plain = cli_json("report", *SIM)
    assert plain["cost"]["monthly"]["self_host"]["items"][0]["amount_usd"] == 3_131.7
    # the same refusal as cost's for an instance the provider does not list
    bad = ["--instance", "p5.48xlarge"]
    assert refused("report", *SIM, *bad) == refused("cost", "--simulate", *SIM, *bad)
    assert "unknown instance type 'p5.48xlarge'" in refused("report", *SIM, *bad)


def test_a_deployment_unit_of_two_tp4_replicas_is_worded_as_two_replicas_of_four_gpus():
    from kvledger.analyses.serving.cost_run import gpu_rate
    from kvledger.ledgers.instances import pack

    argv = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api",
            "OpenAI:gpt-4.1", "--num-requests", "100", "--replicas", "2", "--tp", "4", "--monthly-tokens", "2B",
            "--gpu-provider", "Lambda"]
    out = run_cli(*argv).output
    # --replicas 2 --tp 4: the priced unit is 2 engines of TP 4 = 8 GPUs, on one Lambda gpu_8x_h100_sxm5 instance
    assert ("  self-hosted: 2 replicas × 4 GPUs (one deployment unit) rented on 1 gpu_8x_h100_sxm5 instance (8 GPUs, "
            "0 idle), realized utilization") in out
    assert "1 replica × 8 GPUs" not in out
    d = cli_json(*argv)
    # 1 instance × $31.92/h (gpu_prices.csv: 8 × $3.99/GPU-h) × 730 h = $23,301.60
    assert d["monthly"]["self_host"]["items"][0]["amount_usd"] == 23_301.6
    assert d["monthly"]["self_host"]["items"][0]["note"] == ("2 replicas × 4 GPUs (one deployment unit) = 8 GPUs on 1 "
                                                             "gpu_8x_h100_sxm5 instance (8 GPUs, 0 idle) × 730 h")
    # three such units: 6 engine replicas of 4 GPUs, 24 GPUs on 3 instances, none idle ("0 idle": no "of the 24" then)
    rate = gpu_rate("nvidia_h100_sxm", "Lambda", "gpu_8x_h100_sxm5", None)
    assert pack(rate, 3, 8, 2).words() == ("6 replicas × 4 GPUs (3 deployment units of 2) = 24 GPUs on 3 "
                                           "gpu_8x_h100_sxm5 instances (8 GPUs each, 0 idle) × 730 h")
    assert pack(rate, 3, 4).words().startswith("3 replicas × 4 GPUs = 12 GPUs on 2 gpu_8x_h100_sxm5 instances")


BUY = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api",
       "OpenAI:gpt-4.1", "--num-requests", "100", "--monthly-tokens", "20B", "--gpu-provider", "Lambda",
       "--board-power-w", "700", "--idle-power-w", "700"]  # a flat 700 W: the power bill does not depend on the load


def test_bought_gpus_price_the_per_token_ledgers_and_break_even_as_the_verdict_does():
    d = cli_json(*BUY, "--gpu-capex-usd", "25000")
    # bought, one GPU: $25,000 ÷ 36 months = $694.44 + power 700 W × PUE 1.3 × 730 h ÷ 1000 = 664.3 kWh × $0.12 =
    # $79.716 + hosting $0 = $774.16 a month, + people 0.25 × $20,000 = $5,774.16 (rented: 4.29 × 730 + 5,000 =
    # $8,131.70, so the verdict compares the bought bill); a bought GPU-hour: 774.16 ÷ 730 = $1.060494
    assert d["decision"]["self_host_usd_per_month"] == 5_774.16
    gpu_item = d["ledgers"]["self_host_output"]["items"][0]
    assert gpu_item["name"] == "bought GPU (amortized purchase, power, hosting), decode share of GPU time"
    assert abs(gpu_item["unit_price_usd"] - 774.160444 / 730) < 1e-6
    be = d["break_even_utilization"]
    assert be["unit_rental_usd_per_month"] == be["rental_usd_per_month"] == 774.16
    # the per-token ledgers × the volume's tokens give back the bill the verdict uses (every request within the SLO)
    m = d["monthly"]
    per_month = (d["ledgers"]["self_host_input"]["total_usd"] * m["input_tokens"]
                 + d["ledgers"]["self_host_output"]["total_usd"] * m["output_tokens"]) / 1e6
    assert abs(per_month - 5_774.16) < 0.01
    text = run_cli(*BUY, "--gpu-capex-usd", "25000").output
    assert "  break-even (bought GPUs, as the verdict): self-hosting is cheaper above" in text
    assert "rented GPUs; the bought-GPU bill" not in text


def test_a_bought_bill_dearer_than_renting_leaves_the_rented_ledgers():
    d = cli_json(*BUY, "--gpu-capex-usd", "1000000")  # $1M ÷ 36 = $27,777.78 a month > $4.29 × 730 = $3,131.70
    assert d["decision"]["self_host_usd_per_month"] == 8_131.7
    assert d["ledgers"]["self_host_output"]["items"][0]["name"] == "GPU rental, decode share of GPU time"
    assert d["ledgers"]["self_host_output"]["items"][0]["unit_price_usd"] == 4.29
    assert d["break_even_utilization"]["rental_usd_per_month"] == 3_131.7  # the 1-GPU row, whole
