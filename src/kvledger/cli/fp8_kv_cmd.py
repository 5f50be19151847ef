"""``kvledger fp8-kv``: when FP8 KV cache pays (capacity, decode break-even, the step-time curve) and when to leave it
off."""

from __future__ import annotations

from pathlib import Path

import typer

from kvledger import strict_json
from kvledger.cli.analysis_opts import (
    GPU_OPT,
    JSON_OPT,
    MODEL_ARG,
    TARGET,
    TargetFlags,
    parse_token_list,
)
from kvledger.cli.flag_groups import with_groups
from kvledger.report.fp8_kv_view import render_fp8_kv as _render
from kvledger.report.plotfile import check_plot_path, save_plot

__all__ = ["register"]


def _overhead(per_element_ns, per_layer_us, calibration, calibration_model, calibration_gpu, model, gpu):
    """The FP8 overhead to use and, if fitted here, its calibration and, measured on this model and GPU, its rows
    (per sequence)."""
    from kvledger.analyses.judgments.fp8_calibration import (
        DEFAULT_FP8_OVERHEAD,
        Fp8Overhead,
        fit_fp8_overhead,
    )
    from kvledger.analyses.judgments.fp8_measurements_csv import read_fp8_measurements
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    cal, rows = None, None
    ov = DEFAULT_FP8_OVERHEAD
    if calibration:
        cm = load_model(calibration_model) if calibration_model else model
        cg = resolve_gpu(calibration_gpu) if calibration_gpu else gpu
        measured = read_fp8_measurements(calibration)
        cal = fit_fp8_overhead(measured, cm, cg, source=f"{calibration} ({cm.name} on {cg.name})")
        rows = measured if (cm.name, cg.name) == (model.name, gpu.name) else None  # the target's own runs only
        ov = cal.overhead
    if per_element_ns is not None or per_layer_us is not None:
        ov = Fp8Overhead(
            ov.per_layer_s if per_layer_us is None else per_layer_us * 1e-6,
            ov.ns_per_element if per_element_ns is None else per_element_ns,
            "given on the command line"
            + (f" (other term: {ov.source})" if (per_element_ns is None) != (per_layer_us is None) else ""),
        )
    return ov, cal, rows


@with_groups(target=TARGET)
def fp8_kv(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    concurrency: int | None = typer.Option(None, "--concurrency", help="Sequences decoding together (the batch), "
                                                                       "count; default: the requests of the first "
                                                                       "--context the bf16 pool holds at once (at most "
                                                                       "max_num_seqs)."),
    contexts: list[str] | None = typer.Option(None, "--contexts", "--context", help="Your context per request first "
        "(capacity is answered there; default 8K), then more for the curve (8K,32K); default curve 512 doubling to "
        "max_model_len."),
    overhead_ns_per_element: float | None = typer.Option(None, "--overhead-ns-per-element", help="FP8 time per K/V "
        "element read or written, ns (default 5.3e-5, fitted to the vLLM docs' L4 table)."),
    overhead_us_per_layer: float | None = typer.Option(None, "--overhead-us-per-layer", help="FP8 fixed time per layer "
        "per step, µs (default 6.5)."),
    calibration: str | None = typer.Option(
        None, "--calibration",
        help="CSV of your bf16-vs-fp8 decode runs to fit the overhead: columns context_tokens, batch (or concurrency) "
             "and the rates with their unit in the name: bf16_tok_per_s_per_seq, fp8_tok_per_s_per_seq (tok/s of one "
             "sequence) or bf16_tok_per_s_aggregate, fp8_tok_per_s_aggregate (tok/s of the whole batch, what vllm "
             "bench reports)."),
    calibration_model: str | None = typer.Option(None, "--calibration-model", help="Model the calibration CSV was "
        "measured on (default: MODEL)."),
    calibration_gpu: str | None = typer.Option(None, "--calibration-gpu", help="GPU the calibration CSV was measured "
                                                                               "on (default: --gpu)."),
    target: TargetFlags = TargetFlags(),
    as_json: bool = JSON_OPT,
    plot: Path | None = typer.Option(None, "--plot", help="Also draw the figure to FILE (.png, .svg or .pdf); refuses "
                                                          "to overwrite without --force."),
    force: bool = typer.Option(False, "--force", help="Allow --plot to overwrite an existing file."),
) -> None:
    """FP8 KV cache: capacity doubling, the decode break-even context, the bf16-vs-fp8 step curve, and when to leave it
    off."""
    from rich.console import Console

    from kvledger.analyses.judgments.fp8_kv import analyse_fp8_kv
    from kvledger.cli.outputs import refuse_lone_force

    refuse_lone_force(force, {"--plot": plot})
    check_plot_path(plot, force, inputs=[calibration])
    spec, g, settings = target.load(model, gpu)
    ov, cal, rows = _overhead(overhead_ns_per_element, overhead_us_per_layer, calibration, calibration_model,
                              calibration_gpu, spec, g)
    fitted = None
    if cal is not None and cal.gpu == g.name and target.bandwidth_fraction is None:
        # measured on this very GPU: its fitted effective bandwidth and fixed step time replace the roofline defaults,
        # priced as fitted (the fixed time holds the measured engine's host time: no host term on top)
        settings = settings.model_copy(update={"achievable_bandwidth_fraction": min(1.0, cal.bandwidth_fraction),
                                               "cpu_overhead_s": max(0.0, cal.step_fixed_s)})
        fitted = f"the fit of --calibration {calibration}"
    r = analyse_fp8_kv(spec, g, settings, concurrency=concurrency, contexts=parse_token_list(contexts, "--contexts"),
                       overhead=ov, pricing=target.pricing(), fitted=fitted, measured=rows)
    if plot is not None:
        from kvledger.report.judgment_figures import fp8_kv_figure

        save_plot(fp8_kv_figure(r), plot)
    if as_json:
        d = r.to_dict()
        d["calibration"] = cal.to_dict() if cal else None
        typer.echo(strict_json.dumps(d, indent=2))
    else:
        _render(r, cal, Console(emoji=False))


def register(app: typer.Typer) -> None:
    """Add ``fp8-kv`` to the app."""
    app.command("fp8-kv")(fp8_kv)
