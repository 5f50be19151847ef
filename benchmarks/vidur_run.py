"""Vidur 0.0.26 on the Azure conversation trace, for ``sim_speed.py --with-vidur``: its own environment, its closest
settings, whole-process wall and peak RSS.

Vidur (microsoft/vidur, MIT) is installed from the package index into a separate virtual
environment (``~/.cache/kvledger-bench/vidur-venv``, or ``$KVLEDGER_BENCH_CACHE/vidur-venv``),
created with ``python -m venv`` and pip on first use. It is run as ``python -m vidur.main`` on
the same 19,366 requests, written in the layout its ``trace_replay`` generator reads (``Date``,
``Time`` s, ``PromptTokenCount``, ``CompletionTokenCount``; scale factors 1), with the closest
settings it has to kvledger's default run: ``meta-llama/Llama-3-8B`` (the 8B Llama its model configs name),
one H100 on an H100 DGX network profile, its vLLM scheduler, one replica, plots, traces and
wandb off. Vidur 0.0.26 fetches its operator profiles and trained runtime predictors from the
Hugging Face Hub on first use (``project-vajra/dev-staging-meta-llama-llama-3-8b-h100`` and
``project-vajra/dev-staging-h100-dgx``, its ``BaseExecutionTimePredictorConfig`` defaults); where
that fails, :func:`run_vidur` raises ``VidurUnavailable`` with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VIDUR_VERSION = "0.0.26"


class VidurUnavailable(Exception):
    """Vidur could not be installed or run here; the message says why."""


def _venv() -> Path:
    base = Path(os.environ.get("KVLEDGER_BENCH_CACHE", "~/.cache/kvledger-bench")).expanduser()
    return base / "vidur-venv"


def ensure_vidur() -> Path:
    """The venv's python with vidur installed (creating the venv on first use)."""
    venv = _venv()
    py = venv / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import vidur.main"], capture_output=True).returncode == 0
    if ok:
        return py
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [[sys.executable, "-m", "venv", str(venv)], [str(py), "-m", "pip", "install", "-q",
                                                         f"vidur=={VIDUR_VERSION}"]]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise VidurUnavailable(f"could not install Vidur {VIDUR_VERSION} into {venv} ({' '.join(cmd[-3:])} failed: "
                                   f"{_last_line(r.stderr or r.stdout)})")
    return py


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def _write_trace(path: Path) -> int:
    from kvledger.dynamics.workload.traces import load_trace

    reqs = load_trace("azure-conv")
    with path.open("w") as f:
        f.write("Date,Time,PromptTokenCount,CompletionTokenCount\n")
        for r in reqs:
            f.write(f"2023-11-16,{r.arrival_s!r},{r.num_prompt_tokens},{r.num_output_tokens}\n")
    return len(reqs)


def vidur_argv(trace: Path, out_dir: Path) -> list[str]:
    """Vidur's command line for the closest settings (module docstring)."""
    return ["-m", "vidur.main", "--replica_config_model_name", "meta-llama/Llama-3-8B",
            "--replica_config_device", "h100", "--replica_config_network_device", "h100_dgx",
            "--replica_config_tensor_parallel_size", "1", "--cluster_config_num_replicas", "1",
            "--replica_scheduler_config_type", "vllm", "--request_generator_config_type", "trace_replay",
            "--trace_request_generator_config_trace_file", str(trace),
            "--trace_request_generator_config_date", "2023-11-16",
            "--trace_request_generator_config_prefill_scale_factor", "1",
            "--trace_request_generator_config_decode_scale_factor", "1",
            "--trace_request_generator_config_time_scale_factor", "1",
            "--trace_request_generator_config_max_tokens", "131072",
            "--metrics_config_output_dir", str(out_dir), "--no-metrics_config_store_plots",
            "--no-metrics_config_write_json_trace", "--no-metrics_config_enable_chrome_trace",
            "--no-metrics_config_save_table_to_wandb"]


def run_vidur(repeat: int) -> tuple[list[float], float]:
    """(wall s of each run, peak RSS MiB) of ``repeat`` whole-process Vidur runs; the first run warms its caches.

    Raises:
        VidurUnavailable: install or run failed (the message names the step and Vidur's last error line).
    """
    py = ensure_vidur()
    walls, peak = [], 0.0
    with tempfile.TemporaryDirectory(prefix="kvledger-vidur-") as tmp:
        trace = Path(tmp) / "azure_conv_vidur.csv"
        _write_trace(trace)
        for _ in range(repeat + 1):  # one warm-up run (Vidur caches its downloaded profiles and trained predictors)
            with tempfile.TemporaryFile("w+") as err:
                t0 = time.perf_counter()
                proc = subprocess.Popen([str(py), *vidur_argv(trace, Path(tmp) / "out")], cwd=tmp,
                                        stdout=subprocess.DEVNULL, stderr=err, text=True)
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - t0
                if os.waitstatus_to_exitcode(status):
                    err.seek(0)
                    text = err.read()
                    why = _last_line(text).rstrip(".")
                    hub = "huggingface" in text.lower() or "Name or service not known" in text
                    raise VidurUnavailable(
                        f"Vidur {VIDUR_VERSION} is installed ({py}) but its run failed: {why}"
                        + (". Vidur 0.0.26 downloads its operator profiles and trained predictors from the Hugging "
                           "Face "
                           "Hub on first use (project-vajra/dev-staging-meta-llama-llama-3-8b-h100, "
                           "project-vajra/dev-staging-h100-dgx) and this machine cannot reach the Hub" if hub else ""))
            walls.append(wall)
            peak = max(peak, usage.ru_maxrss / 1024)
    return walls[1:], peak
