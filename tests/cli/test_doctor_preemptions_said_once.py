"""doctor on a vLLM 0.10.x log whose KV cache fills with requests waiting: the "cannot show preemptions" sentence is
said once, in the capacity finding, and the summary line points at it (a fresh-user trial read it twice in a row);
where no finding carries the words (a 0.19 log, which prints 'Preemptions: N' whenever N > 0), the summary keeps them.

The logs are the CONSTRUCTED ones of tests/analyses/test_doctor_preemption_counts.py (vLLM 0.10.1's and 0.19.0's
metrics-line formats, v1/metrics/loggers.py LoggingStatLogger.log), written to a file for the command line."""

from __future__ import annotations

import sys
from pathlib import Path

from cli_run import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "analyses"))
from test_doctor_preemption_counts import _log  # noqa: E402


def _doctor(tmp_path: Path, version: str, src: str, *flags: str) -> str:
    path = tmp_path / f"vllm-{version}.log"
    path.write_text(_log(version, src))
    res = run_cli("doctor", str(path), *flags)
    assert res.exit_code == 0, res.output
    return " ".join(res.stdout.split())


def test_a_010_log_says_it_cannot_show_preemptions_once(tmp_path):
    for flags in ((), ("--verbose",)):
        out = _doctor(tmp_path, "0.10.1", "loggers.py:123", *flags)
        # the sentence of preemption_counts.preemption_counting for a V1 release before 0.11.1
        assert out.count("vLLM 0.10.1 logs no preemption at all") == 1
        assert out.count("vllm:num_preemptions_total") == 1
        assert ("per-preemption warning lines (preemptions: this log cannot show them; the capacity finding below "
                "says why)") in out
        assert "preemptions cannot show in this log: vLLM 0.10.1 logs no preemption at all" in out


def test_a_019_log_keeps_the_words_in_the_summary(tmp_path):
    out = _doctor(tmp_path, "0.19.0", "v1/metrics/loggers.py:259")
    assert ("(preemptions: none in these metrics intervals: vLLM 0.19.0 prints 'Preemptions: N' in a metrics line "
            "whenever N > 0)") in out
    assert "this log cannot show them" not in out
