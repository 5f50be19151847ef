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
