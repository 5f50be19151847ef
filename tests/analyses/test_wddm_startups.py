"""Public start-ups on Windows/WSL2 (the ``wddm`` marker in benchmarks/data/vllm_public_startups.csv and
sglang_public_startups.csv) replayed with the whole-board total and the display driver's hold, worked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.wddm import WDDM_HELD_MIB
from kvledger.analyses.doctor.public_startups import load_rows, replay_row
from kvledger.analyses.doctor.sglang_startups import replay_sglang_row

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data"
VLLM = {r["id"]: r for r in load_rows(DATA / "vllm_public_startups.csv")}
SGLANG = {r["id"]: r for r in load_rows(DATA / "sglang_public_startups.csv")}
MIB, GIB = 2**20, 2**30
HOLD = WDDM_HELD_MIB[1] * MIB  # 450 MiB at this commit (wddm.py)


def _term(replay, name):
    return next(t for t in replay.terms if t.term == name)


def test_p19_free_memory_at_start_up_on_an_rtx_4090_under_wsl2():
    # enginrect/llmso (vLLM 0.27.1, RTX 4090 under WSL2): "Free memory on device (22.45/23.99 GiB) on startup".
    # 23.99 GiB printed = the board, 24,564 MiB = 25,757,220,864 B. Plan: board − hold (450 MiB) − this process
    # (0.42 GiB) = 24,834,390,098 B = 23.13 GiB; printed 22.45: the point is 0.68 GiB high (+3.0 %), inside the
    # range 21.74 (hold 1,536 MiB, process 0.75 GiB) to 23.57 GiB (300 MiB, 0.13 GiB).
    x = replay_row(VLLM["P19"], ROOT)
    t = _term(x, "free at start-up")
    assert t.predicted == pytest.approx((24_564 * MIB - HOLD - 0.42 * GIB) / GIB)
    assert t.printed == 22.45 and t.inside
    assert t.rel_error == pytest.approx(0.0302, abs=5e-4)
    # the printed KV memory's own pool: 19.06 GiB ÷ 196,608 B per 16-token block (24 layers × 2 × 2 heads × 64 × 2 B
    # × 16) → the printed 1,665,392 tokens = 104,087 blocks, inside what 19.06 ± 0.005 GiB allows
    assert next(t for t in x.from_printed if t.term.startswith("blocks")).inside


def test_sg09_free_before_load_and_pool_under_wsl2():
    # jerryzsj/my-deepseek-r1 (SGLang 0.4.2.post1, RTX 3090 under Docker Desktop): "avail mem" before load 22.76 GiB.
    # Plan: board 24,576 MiB (24.00 GiB) − 0.42 GiB held before load − the 450 MiB hold = 23.14 GiB (+1.7 %); the
    # pool then follows at × 0.88: 6.00 GiB K + V planned against 5.64 printed (+6.4 %, inside 4.65–6.45).
    x = replay_sglang_row(SGLANG["SG09"], ROOT)
    pre = _term(x, "free before load")
    assert pre.predicted == pytest.approx((24_576 * MIB - 0.42 * GIB - HOLD) / GIB, abs=1e-6) and pre.inside
    kv = _term(x, "available KV")
    assert kv.printed == pytest.approx(5.64) and kv.inside and kv.rel_error == pytest.approx(0.064, abs=0.002)
