"""Published FP8-KV-against-16-bit measurements live in a catalog row (``catalog/data/fp8_kv_measurements.csv``) with
their source in the file; the FP8 KV analysis's notes cite the row (name, figure, unit), never an issue number."""

from __future__ import annotations

import pytest

from kvledger.analyses.judgments.fp8_verdict import fp8_notes
from kvledger.catalog.fp8_kv_measurements import fp8_kv_measurement, fp8_kv_measurements, fp8_kv_measurements_from_text
from kvledger.errors import ConfigError


def test_each_row_is_its_sources_figures():
    # vLLM 0.26.0, A100, Qwen3-8B, concurrency 8: TTFT 0.541/2.277/5.001/11.790 s auto, 0.569/2.332/5.132/12.206 s fp8;
    # prefill speed 0.541/0.569 − 1 = −4.92% … 2.277/2.332 − 1 = −2.36%
    pre = fp8_kv_measurement("vllm-a100-qwen3-8b-prefill")
    assert (pre.low_pct, pre.high_pct) == (-4.9, -2.4)
    assert (round((0.541 / 0.569 - 1) * 100, 1), round((2.277 / 2.332 - 1) * 100, 1)) == (-4.9, -2.4)
    # decode 227.8/227.3/228.2/219.2 tok/s auto, 228.8/238.6/232.2/231.3 fp8: +0.44% (1k) … +5.52% (16k)
    dec = fp8_kv_measurement("vllm-a100-qwen3-8b-decode")
    assert (dec.low_pct, dec.high_pct) == (0.4, 5.5)
    assert (round((228.8 / 227.8 - 1) * 100, 1), round((231.3 / 219.2 - 1) * 100, 1)) == (0.4, 5.5)
    # Hopper, Qwen3.5-35B-A3B-FP8, batch 1: e2e 726 with fp8 against 700: +3.7%
    assert fp8_kv_measurement("vllm-hopper-qwen3.5-35b-a3b-e2e").low_pct == round((726 / 700 - 1) * 100, 1) == 3.7
    # Arc Pro B50 TP 2: decode 9.9 against 15.9 tok/s at 32K (−37.7%), 6.2 against 9.0 at 64K (−31.1%)
    arc = fp8_kv_measurement("llm-scaler-arc-b50-qwen3.8-27b-decode")
    assert (arc.low_pct, arc.high_pct) == (round((9.9 / 15.9 - 1) * 100, 1), round((6.2 / 9.0 - 1) * 100, 1))
    assert all(m.source and m.as_of for m in fp8_kv_measurements())  # every row says where from and when
    assert dec.citation == ("fp8_kv_measurements.csv row vllm-a100-qwen3-8b-decode: decode speed (tok/s) +0.4 … +5.5 "
                            "% (FP8 KV against auto) (NVIDIA A100 80GB, Qwen/Qwen3-8B (bf16 weights), vLLM 0.26.0)")


def test_the_fp8_notes_cite_the_rows_not_the_issues():
    dm = type("DM", (), {"pb": type("PB", (), {"kv": type("KV", (), {"groups": []})()})()})()
    notes = " ".join(fp8_notes(None, dm))
    assert fp8_kv_measurement("vllm-a100-qwen3-8b-prefill").citation in notes
    assert fp8_kv_measurement("sglang-h200-fa3-decode").citation in notes
    assert "#" not in notes and "42058" not in notes and "30815" not in notes  # before: "vllm #42058", "sglang #30815"


def test_a_damaged_row_is_refused_naming_its_line():
    head = ("name,engine,gpu,model,setting,metric,fp8_change_low_pct,fp8_change_high_pct,unit,as_of,source,notes\n")
    for row, why in (("a,e,g,m,s,x,5,1,%,2026,src,", "low ≤ high"), ("a,e,g,m,s,x,1,,%,2026,src,", "or neither"),
                     ("a,e,g,m,s,x,-100,1,%,2026,src,", "a change in %"), ("a,e,g,m,s,x,1,2,%,2026,,", "a source")):
        with pytest.raises(ConfigError, match=why):
            fp8_kv_measurements_from_text(head + row)
    with pytest.raises(ConfigError, match="no row named 'nope'"):
        fp8_kv_measurement("nope")
