"""``kvledger spec-decode``: speculative decoding as a statement about load — the gain at low load, the concurrency
where it turns into a loss, and a simulator sweep over request rates."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from kvledger import strict_json
from kvledger.cli.analysis_opts import (
    GPU_OPT,
    JSON_OPT,
    MODEL_ARG,
    TARGET,
    TargetFlags,
    list_items,
    parse_token_list,
)
from kvledger.cli.flag_groups import with_groups
from kvledger.report.plotfile import check_plot_path, save_plot
from kvledger.report.spec_decode_view import render_spec_decode as _render

__all__ = ["register"]


def _rates(text: str | None) -> list[float] | str | None:
    from kvledger.errors import InputError

    if text is None:
        return None
    if text.strip().lower() == "auto":
        return "auto"
    try:
        out = [float(x) for x in list_items([text], "--rates")]
    except ValueError:
        raise InputError(f"--rates: cannot read {text!r}; give req/s values like 1,2,4,8 or 'auto'") from None
    if len(out) > 32:  # each rate is two simulations: keep the sweep bounded
        raise InputError(f"--rates: {len(out)} rates given; at most 32 per sweep")
    return out


@with_groups(target=TARGET)
def spec_decode(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    draft_tokens: int = typer.Option(..., "--draft-tokens", "-k", help="Draft length k (vLLM num_speculative_tokens)."),
    acceptance: float = typer.Option(..., "--acceptance", help="Per-token acceptance rate α, 0–1 (i.i.d. model)."),
    draft_model: str | None = typer.Option(None, "--draft-model", help="Draft model (priced by its own roofline), "
        "or mtp: the target's own MTP layers (vLLM's method mtp; DeepSeek-V3/R1's num_nextn_predict_layers), its "
        "weights and one more KV layer each out of the pool. Default, with neither this nor --draft-cost-fraction: "
        "n-gram prompt lookup, drafting free (no GPU work), the most optimistic case."),
    draft_cost_fraction: float | None = typer.Option(None, "--draft-cost-fraction", help="MTP/EAGLE head: cost per "
        "draft token as a fraction of the target's decode step."),
    context: str = typer.Option("2048", "--context",
                                help="Context per sequence for the batch table, tokens (2048, 8K)."),
    flip_contexts: list[str] | None = typer.Option(None, "--flip-contexts", help="Contexts for the flip table (default "
        "256..32K)."),
    rates: str | None = typer.Option(None, "--rates", help="Run the simulator at these request rates (1,2,4,8 req/s) "
                                                           "or 'auto'."),
    num_requests: int = typer.Option(200, "--num-requests", help="Requests per simulated rate."),
    prompt_tokens: str | None = typer.Option(None, "--prompt-tokens", help="Prompt length in the sweep (default: "
                                                                           "--context)."),
    output_tokens: int = typer.Option(256, "--output-tokens", help="Output length in the sweep, tokens."),
    seed: int = typer.Option(0, "--seed", help="Seed for arrivals and acceptance draws."),
    target: TargetFlags = TargetFlags(),
    as_json: bool = JSON_OPT,
    plot: Path | None = typer.Option(None, "--plot", help="Also draw the figure to FILE (.png, .svg or .pdf); refuses "
                                                          "to overwrite without --force."),
    force: bool = typer.Option(False, "--force", help="Allow --plot to overwrite an existing file."),
) -> None:
    """Speculative decoding: expected tokens per round, the gain at low load, the flip concurrency, and a request-rate
    sweep."""
    from kvledger.analyses.judgments.spec_decode_summary import analyse_spec_decode, make_draft
    from kvledger.analyses.serving.plan_pricing import priced_settings
    from kvledger.cli.outputs import refuse_lone_force
    from kvledger.units import parse_tokens

    refuse_lone_force(force, {"--plot": plot})
    check_plot_path(plot, force)
    spec, g, settings = target.load(model, gpu)
    pricing = target.pricing()
    settings = priced_settings(settings, g, pricing, spec)  # the fractions simulate plans with (plan_pricing.py)
    ctx = parse_tokens(context, what="--context")
    draft = make_draft(draft_model, draft_cost_fraction, spec)
    r = analyse_spec_decode(spec, g, settings, draft_tokens=draft_tokens, acceptance=acceptance, draft=draft,
                            context_tokens=ctx, flip_contexts=parse_token_list(flip_contexts, "--flip-contexts"),
                            pricing=pricing)
    wanted = _rates(rates)
    if wanted is not None:
        from kvledger.accounting.plan import build_plan
        from kvledger.analyses.judgments.spec_decode import SpecDecodeModel

        sm = SpecDecodeModel(build_plan(spec, g, settings, with_advice=False), draft, draft_tokens, acceptance, pricing)
        pt = parse_tokens(prompt_tokens, what="--prompt-tokens") if prompt_tokens else ctx
        r = replace(r, simulation=_sweep(sm, wanted, pt, output_tokens, num_requests, seed))
    _show(r, plot, as_json)


def _sweep(sm, rates: list[float] | str, prompt_tokens: int, output_tokens: int, num_requests: int, seed: int):
    """The simulator sweep (``spec_sim.run_spec_sweep``) of ``sm`` over ``rates`` (req/s, or "auto": ``auto_rates``)
    with ``num_requests`` requests of ``prompt_tokens`` + ``output_tokens`` tokens per rate."""
    from kvledger.analyses.judgments.spec_sim import auto_rates, run_spec_sweep

    rl = auto_rates(sm, prompt_tokens, output_tokens) if rates == "auto" else rates
    return run_spec_sweep(sm, rl, num_requests=num_requests, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          seed=seed)


def _show(r, plot: Path | None, as_json: bool) -> None:
    """Draw the figure to ``plot`` if asked, then print ``r`` as JSON or as tables."""
    from rich.console import Console

    if plot is not None:
        from kvledger.report.judgment_figures import spec_decode_figure

        save_plot(spec_decode_figure(r), plot)
    if as_json:
        typer.echo(strict_json.dumps(r.to_dict(), indent=2))
    else:
        _render(r, Console(emoji=False))


def register(app: typer.Typer) -> None:
    """Add ``spec-decode`` to the app."""
    app.command("spec-decode")(spec_decode)
