"""``kvledger models``, ``kvledger gpus`` and ``kvledger prices``: list the bundled catalogs with their figures and
sources."""

from __future__ import annotations

from typing import Any

import typer

from kvledger import strict_json
from kvledger.report.catalog_view import render_gpus, render_models, render_prices

__all__ = ["register"]


def _windowed(kv: Any) -> dict[str, Any]:
    """A hybrid model's windowed layers (sliding-window or chunked attention: ``window_tokens``, the largest window,
    tokens; ``windowed_layers``, count) and ``growing_bytes_per_token``, what a request adds per token past them (the
    full-context layers, TP 1); {} for a model without windowed layers."""
    win = [g for g in kv.groups if g.window_tokens]
    if not win:
        return {}
    return {"windowed_layers": sum(g.num_layers for g in win), "window_tokens": max(g.window_tokens for g in win),
            "growing_bytes_per_token": kv.growing_bytes_per_token}


def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Bundled model configs: parameters, KV bytes per token (bf16, TP 1), recurrent state per sequence (in the dtype
    the latest vLLM keeps it in, as plan) and layer kinds."""
    from rich.console import Console

    from kvledger.accounting.kvcache import kv_ledger
    from kvledger.accounting.vllm_rules import LATEST, parse_version
    from kvledger.accounting.vllm_ssm_dtype import ssm_dtype_rule
    from kvledger.catalog.layer_words import layer_kinds_text
    from kvledger.catalog.models import bundled_models, load_model

    rows = []
    for bm in bundled_models():
        m = load_model(bm.hf_id)
        ssm, _ = ssm_dtype_rule(m, parse_version(LATEST), "auto")  # the state dtype `plan` uses (Nemotron-H: float32)
        kv = kv_ledger(m, "auto", 1, mamba_ssm_cache_dtype=ssm)
        by = m.max_model_len_by_engine  # each engine's default rule (vLLM's two YaRN rules, SGLang's), tokens
        rows.append({"hf_id": bm.hf_id, "aliases": [a for a in bm.aliases if a != bm.hf_id.lower()],
                     "twins": list(bm.twins),
                     "num_params": m.num_params,
                     "num_active_params": m.num_active_params, "kv_bytes_per_token": kv.bytes_per_token_model,
                     "state_bytes_per_seq": kv.state_bytes_per_seq, "layers": dict(m.layer_counts()),
                     "layer_kinds": layer_kinds_text(m),
                     "quantization": m.quant.method, "dtype": m.dtype, "max_model_len": by["vllm 0.33"],
                     "max_model_len_rule": "vLLM 0.33 (plan's default engine and version)",
                     "max_model_len_by_engine": by,
                     **_windowed(kv)})
    if as_json:
        typer.echo(strict_json.dumps(rows, indent=2))
        return
    render_models(rows, Console(emoji=False))


def gpus(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """GPU catalog: memory as the runtime (CUDA, HIP) reports it, HBM bandwidth, dense BF16/FP8 FLOP/s, ridge point,
    links."""
    from rich.console import Console

    from kvledger.catalog.gpus import gpu_catalog
    from kvledger.catalog.vendor_words import gpu_json

    cat = gpu_catalog()
    if as_json:
        typer.echo(strict_json.dumps([gpu_json(g) for g in cat.values()], indent=2))
        return
    render_gpus(cat, Console(emoji=False))


def prices(
    kind: str = typer.Option("all", "--kind", help="api, gpu, tier (KV-tier host memory / NVMe) or all"),
    provider: str | None = typer.Option(None, "--provider", help="only this provider's rows (case-insensitive), e.g. "
                                                                 "OpenAI, Nebius"),
    gpu: str | None = typer.Option(None, "--gpu", help="only rental rows for this GPU (catalog name or alias, e.g. "
                                                       "H100)"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """API, GPU rental and KV-tier price rows (USD per 1M tokens; USD per GPU-hour; USD per GiB-month), with their
    date and source: what --api, --gpu-provider and the tier line items pick from."""
    from dataclasses import asdict

    from rich.console import Console

    from kvledger.catalog.prices import api_prices, find_gpu_prices, gpu_prices
    from kvledger.errors import InputError

    if kind not in ("api", "gpu", "tier", "all"):
        raise InputError(f"--kind must be api, gpu, tier or all, got {kind!r}")
    if kind == "tier" and gpu:
        raise InputError("--gpu filters the GPU rental rows; the KV-tier rows (--kind tier) are per GiB-month, not "
                         "per GPU: drop --gpu, or use --kind gpu")
    from kvledger.catalog.price_names import check_provider
    from kvledger.catalog.tier_prices import default_tier_price, tier_prices

    tables = {"api": api_prices, "gpu": gpu_prices, "tier": tier_prices}
    check_provider(provider, (r.provider for k, rows in tables.items() if kind in (k, "all") for r in rows()),
                   "price provider" if kind == "all" else f"{kind} price provider")
    want = (provider or "").lower()
    api = [r for r in api_prices() if not want or r.provider.lower() == want] if kind in ("api", "all") else []
    if kind in ("gpu", "all"):
        rows = find_gpu_prices(_price_gpu_key(gpu), own_price=False) if gpu else list(gpu_prices())
        gpus = [r for r in rows if not want or r.provider.lower() == want]
        if gpu and want and not gpus:  # both filters valid, but no row has both: say which rows each one has
            _none_match(provider, gpu, rows)
    else:
        gpus = []

    tiers = [r for r in tier_prices() if not want or r.provider.lower() == want] if kind in ("tier", "all") else []
    defaults = {default_tier_price(k) for k in ("host", "nvme")}
    if as_json:
        typer.echo(strict_json.dumps({"api": [{**asdict(r), "key": r.key} for r in api],
                                      "gpu": [{**asdict(r), "key": r.key} for r in gpus],
                                      "tier": [{**asdict(r), "key": r.key, "default": r in defaults} for r in tiers]},
                                     indent=2))
        return
    render_prices(api, gpus, Console(highlight=False, emoji=False), show_api=kind in ("api", "all"),
                  show_gpu=kind in ("gpu", "all"),
                  tiers=[(r, r in defaults) for r in tiers] if kind in ("tier", "all") else None)


def _none_match(provider: str, gpu: str, gpu_rows: list) -> None:
    """Refuse a --provider and --gpu no GPU rental row has together, with the GPUs the provider's rows rent and the
    providers that rent the GPU."""
    from kvledger.catalog.prices import gpu_prices
    from kvledger.errors import InputError

    theirs = sorted({r.gpu_name for r in gpu_prices() if r.provider.lower() == provider.lower()})
    who = sorted({r.provider for r in gpu_rows})
    raise InputError(f"no GPU rental row matches --provider {provider} --gpu {gpu}: {provider}'s rows rent "
                     f"{', '.join(theirs) or 'no GPU'}; {gpu} is rented by {', '.join(who) or 'no provider'} "
                     f"(kvledger prices --kind gpu --gpu {gpu} lists them)")


def _price_gpu_key(name: str) -> str:
    from kvledger.catalog.gpus import get_gpu
    from kvledger.errors import UnknownNameError

    try:
        return get_gpu(name).gpu_id
    except UnknownNameError:
        return name


def register(app: typer.Typer) -> None:
    """Add ``models``, ``gpus`` and ``prices`` to the app."""
    app.command("models")(models)
    app.command("gpus")(gpus)
    app.command("prices")(prices)
