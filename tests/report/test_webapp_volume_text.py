"""A head of platform's trial of the web app: the volume fields read what ``cost --monthly-tokens`` reads (typing
``1.5B`` got "must be a number" while the CLI and the README take 3B), and a GPU price given says the whole instances
the bill rents on it, as the CLI's answer does."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
SERVING = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "slo": "ttft=200ms", "api": "OpenAI:gpt-4.1",
           "num_requests": 50}


def _verdict(**volume) -> str:
    r = client.post("/api/serving", json={**SERVING, **volume})
    assert r.status_code == 200, r.text
    return r.json()["headline"]["verdict"]


def test_a_volume_typed_with_the_clis_suffix_answers_as_its_number():
    # 1.5B = 1.5 × 10⁹ tokens (K, M, B, T: powers of 1000, as cost --monthly-tokens reads them)
    typed = _verdict(monthly_tokens="1.5B")
    assert typed == _verdict(monthly_tokens=1.5e9) == _verdict(monthly_tokens="1_500_000_000")
    assert "for 1.5B tokens/month" in typed
    # 1.05B in + 450M out = 1.05 × 10⁹ and 4.5 × 10⁸
    split = _verdict(monthly_input_tokens="1.05B", monthly_output_tokens="450M")
    assert split == _verdict(monthly_input_tokens=1.05e9, monthly_output_tokens=4.5e8)
    assert "for 1.5B tokens/month (1.05B in, 450M out)" in split


def test_a_volume_per_day_is_its_month_restated_in_the_answer():
    # 100M/day: 1e8 × (730 h ÷ 24 = 30.4167 days) = 3.0417e9 tokens a month, the figure priced and its conversion
    typed = _verdict(monthly_tokens="100M/day")
    assert typed.replace("; 100M tokens/day × 30.42 days = 3.04B tokens/month", "") == _verdict(
        monthly_tokens=1e8 * 730 / 24)
    assert "for 3.04B tokens/month (" in typed and "; 100M tokens/day × 30.42 days = 3.04B tokens/month)" in typed
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": "100M/week"})
    assert r.status_code == 400 and "monthly_tokens '100M/week': cannot read the rate unit 'week'" in r.json()["error"]


def test_a_volume_the_cli_refuses_is_the_fields_error():
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": "1.5G"})
    assert r.status_code == 400 and r.json()["error"] == (
        "invalid parameter: monthly_tokens cannot read '1.5G' as a count; write e.g. 3000000000, 3_000_000_000, 3e9 "
        "or 3B (K, M, B, T: powers of 1000), got '1.5G'")
    r = client.post("/api/serving", json={**SERVING, "monthly_output_tokens": "-1B", "monthly_input_tokens": 1e9})
    # as --monthly-output-tokens -1B says it: a kind of the split is a count, 0 or more (0 output tokens is a split)
    assert r.status_code == 400 and "monthly_output_tokens '-1B' is negative; a count is 0 or more" in (
        r.json()["error"])
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": True})  # strict: no boolean for a number
    assert r.status_code == 400 and r.json()["error"] == "invalid parameter: monthly_tokens must be a number, got True"


def test_a_given_gpu_price_says_the_whole_instances_the_bill_rents():
    # TP 2 on Nebius, whose H100 rows hold 1 or 8 GPUs: a TP-2 replica needs the 8-GPU instance, 6 of its GPUs idle,
    # all billed at the $1/GPU-h given: $8/h × 730 h = $5,840 of rental a month; the price line said only "given"
    r = client.post("/api/serving", json={**SERVING, "tp": 2, "gpu_provider": "Nebius", "gpu_usd_per_hour": 1.0})
    assert r.status_code == 200, r.text
    assert r.json()["headline"]["gpu_price"] == (
        "given (the GPU price field, gpu_usd_per_hour): nvidia_h100_sxm at Nebius (gpu-h100-sxm 8gpu, your price), "
        "$1.00/GPU-h: 1 replica × 2 GPUs = 2 GPUs on 1 gpu-h100-sxm 8gpu instance (8 GPUs, 6 idle) × 730 h, $8.00/h")
    assert r.json()["cost"]["break_even_utilization"]["one_unit_rental_usd_per_month"] == 5840.0


def _error(**fields) -> str:
    r = client.post("/api/serving", json={**SERVING, **fields})
    assert r.status_code == 400, r.text
    return r.json()["error"]


def test_a_negative_volume_is_echoed_as_typed_and_said_in_the_apps_words():
    # the JSON number -5 became the strict float -5.0, which the volume parser got as repr "-5.0": the error echoed a
    # value nobody typed. Now -5 as typed; the CLI's own rule: --monthly-tokens more than 0, the split's kinds 0 or more
    assert _error(monthly_tokens=-5) == ("monthly_tokens: '-5' is negative; a volume must be more than 0 (empty the "
                                         "volume field for the per-token ledgers alone)")
    assert _error(monthly_input_tokens=-5, monthly_output_tokens=1e9) == \
        "monthly_input_tokens: '-5' is negative; a count is 0 or more"
    assert "'-5.5' is negative" in _error(monthly_tokens=-5.5)  # a fraction as written
    # typed as text: the same reason, in the app's words (the CLI's "leave the flag out" was said before)
    text = _error(monthly_tokens="-5")
    assert "'-5' is negative; a volume must be more than 0 (empty the volume field for the per-token" in text
    assert "leave the flag out" not in text


def test_zero_input_tokens_is_a_split_as_text_as_a_number_and_on_the_command_line():
    # cost --monthly-input-tokens 0 --monthly-output-tokens 1B is a volume of output tokens only ("one kind given as
    # 0", volume._split_volume); the text field refused "0" as "zero; a volume must be more than 0", the number not
    from kvledger.report.webapp_requests import ServingRequest

    body = {**SERVING, "monthly_output_tokens": "1B"}
    assert ServingRequest.model_validate({**body, "monthly_input_tokens": "0"}).monthly_input_tokens == 0.0
    assert ServingRequest.model_validate({**body, "monthly_input_tokens": 0}).monthly_input_tokens == 0.0
