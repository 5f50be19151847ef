"""What ``doctor`` puts first (its warnings) when the reading rests on something the log does not bear out: another
release's rules than the one the log printed, a log that ends before the server said it served, metrics figures no
vLLM prints (a fresh-user trial: each gave a clean reading).

The log: tests/fixtures/vllm_logs/constructed_v1_oom_while_serving.log (README there) — a real vLLM start-up of
Llama-3.1-8B-Instruct on an H100, serving from line 9 (its first metrics line), then a crash.
"""

from __future__ import annotations

from pathlib import Path

from kvledger.analyses.doctor.diagnose import diagnose
from kvledger.evidence.vllm_log import parse_vllm_log

LOGS = Path(__file__).parents[2] / "tests" / "fixtures" / "vllm_logs"
TEXT = (LOGS / "constructed_v1_oom_while_serving.log").read_text()


def test_another_release_than_the_log_printed_is_warned_of():
    log = parse_vllm_log(TEXT)
    assert log.version_source.startswith("printed")
    warned = diagnose(log, engine_version="0.24.0").warnings
    assert any(w.startswith(f"--engine-version 0.24.0 is not the vLLM this log printed ({log.version}, printed")
               for w in warned)
    assert not any("is not the vLLM this log printed" in w for w in diagnose(log, engine_version=log.version).warnings)


def test_a_log_that_ends_during_start_up_says_it_does_not_show_the_server_started():
    # the first 8 lines: the start-up's figures, before line 9's first metrics line (the first sign of serving)
    cut = parse_vllm_log("".join(TEXT.splitlines(keepends=True)[:8]))
    assert cut.serving_line is None
    assert any(w.startswith("the log shows no line of the server serving") for w in diagnose(cut).warnings)
    assert not any("no line of the server serving" in w for w in diagnose(parse_vllm_log(TEXT)).warnings)


def test_a_usage_above_100_percent_is_called_out():
    lines = TEXT.splitlines(keepends=True)
    line9 = lines[8]
    assert "GPU KV cache usage: " in line9
    i = line9.index("GPU KV cache usage: ") + len("GPU KV cache usage: ")
    lines[8] = line9[:i] + "100.5" + line9[line9.index("%", i):]
    warned = diagnose(parse_vllm_log("".join(lines))).warnings
    assert any(w.startswith("1 metrics figure(s) outside 0–100% (line 9: GPU KV cache usage 100.5%)") for w in warned)


def test_another_release_is_said_as_a_forecast_not_a_mismatch():
    # the log (vLLM 0.11.0, printed on line 1) prints "Available KV cache memory: 51.38 GiB" (line 6); with
    # --engine-version 0.33.0 the ledger applies 0.33's rules to this start-up: before, "the ledger's own memory plan
    # gives … outside the 2% it is validated to", as if the ledger missed; the 2% holds against a log's own release
    log = parse_vllm_log(TEXT)
    startup = diagnose(log, engine_version="0.33.0").startup
    # a forecast is not a miss: memory_miss (--json: "outside the 2%") stays null, the forecast has its own key
    assert startup.memory_miss is None
    miss = startup.memory_forecast
    assert miss.startswith("forecast, not a mismatch: 0.33.0's rules on this start-up give ")
    assert "against the 0.11.0 log's 51.38 GiB" in miss and "the log's figures are 0.11.0's own" in miss
    warned = diagnose(log, engine_version="0.33.0").warnings
    assert any("the ledger below is a forecast of 0.33.0's rules" in w and "not a mismatch" in w for w in warned)
    # the log's own release, given or read from the log: a check (within 2% here: 51.40 against 51.38 GiB)
    assert diagnose(log, engine_version="0.11.0").startup.memory_miss is None
    assert diagnose(log).startup.memory_miss is None and diagnose(log).startup.memory_forecast is None
