"""The web app's errors in its own words: no command-line flag the form lacks, and a body that is not JSON said so."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app
from kvledger.report.webapp_words import in_app_words

client = TestClient(create_app(), base_url="http://127.0.0.1")
HEADERS = {"sec-fetch-site": "same-origin", "content-type": "application/json"}


def test_a_body_that_is_not_json_is_said_so():
    r = client.post("/api/plan", content="model=x", headers=HEADERS)
    assert r.status_code == 400 and r.json()["error"].startswith("the request body is not JSON:")
    r = client.post("/api/plan", content="[1, 2]", headers=HEADERS)
    assert r.status_code == 400 and r.json()["error"].startswith("the request body is not a JSON object:")


def test_an_unknown_gpu_names_the_gpu_field_and_the_data_folder_not_cli_flags():
    r = client.post("/api/plan", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H1000"}, headers=HEADERS)
    err = r.json()["error"]
    assert r.status_code == 400 and "unknown GPU 'H1000'" in err
    assert "--gpu FILE.json" not in err and "adjusted with --gpu-memory" not in err
    assert "name it in the GPU field" in err and "`kvledger ui --data-dir DIR`" in err


def test_price_and_length_messages_in_the_apps_words():
    # prices.py's message when several rental rows match: the app's provider field picks one
    said = in_app_words("2 rental prices for 'H100': AWS p5 $3.93/GPU-h (2025-06); Nebius $2.95/GPU-h (2025-06). "
                        "Pick one with --gpu-provider (and --instance), or give --gpu-usd-per-hour")
    assert "Pick one with the GPU provider field (gpu_provider; `kvledger cost --gpu-provider P --instance I` picks " \
           "one instance), or give your own price in the GPU price field (gpu_usd_per_hour)" in said
    assert "Pick one with --gpu-provider" not in said and "command-line option" not in said
    # the GPU price line without a provider (decision_data): another is chosen in the field, not by a flag
    said = in_app_words("the cheapest packing of the replicas on the 9 row(s) for nvidia_h100_sxm in gpu_prices.csv: "
                        "1 × Lambda:gpu_1x_h100_sxm5; pass --gpu-provider to choose another")
    assert said.endswith("; name another in the GPU provider field (gpu_provider)")
    for flag, field in (("--batch-share", "(batch_share)"), ("--cache-hit-rate", "(cache_hit_rate)"),
                        ("--peak-to-mean", "(peak_to_mean)"), ("--monthly-input-tokens", "monthly_input_tokens")):
        said = in_app_words(f"{flag} 2 is out of range; allowed: [0, 1]")
        assert field in said and flag not in said and "command-line option" not in said, said
    said = in_app_words("lower max_model_len to ≤ 41,872 (--max-model-len 41872), or give the KV cache more memory")
    assert said == "lower max_model_len to ≤ 41,872 (max_model_len 41872 in the context field), or give the KV cache " \
                   "more memory"
    # a flag with no field here is kept and said to be the command line's
    assert "(--hicache-ratio: `kvledger` command-line option; the app's fields are model, GPU" in in_app_words(
        "--hicache-ratio must be a finite number above 0")


def test_a_short_trace_names_the_requests_field():
    # the trace reader's refusal names --num-requests (cost, search, report); the app's field for it is "requests per
    # simulation" (num_requests), so the app says that and no command-line option is left over
    said = in_app_words("trace 'mytrace' has 300 requests at or after start_s=0 s; asked for 2,000 (--num-requests as "
                        "given, or the command's default when it is not): pass --num-requests 300 or fewer")
    assert said.endswith("set the requests per simulation field (num_requests) to 300 or fewer")
    assert "command-line option" not in said
