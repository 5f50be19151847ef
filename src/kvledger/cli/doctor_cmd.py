"""``kvledger doctor LOGFILE``: a vLLM server log read, compared with the KV-cache ledger, and diagnosed."""

from __future__ import annotations

import typer

from kvledger import strict_json
from kvledger.cli.broken_pipe import will_end_with
from kvledger.report.doctor_view import render_doctor as _render

__all__ = ["register"]


def doctor(
    logfile: str = typer.Argument(..., help="A vLLM server log (stdout/stderr of `vllm serve`, any version from 0.5); "
                                                   "- reads it from standard input. Or a saved /metrics scrape: its "
                                                   "preemption count, KV pool and usage."),
    model: str | None = typer.Option(None, "--model", help="Bundled model or config.json (default: the model the log "
                                                           "names, if bundled)."),
    gpu: str | None = typer.Option(None, "--gpu", help="Catalog GPU or GPU file (default: the device total the log "
                                                       "prints)."),
    replicas: int = typer.Option(1, "--replicas", help="Replicas the traffic is spread over (prefix-cache routing "
                                                       "rule)."),
    prefix_share: float | None = typer.Option(None, "--prefix-share", help="Fraction of prompt tokens your traffic "
                                                                           "repeats, 0–1."),
    engine_version: str | None = typer.Option(None, "--engine-version", help="vLLM version whose rules to apply "
                                                                             "(default: from the log)."),
    tp: int | None = typer.Option(None, "--tensor-parallel-size", "--tp", help="The server's TP, where the log "
                                  "does not print it (a log without its start-up: rotated, or `--since`)."),
    max_model_len: str | None = typer.Option(None, "--max-model-len", help="The server's --max-model-len, where the "
                                             "log does not print it (8192; 8K = 8,192)."),
    gpu_memory_utilization: float | None = typer.Option(None, "--gpu-memory-utilization", help="The server's "
                                                        "fraction, where the log does not print it."),
    max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="The server's --max-num-seqs, where the log "
                                            "does not print it."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print the full reading after the summary: start-up "
                                                                "terms against the ledger, evidence lines, remedies, "
                                                                "rules."),
) -> None:
    """Read a vLLM log: start-up figures against the ledger, and diagnoses (capacity, prefix-cache routing, TTFT/ITL
    batching).

    Exit status 1: the server did not start or died, or the log ends before it shows that the server started (still
    starting, or cut) — in the log's last start-up, where it holds several (restarts); a stop the operator asked for
    and requests refused while the server served on are not failures; 2: bad input."""
    from kvledger.analyses.doctor.diagnose import diagnose_file

    # --max-model-len stays text: it is read as the server's release reads it, once the log names that release
    # (analyses/doctor/launch_len.py)
    launch = {"tp": tp, "max_model_len": max_model_len or None, "gpu_memory_utilization": gpu_memory_utilization,
              "max_num_seqs": max_num_seqs}
    if _scrape(logfile, model, gpu, engine_version, launch, as_json):
        return
    rep = diagnose_file(logfile, model=model, gpu=gpu, replicas=replicas, prefix_share=prefix_share,
                        engine_version=engine_version, launch=launch)
    # a server that did not start, died serving, or is not shown started is no healthy one: scripts and CI see it in
    # the status, kept by a reader that stops reading (`| head -1`, `grep -q`)
    will_end_with(1 if rep.failed or rep.unfinished else 0)
    if as_json:
        typer.echo(strict_json.dumps(rep.to_dict(), indent=2))
    else:
        _render(rep, verbose)
    if rep.failed or rep.unfinished:
        raise typer.Exit(1)


def _scrape(path: str, model: str | None, gpu: str | None, engine_version: str | None, launch: dict,
            as_json: bool) -> bool:
    """A Prometheus /metrics scrape read and printed (True); False for anything else (doctor reads it as a log)."""
    from pathlib import Path

    from kvledger.evidence.prometheus_text import scrape_summary

    p = Path(path)
    try:  # a name too long, a file not readable: the log reader says so in its words
        if path == "-" or not p.is_file():
            return False
        text = p.read_bytes()[:50_000].decode("utf-8", errors="replace")
    except OSError:
        return False
    if not (summary := scrape_summary(text)):
        return False
    if "none of them vLLM's" in summary:  # another engine's (sglang:…) or a plain exporter's metrics
        from kvledger.errors import FormatError

        raise FormatError(str(p), f"this is {summary}: kvledger doctor reads vLLM's metrics (vllm:…) only")
    from kvledger.analyses.doctor.scrape import diagnose_scrape
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.evidence.vllm_scrape import read_vllm_scrape
    from kvledger.report.doctor_scrape_view import render_doctor_scrape

    scrape = read_vllm_scrape(p.read_text(encoding="utf-8", errors="replace"), str(p))
    spec = load_model(model) if model else _bundled(scrape.model_name)
    rep = diagnose_scrape(scrape, model=spec, gpu=resolve_gpu(gpu) if gpu else None, engine_version=engine_version,
                          launch={k: v for k, v in launch.items() if v is not None})
    if as_json:
        typer.echo(strict_json.dumps(rep, indent=2))
    else:
        render_doctor_scrape(rep)
    return True


def _bundled(name: str | None):
    """The bundled model a scrape's model_name label names, else None (a served name need not be a model's)."""
    from kvledger.catalog.models import load_model
    from kvledger.errors import UnknownNameError

    try:
        return load_model(name, allow_hub=False) if name else None
    except UnknownNameError:
        return None


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to the app."""
    app.command("doctor")(doctor)
