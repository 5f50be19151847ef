"""--force replaces an earlier output, never a server log: the SRE trial's `goodput … --out crashed.log --force`
replaced the vLLM log it had just diagnosed with goodput's JSON."""

from __future__ import annotations

from pathlib import Path

from cli_run import refused

EV = Path(__file__).parents[1] / "evidence" / "data"
LOG = Path(__file__).parents[1] / "fixtures" / "vllm_logs" / "constructed_v1_preemptions_at_full_kv.log"


def test_force_refuses_a_server_log_and_keeps_it(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(LOG.read_bytes())
    msg = refused("goodput", str(EV / "inference-perf" / "stage_0_lifecycle_metrics.json"), "--slo", "ttft=2s",
                  "--out", str(log), "--force")
    assert msg.startswith(f"--out {log} is a server log (its first lines are log records), not an output of kvledger")
    assert log.read_bytes() == LOG.read_bytes()


def test_force_still_replaces_an_earlier_output(tmp_path):
    from cli_run import run_cli

    out = tmp_path / "goodput.json"
    args = ("goodput", str(EV / "inference-perf" / "stage_0_lifecycle_metrics.json"), "--slo", "ttft=2s", "--out",
            str(out))
    assert run_cli(*args).exit_code == 0
    assert run_cli(*args, "--force").exit_code == 0 and out.read_text().startswith("{")
