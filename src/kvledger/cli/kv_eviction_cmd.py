"""``kvledger kv-eviction``: how much memory token eviction actually frees in a paged KV cache, by where the survivors
sit."""

from __future__ import annotations

import typer

from kvledger import strict_json
from kvledger.cli.analysis_opts import (
    AVAIL_OPT,
    GPU_OPT,
    JSON_OPT,
    MAX_LEN_OPT,
    MODEL_ARG,
    TP_OPT,
    UTIL_OPT,
    VERSION_OPT,
    load_target,
)
from kvledger.report.kv_eviction_view import render_kv_eviction as _render

__all__ = ["register"]


def kv_eviction(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    evict: float | None = typer.Option(None, "--evict", help="Share of the sequence's tokens evicted, 0–1 (e.g. 0.9). "
                                       "Required, except with --layout sink-window --window W, which fixes the share "
                                       "instead (give one, not both)."),
    layout: str = typer.Option("scattered", "--layout", help="scattered, worst, sink-window or clustered."),
    sink_tokens: int = typer.Option(4, "--sink-tokens", help="sink-window: tokens kept at the start (StreamingLLM uses "
                                                             "4)."),
    window: str | None = typer.Option(None, "--window", help="sink-window: recent tokens kept, in place of --evict "
                                                             "(default: what --evict leaves)."),
    run_tokens: int = typer.Option(64, "--run-tokens", help="clustered: survivors per run, tokens."),
    context: str | None = typer.Option(None, "--context",
                                       help="Sequence length, tokens (default 32K or max_model_len)."),
    block_size: int | None = typer.Option(None, "--block-size", help="Tokens per KV block (default 16)."),
    seed: int = typer.Option(0, "--seed", help="Seed for the random survivor positions."),
    tp: int = TP_OPT, max_model_len: str | None = MAX_LEN_OPT, gpu_memory_utilization: float | None = UTIL_OPT,
    available_kv_memory: str | None = AVAIL_OPT, engine_version: str | None = VERSION_OPT, as_json: bool = JSON_OPT,
    quantization: str | None = typer.Option(None, "--quantization", "-q", help=(
        "vLLM --quantization fp8: an unquantized checkpoint's weights quantized to FP8 on load, so the KV pool the "
        "blocks come from is the FP8 plan's (as `kvledger plan -q fp8`).")),
) -> None:
    """KV eviction under a paged layout: empty blocks, memory actually freed, and which methods need attention
    scores."""
    from rich.console import Console

    from kvledger.analyses.judgments.kv_eviction_summary import analyse_kv_eviction
    from kvledger.units import parse_tokens

    spec, g, settings = load_target(model, gpu, tp=tp, max_model_len=max_model_len,
                                    gpu_memory_utilization=gpu_memory_utilization,
                                    available_kv_memory=available_kv_memory, block_size=block_size,
                                    engine_version=engine_version,
                                    quantization=quantization.lower() if quantization else None)
    r = analyse_kv_eviction(spec, g, settings, layout=layout.lower(), evict_fraction=evict,
                            context_tokens=parse_tokens(context, what="--context") if context else None,
                            sink_tokens=sink_tokens, window_tokens=parse_tokens(window,
                                                                                what="--window") if window else None,
                            run_tokens=run_tokens, seed=seed)
    if as_json:
        typer.echo(strict_json.dumps(r.to_dict(), indent=2))
    else:
        _render(r, Console(emoji=False))


def register(app: typer.Typer) -> None:
    """Add ``kv-eviction`` to the app."""
    app.command("kv-eviction")(kv_eviction)
