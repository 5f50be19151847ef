"""``--gpu-usd-per-hour`` per GPU (``H100=2.49,L4=0.5``): search prices each candidate at its GPU's price (a GPU left
out at the table's), cost takes the priced GPU's, one number is unchanged, and every bad list is a one-line error
with exit status 2.

The search figures: Llama-3.2-3B, TP 1, max_model_len 8K, 60 requests per probe, --utilization 0.5. The good requests
priced are the offered rate × the priced run's attainment (the share of its requests within the SLO), the token rates
scaled alike (``ledgers.sustained_rate.at_attainment``): the L4's run at its SLO capacity, 4.125 req/s (its decode
with the layer-kernel floors a GPU without measured tables carries: accounting/carried_kernels.py), has all 60
within the SLO, so 4.125 good req/s and 279.55 × 4.125 ÷ 2.2974 = 501.94 good output tok/s (its goodput, 2.2974 good
req/s over first arrival → last finish, counts the drain tail as failed requests), prefill share 0.15193; the H100's
run at its capacity, 36.5 req/s, all within the SLO: 36.5 good req/s, 2,567.98 × 36.5 ÷ 21.104 = 4,441.4 good output
tok/s, prefill share 0.18605. (60 requests per probe are too short to show either GPU's load above these rates: more
than half their requests are still in the system at the last arrival, ``analyses/serving/probe_length.py``; 2,000 per
probe find 2.78 and 32 req/s.) USD per 1M output tokens = USD/GPU-h × GPUs per replica × 10⁶ ÷ (good output tok/s ×
3600 s × utilization) × (1 − prefill share) (``ledgers.cost.self_host_unit_ledgers``): the L4 at $0.50, 0.50 × 10⁶ ÷
(501.94 × 1800) × 0.84807 = $0.4693; the H100 at $6, 6 × 10⁶ ÷ (4,441.4 × 1800) × 0.81395 = $0.6109. Ranked by USD per
1,000 good requests, GPUs × USD/GPU-h × 1000 ÷ (3600 × 0.5 × good req/s): the L4 0.5 × 1000 ÷ (1800 × 4.125) =
$0.0673, the H100 6 × 1000 ÷ (1800 × 36.5) = $0.0913, so the L4 wins at a twelfth of the H100's price.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_run import records_file
from typer.testing import CliRunner

from kvledger.cli.main import app, run

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4,H100", "--tp", "1",
          "--max-model-len", "8K", "--num-requests", "60", "--utilization", "0.5"]
L4, H100 = "nvidia_l4:tp1:kv-auto", "nvidia_h100_sxm:tp1:kv-auto"


def _search(*extra: str) -> dict:
    res = runner.invoke(app, [*SEARCH, *extra, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _usd_per_mtok_output(c: dict) -> float:
    """The module docstring's formula, from the candidate's own reported price, throughput and prefill share."""
    cap, cost = c["capacity"], c["cost"]
    rate = cap["sized_on_req_per_s"] or cap["slo_capacity_req_per_s"]  # null where the bound does not cap it
    good = rate * (cap["attainment_at_sized_rate"] or cap["attainment"])  # the good req/s priced
    run_good = cap["goodput_at_sized_rate_req_per_s"] or cap["goodput_at_boundary_req_per_s"]  # the run's own
    out_tok_s = cap["goodput_output_tok_per_s"] * good / run_good
    return (c["price"]["usd_per_gpu_hour"] * c["num_gpus_per_unit"] * 1e6
            / (out_tok_s * 3600 * cost["utilization"]) * (1 - cost["prefill_share"]))


def test_search_prices_each_gpu_at_its_own_price():
    d = _search("--gpu-usd-per-hour", "H100=6,L4=0.5")
    assert d["spec"]["gpu_usd_per_hour"] == {"nvidia_h100_sxm": 6.0, "nvidia_l4": 0.5}  # a JSON object, by catalog id
    c = {x["id"]: x for x in d["candidates"]}
    assert (c[L4]["price"]["usd_per_gpu_hour"], c[H100]["price"]["usd_per_gpu_hour"]) == (0.5, 6.0)
    assert c[L4]["price"]["source"] == "user input (--gpu-usd-per-hour, nvidia_l4)"
    assert c[H100]["price"]["source"] == "user input (--gpu-usd-per-hour, nvidia_h100_sxm)"
    for x in c.values():
        assert x["cost"]["usd_per_mtok_output"] == pytest.approx(_usd_per_mtok_output(x), rel=1e-12)
    assert c[L4]["cost"]["usd_per_mtok_output"] == pytest.approx(0.4693, rel=1e-3)  # module docstring
    assert c[H100]["cost"]["usd_per_mtok_output"] == pytest.approx(0.6109, rel=1e-3)
    assert c[L4]["cost"]["usd_per_1k_requests"] == pytest.approx(0.06734, rel=1e-3)
    assert c[H100]["cost"]["usd_per_1k_requests"] == pytest.approx(0.0913, rel=1e-3)
    assert d["ranking"] == [L4, H100]
    assert d["notes"][0] == "GPU prices: given (--gpu-usd-per-hour) for nvidia_h100_sxm $6/GPU-h, nvidia_l4 $0.5/GPU-h"


def test_a_gpu_left_out_of_the_list_keeps_the_tables_price_and_the_note_says_so():
    d = _search("--gpu-usd-per-hour", "h100-sxm=6")
    c = {x["id"]: x for x in d["candidates"]}
    # the L4's cheapest row in gpu_prices.csv, RunPod's $0.44 (as with no --gpu-usd-per-hour)
    assert (c[L4]["price"]["usd_per_gpu_hour"], c[L4]["price"]["provider"]) == (0.44, "RunPod")
    assert c[L4]["price"]["source"].startswith("gpu_prices.csv RunPod:Secure Cloud pod")
    assert c[H100]["price"]["usd_per_gpu_hour"] == 6.0
    assert c[L4]["cost"]["usd_per_mtok_output"] == pytest.approx(_usd_per_mtok_output(c[L4]), rel=1e-12)
    assert d["notes"][0] == ("GPU prices: given (--gpu-usd-per-hour) for nvidia_h100_sxm $6/GPU-h; nvidia_l4 from the "
                             "price table: the cheapest on-demand row of each GPU in gpu_prices.csv (any provider); "
                             "--gpu-provider fixes one")


def test_one_number_prices_every_gpu_as_before(tmp_path):
    led = tmp_path / "ledger.jsonl"
    d = _search("--gpu-usd-per-hour", "2.5", "--ledger", str(led))
    assert d["spec"]["gpu_usd_per_hour"] == 2.5  # a number, as ledgers written before the list resume
    assert json.loads(led.read_text().splitlines()[0])["spec"]["gpu_usd_per_hour"] == 2.5
    for x in d["candidates"]:
        assert (x["price"]["usd_per_gpu_hour"], x["price"]["source"]) == (
            2.5, f"user input (--gpu-usd-per-hour, {x['gpu_id']})")
        assert x["cost"]["usd_per_mtok_output"] == pytest.approx(_usd_per_mtok_output(x), rel=1e-12)
    # 2.5 × 1000 ÷ (1800 × 138.86) = $0.0100 against 2.5 × 1000 ÷ (1800 × 8.375) = $0.166 per 1k requests
    assert d["ranking"] == [H100, L4]
    assert d["notes"][0] == "GPU price: $2.5/GPU-h for every candidate, given (--gpu-usd-per-hour)"


def test_resume_takes_the_same_prices_by_any_names_and_refuses_others(tmp_path):
    led = tmp_path / "ledger.jsonl"
    first = _search("--gpu-usd-per-hour", "H100=6,L4=0.5", "--ledger", str(led))
    full = led.read_bytes()
    led.write_bytes(b"".join(full.splitlines(keepends=True)[:2]))  # header + the first candidate: as if interrupted
    assert _search("--gpu-usd-per-hour", "nvidia_l4=0.5,h100_sxm=6", "--resume", str(led)) == first
    assert led.read_bytes() == full
    for other in ("H100=6,L4=0.6", "6"):  # another price, or one number: another search
        res = runner.invoke(app, [*SEARCH, "--gpu-usd-per-hour", other, "--resume", str(led)])
        assert "is the ledger of another search" in str(res.exception)


def _entry(monkeypatch, capsys, *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["kvledger", *argv])
    with pytest.raises(SystemExit) as ended:
        run()
    return ended.value.code, capsys.readouterr().err


COST = ["cost", str(DATA / "aiperf/run1_profile_export.jsonl"), "--slo", "ttft=4s", "--api", "OpenAI:gpt-4.1",
        "--utilization", "0.5", "--num-gpus", "1"]


@pytest.mark.parametrize("argv, message", [
    ([*SEARCH, "--gpu-usd-per-hour", "2,5"], "--gpu-usd-per-hour '2,5' is not a number; give one price for every GPU "
                                             "(2.49) or GPU=PRICE pairs (H100=2.49,A100-80GB=1.29)"),
    ([*SEARCH, "--gpu-usd-per-hour", "H100=-2"], "--gpu-usd-per-hour H100=-2 is out of range; allowed: (0, 1,000,000] "
                                                 "USD/GPU-hour"),
    ([*SEARCH, "--gpu-usd-per-hour", "L4=0"], "--gpu-usd-per-hour L4=0 is out of range; allowed: (0, 1,000,000] "
                                              "USD/GPU-hour"),
    ([*SEARCH, "--gpu-usd-per-hour", "H1000=2"], "--gpu-usd-per-hour H1000=2: unknown GPU 'H1000'; did you mean: "
                                                 "h100, h100-80gb, h200"),
    ([*SEARCH, "--gpu-usd-per-hour", "H100=2,h100-sxm=3"], "--gpu-usd-per-hour names nvidia_h100_sxm twice (H100 and "
                                                           "h100-sxm): give each GPU one price"),
    ([*SEARCH, "--gpu-usd-per-hour", "H100=2,A100-80GB=1.29"], "--gpu-usd-per-hour prices nvidia_a100_80gb_sxm, which "
     "no candidate of this search runs on (a typo, or a GPU to add to --gpus?); the GPUs searched: nvidia_l4, "
     "nvidia_h100_sxm"),
    ([*COST, "--gpu", "H100", "--gpu-usd-per-hour", "L4=0.5"], "--gpu-usd-per-hour lists prices for nvidia_l4, not "
     "for the GPU priced here, H100 (nvidia_h100_sxm): add nvidia_h100_sxm=PRICE to the list, or give one number"),
    ([*COST, "--gpu-usd-per-hour", "L4=0.5"], "--gpu-usd-per-hour lists prices per GPU (nvidia_l4 $0.5/GPU-h), but "
     "the run does not name its GPU: pass --gpu, or one number for its price"),
])
def test_a_bad_list_is_a_one_line_error_with_exit_2(monkeypatch, capsys, argv, message):
    code, err = _entry(monkeypatch, capsys, *argv)
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"error: {message}") and err.endswith("\n") and err.count("\n") == 1  # one line


def test_a_gpu_file_left_out_of_the_list_needs_its_price(monkeypatch, capsys, tmp_path):
    g = tmp_path / "my-gpu.toml"
    g.write_text('name = "X"\nmemory = "47.5GiB"\nbandwidth_tb_s = 1.2\nbf16_tflops = 300\n')
    args = [*SEARCH[:4], "--gpus", f"H100,{g}", *SEARCH[6:]]
    code, err = _entry(monkeypatch, capsys, *args, "--gpu-usd-per-hour", "H100=2")
    assert code == 2 and err == (f"error: GPU file {g} has no catalog price (gpu_prices.csv rows are for catalog "
                                 f"GPUs): give --gpu-usd-per-hour, your USD per GPU-hour, to rank it ({g}=PRICE in "
                                 "the list)\n")


def test_cost_takes_the_priced_gpus_price_from_the_list(tmp_path):
    args = ["cost", str(records_file(tmp_path)), "--slo", "ttft=200ms", "--api", "OpenAI:gpt-4.1", "--gpu", "H100",
            "--utilization", "0.5", "--engineer-months-per-month", "0", "--prefill-share", "0.2", "--json"]
    res = runner.invoke(app, [*args, "--gpu-usd-per-hour", "L4=0.5,h100_sxm=2.95"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    # 30 good requests × 100 tokens in 10 s = 300 good output tok/s: 10⁶ ÷ (300 × 3600 × 0.5) × 0.8 output share
    # × $2.95 = 1.4815 GPU-h × $2.95 = $4.370370 per 1M output tokens (the L4's $0.50 is not this GPU's)
    assert d["totals"]["self_host_usd_per_mtok_output"] == pytest.approx(4.370370, rel=1e-6)
    item = d["ledgers"]["self_host_output"]["items"][0]
    assert (item["unit_price_usd"], item["source"]) == (2.95, "user input (--gpu-usd-per-hour, nvidia_h100_sxm)")
    one = json.loads(runner.invoke(app, [*args, "--gpu-usd-per-hour", "2.95"]).stdout)  # one number: as before
    assert one["totals"]["self_host_usd_per_mtok_output"] == d["totals"]["self_host_usd_per_mtok_output"]
    assert one["ledgers"]["self_host_output"]["items"][0]["source"] == ("user input (--gpu-usd-per-hour, "
                                                                        "nvidia_h100_sxm)")


@pytest.mark.parametrize("command", ["search", "cost", "report", "offload"])
def test_help_gives_both_forms(command):
    res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "--gpu-usd-per-hour" in text and "one number" in text and "=2.49" in text


def test_cost_simulate_prices_a_gpu_file_from_the_list_under_its_path(tmp_path):
    # was: the simulated GPU file is "custom", so the list keyed by its path was refused ("add custom=PRICE", which
    # is no GPU name either); priced as one number would price it: the same $ figures, the source naming the file
    g = tmp_path / "my-gpu.toml"
    g.write_text('name = "X"\nmemory = "79.19GiB"\nbandwidth_tb_s = 3.35\nbf16_tflops = 989\n')
    args = ["cost", "--simulate", "meta-llama/Llama-3.2-3B", "--gpu", str(g), "--slo", "ttft=1s", "--api",
            "OpenAI:gpt-4.1", "--utilization", "0.5", "--num-requests", "50", "--json"]
    listed = runner.invoke(app, [*args, "--gpu-usd-per-hour", f"{g}=2"])
    one = runner.invoke(app, [*args, "--gpu-usd-per-hour", "2"])
    assert listed.exit_code == 0 and one.exit_code == 0, listed.output + one.output
    a, b = json.loads(listed.stdout), json.loads(one.stdout)
    assert a["sticker"] == b["sticker"] and a["break_even_volume"] == b["break_even_volume"]
    assert a["secondary"] == b["secondary"] and "$0.0" in a["secondary"]
    assert f"user input (--gpu-usd-per-hour, {g})" in listed.output
