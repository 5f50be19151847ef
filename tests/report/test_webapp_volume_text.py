"""The web app's volume fields read what ``cost --monthly-tokens`` reads: a head of platform typing ``1.5B`` into
"volume: tokens per month" got "must be a number" while the CLI, the README and the field's neighbours take 3B."""

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


def test_a_volume_the_cli_refuses_is_the_fields_error():
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": "1.5G"})
    assert r.status_code == 400 and r.json()["error"] == (
        "invalid parameter: monthly_tokens cannot read '1.5G' as a count; write e.g. 3000000000, 3_000_000_000, 3e9 "
        "or 3B (K, M, B, T: powers of 1000), got '1.5G'")
    r = client.post("/api/serving", json={**SERVING, "monthly_output_tokens": "-1B", "monthly_input_tokens": 1e9})
    assert r.status_code == 400 and "monthly_output_tokens '-1B' is negative; a volume must be more than 0" in (
        r.json()["error"])
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": True})  # strict: no boolean for a number
    assert r.status_code == 400 and r.json()["error"] == "invalid parameter: monthly_tokens must be a number, got True"
