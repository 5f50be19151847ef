"""Terminal views of ``kvledger models``, ``kvledger gpus`` and ``kvledger prices``: the bundled catalogs as tables,
narrower on narrow terminals (``--json`` has everything)."""

from __future__ import annotations

from typing import Any

__all__ = ["render_models", "render_gpus", "render_prices"]


def render_models(rows: list[dict[str, Any]], con: Any) -> None:
    """The bundled models, one row each (the rows ``kvledger models --json`` prints)."""
    from kvledger.report.tables import LedgerTable as Table

    wide = con.width >= 130
    t = Table(title="Bundled models (real config.json files; provenance: catalog/data/models/SOURCES.md)",
              title_justify="left")
    cols = ["model", "params", "active", "KV B/token"] + (["state/seq", "layers", "quantization",
                                                           "max len"] if wide else [])
    for i, c in enumerate(cols):
        t.add_column(c, no_wrap=i == 0, overflow="fold")
    for r in rows:
        cells = {"model": "\n".join([r["hf_id"], *(f"  = {t}" for t in r.get("twins", []))]),
                 "params": f"{r['num_params'] / 1e9:,.2f}B",
                 "active": f"{r['num_active_params'] / 1e9:,.2f}B",
                 "KV B/token": f"{r['kv_bytes_per_token']:,.0f}" + ("†" if r.get("windowed_layers") else ""),
                 "state/seq": f"{r['state_bytes_per_seq'] / 2**20:,.1f} MiB" if r["state_bytes_per_seq"] else "",
                 "layers": r.get("layer_kinds") or ", ".join(f"{n} {k}" for k, n in r["layers"].items()),
                     "quantization": r["quantization"] if r["quantization"] != "none" else f"none "
                         f"({r.get('dtype', 'config dtype')})",
                 "max len": _max_len_cell(r)}
        t.add_row(*(cells[c] for c in cols))
    t.caption = ("model: its Hub id, then (=) the other releases of the same architecture it stands for; each answers "
                 "to its name without the organisation too, in any case; KV B/token: bf16, TP 1, all KV layers; "
                 + _windowed_legend(rows) + (
        "state/seq: Mamba/linear-attention state per sequence, in the dtype plan uses (the latest vLLM's: "
        "Nemotron-H's SSM state in float32); quantization: the checkpoint's weight quantization "
        "(none: "
        "weights in the config's dtype); max len: the default max_model_len, tokens, by vLLM 0.33's rule (plan's "
        "default), with the other engines' and versions' where they differ" if wide else
        "a terminal of 130 columns or more (or --json) adds state, layers, quantization and max length"))
    con.print(t)


def _max_len_cell(r: dict[str, Any]) -> str:
    """The default max_model_len by vLLM 0.33's rule, and each other rule's figure where it differs."""
    by = r.get("max_model_len_by_engine") or {}
    other = [f"{k}: {v:,}" for k, v in by.items() if v != r["max_model_len"]]
    return f"{r['max_model_len']:,}" + (f" ({'; '.join(other)})" if other else "")


def _windowed_legend(rows: list[dict[str, Any]]) -> str:
    """The † legend of a table with sliding-window (hybrid) models, with one worked example; "" without one."""
    win = [r for r in rows if r.get("windowed_layers")]
    if not win:
        return ""
    hybrid = [r for r in win if r["growing_bytes_per_token"]] or win
    r = min(hybrid, key=lambda x: x["window_tokens"])  # the example whose figure overstates the most
    return (f"†: some or all layers are sliding-window or chunked — the figure counts every KV layer for each "
            f"token, the full-attention worst case, but a windowed layer holds at most its window, so × context "
            f"overstates a long request (e.g. {r['hf_id']}: {r['windowed_layers']} layers hold at most "
            f"{r['window_tokens']:,} tokens; past that a request grows by {r['growing_bytes_per_token']:,.0f} B/token; "
            "kvledger plan gives bytes per request); ")


