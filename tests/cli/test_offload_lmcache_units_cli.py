"""LMCache's tier as `offload` and `simulate` print it: its own rule text (not the native connector's), and the tier
table and the sessions table counting the host and disk tiers in the same unit, named (256-token chunks)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "400"})
L8 = "meta-llama/Llama-3.1-8B"
LMCACHE = ["--kv-offloading-size", "64GiB", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "1TiB"]


def _out(*args: str) -> str:
    r = runner.invoke(app, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout


def test_lmcache_rule_text_is_lmcaches_own():
    out = " ".join(_out("offload", L8, "--gpu", "H100", *LMCACHE, "--sessions", "4").split())
    assert "LMCache (--kv-offloading-backend lmcache): whole 256-token chunks of the prompt are stored" in out
    assert "no partial last chunk, no decoded tokens" in out and "below LMCache's CPU chunks" in out
    # the native OffloadingConnector's bullet (write-through blocks, WAITING_FOR_REMOTE_KVS) is not LMCache's
    assert "vLLM OffloadingConnector:" not in out and "WAITING_FOR_REMOTE_KVS" not in out
    native = " ".join(_out("plan", L8, "--gpu", "H100", "--kv-offloading-size", "64GiB").split())
    assert "vLLM OffloadingConnector: every newly computed full" in native and "LMCache (" not in native


def test_tier_table_and_sessions_table_count_the_same_chunks():
    # host: 64 GiB // (256 tokens × 131,072 B/token) = 2,048 chunks = 524,288 tokens (the tier table used to say
    # 32,768 "blocks" of 16 tokens); NVMe: 1 TiB // 131,072 B = 8,388,608 tokens = 32,768 chunks of 256 tokens (it
    # used to say 524,288 blocks) — the units the simulated tiers count
    d = json.loads(_out("offload", L8, "--gpu", "H100", *LMCACHE, "--sessions", "4", "--json"))
    host, nvme = d["kv_tiers"]["tiers"][1], d["kv_tiers"]["tiers"][2]
    assert (host["unit_name"], host["unit_tokens"], host["capacity_tokens"]) == ("chunk", 256, 524_288)
    assert (nvme["unit_name"], nvme["unit_tokens"], nvme["capacity_tokens"]) == ("chunk", 256, 8_388_608)
    assert d["tier_stats"]["host_capacity_units"] == 524_288 // 256 == 2048
    assert d["tier_stats"]["disk"]["capacity_units"] == 8_388_608 // 256 == 32_768
    assert d["host_unit"] == {"name": "chunk", "tokens": 256}
    out = _out("offload", L8, "--gpu", "H100", *LMCACHE, "--sessions", "4")
    assert "2,048 chunks (256)" in out and "32,768 chunks (256)" in out
    assert "host tier chunks held (peak / capacity; chunks of 256 tokens, as the tier table's units column)" in out
    assert "/ 2,048 (524,288 tokens)" in out and "disk chunks stored / evicted / capacity" in out
    # simulate's per-tier table names the same unit
    sim = _out("simulate", L8, "--gpu", "H100", "--workload", "agent", "--sessions", "4", *LMCACHE)
    assert "/ 2,048 chunks × 256 tokens" in sim and "— / 32,768 chunks × 256 tokens" in sim
