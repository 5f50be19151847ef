"""``kvledger models`` and ``kvledger gpus``: list the bundled catalogs with their figures and sources."""

from __future__ import annotations

import json

import typer

from kvledger.report.catalog_view import render_gpus, render_models

__all__ = ["register"]


def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Bundled model configs: parameters, KV bytes per token (bf16, TP 1) and layer kinds."""
    from rich.console import Console

    from kvledger.accounting.kvcache import kv_ledger
    from kvledger.catalog.models import bundled_models, load_model

    rows = []
    for bm in bundled_models():
        m = load_model(bm.hf_id)
        kv = kv_ledger(m, "auto", 1)
        rows.append({"hf_id": bm.hf_id, "aliases": [a for a in bm.aliases if a != bm.hf_id.lower()], "num_params": m.num_params,
                     "num_active_params": m.num_active_params, "kv_bytes_per_token": kv.bytes_per_token_model,
                     "state_bytes_per_seq": kv.state_bytes_per_seq, "layers": dict(m.layer_counts()),
                     "quantization": m.quant.method, "max_model_len": m.derived_max_model_len})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    render_models(rows, Console())


def gpus(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """GPU catalog: memory as CUDA reports it, HBM bandwidth, dense BF16/FP8 FLOP/s, ridge point, links."""
    from rich.console import Console

    from kvledger.catalog.gpus import gpu_catalog

    cat = gpu_catalog()
    if as_json:
        typer.echo(json.dumps([g.to_dict() for g in cat.values()], indent=2))
        return
    render_gpus(cat, Console())


def register(app: typer.Typer) -> None:
    """Add ``models`` and ``gpus`` to the app."""
    app.command("models")(models)
    app.command("gpus")(gpus)
