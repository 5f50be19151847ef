"""The plan's terminal view: figures printed as computed (what the third new-user trial found)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config
from kvledger.report.plan_view import render_plan
from kvledger.units import fmt_bytes

DSV4 = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v4.json"


def test_fractional_byte_counts_are_not_cut():
    # 584 B / 128 tokens = 4.5625 B per token per layer; × 23 layers = 104.9375 B: printed 104.94 B (it was "104 B")
    assert fmt_bytes(23 * 584 / 128) == "104.94 B"
    assert fmt_bytes(3684.9375) == "3.6 KiB (3,684.94 B)"
    assert fmt_bytes(131072) == "128 KiB (131,072 B)" and fmt_bytes(1000) == "1,000 B"


def test_dsv4_kv_table_prints_its_ratio_128_layers_per_token_bytes():
    dsv4 = parse_config(json.loads(DSV4.read_text()), source="deepseek_v4 default config")
    plan = build_plan(dsv4, get_gpu("H200"), make_settings(tp=8, max_model_len=8192))
    con = Console(record=True, width=400)
    render_plan(plan, con, verbose=True)
    row = next(ln for ln in con.export_text().splitlines() if ln.startswith("│ 23 mla"))
    assert "│ 104.94 B " in row
