"""``kvledger doctor`` on a vLLM /metrics scrape (``analyses.doctor.scrape``): the reading in words."""

from __future__ import annotations

from typing import Any

__all__ = ["render_doctor_scrape"]


def _pool_lines(pool: dict[str, Any]) -> list[str]:
    if not pool.get("num_gpu_blocks"):
        return ["KV pool: the scrape has no vllm:cache_config_info num_gpu_blocks label"]
    out = [f"KV pool: {pool['num_gpu_blocks']:,} blocks × {pool['block_size']} tokens = {pool['token_slots']:,} token "
           f"slots ({pool['source']})"]
    if pool.get("kv_bytes"):
        out.append(f"  = {pool['kv_bytes'] / 2**30:,.2f} GiB of KV ({pool['num_gpu_blocks']:,} blocks × "
                   f"{pool['bytes_per_block']:,} B per block, the model's KV bytes per block from the ledger)")
    plan = pool.get("plan")
    if plan:
        out.append(f"  ledger plan (vLLM {plan['engine_version']} rules; --engine-version to pick): "
                   f"{plan['num_gpu_blocks']:,} blocks = "
                   f"{plan['token_slots']:,} token slots; the scrape's pool is {pool['scrape_vs_plan_pct']:+.1f}% of "
                   "the plan's blocks (scrape − plan) ÷ plan")
    elif pool.get("plan_error"):
        out.append(f"  ledger plan: {pool['plan_error']}")
    return out


def render_doctor_scrape(rep: dict[str, Any]) -> None:
    """Print the scrape's reading: preemptions and what they mean, the pool against the plan, usage, queue, advice."""
    from rich.console import Console
    from rich.markup import escape

    con, s = Console(highlight=False, emoji=False), rep["scrape"]
    con.print(f"[bold]kvledger doctor[/] {escape(s['source'])}: a vLLM Prometheus /metrics scrape"
              + (f" (model_name {escape(s['model_name'])})" if s["model_name"] else ""))
    con.print(f"preemptions: {escape(rep['preemptions']['message'])}")
    for line in _pool_lines(rep["pool"]):
        con.print(escape(line))
    usage = ", ".join(f"{k} {v:.1f}%" for k, v in rep["kv_usage_pct"].items())
    con.print(f"KV usage now: {usage or 'not in the scrape'}"
              + (f" ({rep['kv_usage_metric']}, a fraction 0–1 × 100)" if rep["kv_usage_metric"] else "")
              + f"; requests running {rep['running'] if rep['running'] is not None else '?'}, waiting "
              f"{rep['waiting'] if rep['waiting'] is not None else '?'} (vllm:num_requests_running/_waiting)")
    if (prefix := rep.get("prefix_cache") or {}).get("message"):
        con.print(f"prefix cache: {escape(prefix['message'])}")
    if rep["advice"]:
        con.print(f"advice: {escape(rep['advice'])}")
        for line in rep.get("advice_flags", []):  # each remedy as the flag vllm serve takes, as doctor's options
            con.print(f"  → {escape(line['flag'])}: {escape(line['why'])}")
        con.print(f"rule: {escape(rep['preemptions']['rule'])}")
    for note in rep["notes"]:
        con.print(f"note: {escape(note)}")
