"""``kvledger models`` and ``kvledger gpus``: list the bundled catalogs with their figures and sources."""

from __future__ import annotations

import json

import typer

__all__ = ["register"]


def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Bundled model configs: parameters, KV bytes per token (bf16, TP 1) and layer kinds."""
    from rich.console import Console
    from rich.table import Table

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
    t = Table(title="Bundled models (real config.json files; provenance: catalog/data/models/SOURCES.md)", title_justify="left")
    for c in ("model", "params", "active", "KV B/token (bf16)", "state/seq", "layers", "weights", "max len"):
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(r["hf_id"], f"{r['num_params'] / 1e9:,.2f}B", f"{r['num_active_params'] / 1e9:,.2f}B", f"{r['kv_bytes_per_token']:,.0f}",
                  f"{r['state_bytes_per_seq'] / 2**20:,.1f} MiB" if r["state_bytes_per_seq"] else "",
                  ", ".join(f"{n} {k}" for k, n in r["layers"].items()), r["quantization"], f"{r['max_model_len']:,}")
    Console().print(t)


def gpus(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """GPU catalog: memory as CUDA reports it, HBM bandwidth, dense BF16/FP8 FLOP/s, ridge point, links."""
    from rich.console import Console
    from rich.table import Table

    from kvledger.catalog.gpus import gpu_catalog
    from kvledger.units import GiB

    cat = gpu_catalog()
    if as_json:
        typer.echo(json.dumps([g.to_dict() for g in cat.values()], indent=2))
        return
    t = Table(title="GPU catalog (catalog/data/gpus.csv; dense tensor peaks, not sparse headlines)", title_justify="left")
    for c in ("id", "name", "CUDA total GiB", "nvidia-smi MiB", "HBM TB/s", "BF16 TFLOP/s", "FP8 TFLOP/s", "ridge FLOP/B", "scale-up link"):
        t.add_column(c, overflow="fold")
    for g in cat.values():
        t.add_row(g.gpu_id, g.name, f"{g.memory_bytes / GiB:,.2f}", f"{g.nvidia_smi_mib:,}" if g.nvidia_smi_mib else "",
                  f"{g.hbm_bandwidth_bytes_per_s / 1e12:g}", f"{g.bf16_flops_per_s / 1e12:g}",
                  f"{g.fp8_flops_per_s / 1e12:g}" if g.fp8_flops_per_s else "", f"{g.ridge_flops_per_byte():,.0f}",
                  f"{g.interconnect} {g.interconnect_bytes_per_s / 1e9:g} GB/s" if g.interconnect_bytes_per_s else g.interconnect)
    Console().print(t)


def register(app: typer.Typer) -> None:
    """Add ``models`` and ``gpus`` to the app."""
    app.command("models")(models)
    app.command("gpus")(gpus)