def render_gpus(cat: dict[str, Any], con: Any) -> None:
    """The GPU catalog, one row per GPU."""
    from kvledger.report.tables import LedgerTable as Table
    from kvledger.units import GiB

    wide = con.width >= 130  # narrow terminals get the figures that matter for sizing; --json has everything
    t = Table(title="GPU catalog (catalog/data/gpus.csv; dense tensor peaks, not sparse headlines)",
              title_justify="left")
    # narrow: the source number follows the id
    cols = ["id"] + (["name"] if wide else []) + ["dev GiB"] + (["smi MiB"] if wide else []) + ["TB/s",
        "BF16 TF", "FP8 TF", "ridge"] + (["scale-up link", "src"] if wide else [])
    for i, c in enumerate(cols):
        t.add_column(c, no_wrap=i == 0, overflow="fold")
    sources: list[str] = []
    for g in cat.values():
        src = f"[{_source_number(sources, g)}]"
        row = {"id": g.gpu_id if wide else f"{g.gpu_id} {src}", "name": g.name,
               "dev GiB": f"{g.memory_bytes / GiB:,.2f}",
               "smi MiB": f"{g.nvidia_smi_mib:,}" if g.nvidia_smi_mib else "",
               "TB/s": f"{g.hbm_bandwidth_bytes_per_s / 1e12:g}",
               "BF16 TF": (f"{g.bf16_flops_per_s / 1e12:g}" if g.bf16_supported
                           else f"no bf16 (FP16 {g.bf16_flops_per_s / 1e12:g})"),
               "FP8 TF": f"{g.fp8_flops_per_s / 1e12:g}" if g.fp8_flops_per_s else "",
               "ridge": f"{g.ridge_flops_per_byte():,.0f}",
               "scale-up link": (f"{g.interconnect} {g.interconnect_bytes_per_s / 1e9:g} GB/s"
                                 if g.interconnect_bytes_per_s else g.interconnect),
               "src": src}
        t.add_row(*(row[c] for c in cols))
    t.caption = (
        "dev GiB: device total as the runtime reports it (CUDA on NVIDIA, HIP on AMD), measured in a log or "
        "derived from the smi total (nvidia-smi, rocm-smi) less a reserve (each row's memory_source in --json; "
        "a measured HIP total can exceed rocm-smi's: MI300X HIP 196,592 MiB, rocm-smi 196,288 MiB); smi MiB: "
        "nvidia-smi's total on NVIDIA, rocm-smi's on AMD (device_arch in --json: sm90, gfx942…); "
        "TB/s: HBM bandwidth; TF: dense TFLOP/s; ridge: FLOP per byte "
        "(BF16 ÷ TB/s); no bf16: below compute capability 8.0 vLLM serves in float16 (--dtype half), at the FP16 rate "
        "shown; " + ("src" if wide else "\\[n] after the id") + ": the row's source below"
    )
    con.print(t)
    con.print("sources (gpus.csv's datasheet_ref keys, with the row's confidence; each key's address and the "
              "nvidia-smi evidence: catalog/data/gpus.SOURCES.md): "
              + "; ".join(f"[{i}] {s}" for i, s in enumerate(sources, 1)), markup=False, highlight=False)


def _source_number(sources: list[str], g: Any) -> int:
    """The 1-based number of ``g``'s source (its datasheet_ref keys and confidence) in ``sources``, added when new."""
    ref = f"{' + '.join(g.datasheet_ref.split(';'))} ({g.confidence})"
    if ref not in sources:
        sources.append(ref)
    return sources.index(ref) + 1


def render_prices(api: list[Any], gpus: list[Any], con: Any, *, show_api: bool, show_gpu: bool,
                  tiers: list[tuple[Any, bool]] | None = None) -> None:
    """The API, GPU rental and KV-tier price rows (``ApiPrice``/``GpuPrice``/(``TierPrice``, the default of its
    kind)), each with its as-of date, confidence and source as the CSV gives them (a long source folds over several
    lines; ``--json`` adds the notes)."""
    from kvledger.report.tables import ledger_table

    if show_api:
        t = ledger_table("API prices, USD per 1M tokens (catalog/data/api_prices.csv; --api PROVIDER:MODEL)",
                         "provider:model", "input", "cached input", "output", "batch off", "as of", "confidence",
                         "source")
        for r in api:
            t.add_row(r.key, f"{r.input_usd_per_mtok:g}",
                      "—" if r.cached_input_usd_per_mtok is None else f"{r.cached_input_usd_per_mtok:g}",
                      f"{r.output_usd_per_mtok:g}", "—" if r.batch_discount is None else f"{r.batch_discount:.0%}",
                      r.as_of, r.confidence, r.source)
        con.print(t)
    if show_gpu:
        t = ledger_table("GPU rental prices (catalog/data/gpu_prices.csv; --gpu GPU --gpu-provider PROVIDER "
                         "[--instance TYPE])",
                         "provider", "GPU", "instance", "GPUs", "USD/GPU-h", "pricing", "as of", "confidence",
                         "source")
        for r in gpus:
            t.add_row(r.provider, r.gpu_id, r.instance_type, f"{r.gpus_per_instance}", f"{r.usd_per_gpu_hour:,.2f}",
                      r.pricing_model, r.as_of, r.confidence, r.source)
        con.print(t)
    if tiers is not None:
        t = ledger_table("KV-tier prices, USD per GiB-month (catalog/data/tier_prices.csv; the default of a kind is "
                         "its cheapest row, used when --host-memory-usd-per-gib-month / --nvme-usd-per-gib-month is "
                         "not given)", "kind", "provider", "region", "USD/GiB-month", "default", "basis", "as of",
                         "confidence", "source")
        for r, default in tiers:
            t.add_row(r.kind, r.provider, r.region, f"{r.usd_per_gib_month:g}", "yes" if default else "", r.basis,
                      r.as_of, r.confidence, r.source)
        con.print(t)
    con.print("[dim]source and confidence as the catalog rows give them; each row's notes are in --json; prices are "
              "list prices on the date shown[/]")
