"""A model that keeps no KV cache of its own (a draft whose every layer reads its target's K/V): plan, JSON, simulate.

vLLM builds no KV cache group for it (``kv_cache_utils.get_kv_cache_groups`` returns [] for an empty spec), skips the
memory profile and gives the cache 0 bytes (``v1/engine/core.py : EngineCore._initialize_kv_caches``, "Attention free
models"), keeps one null block (``get_kv_cache_config_from_groups``: ``KVCacheConfig(num_blocks=1)``) and prints no KV
cache size or maximum concurrency (``_report_kv_cache_config`` runs only with groups): max_num_seqs alone limits it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config
from kvledger.cli.main import app
from kvledger.errors import InputError

CFG = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "gemma4_unified_assistant.json"
runner = CliRunner(env={"COLUMNS": "250"})


def _plan(**kw):
    spec = parse_config(json.loads(CFG.read_text()), source="gemma4_unified_assistant")
    return build_plan(spec, get_gpu("H100-SXM"), PlanSettings(**kw))


def test_plan_has_no_pool_and_max_num_seqs_limits_concurrency():
    p = _plan(max_num_seqs=256, contexts=[2048, 131072])
    m = p.memory
    assert p.kv.bytes_per_token == 0 and p.kv.groups == () and p.layout.groups == ()
    assert m.kv_free and m.available_kv_bytes == 0 and m.num_gpu_blocks == 1 and m.usable_blocks == 0 and m.pool_tokens == 0
    assert m.printed_lines == ()  # vLLM prints no "GPU KV cache size" / "Maximum concurrency" line without KV groups
    assert m.fits and m.headroom_bytes > 0
    for r in p.concurrency:  # every context: 256 requests (max_num_seqs), never an infinite or a 0 from 0 ÷ 0
        assert (r.blocks_per_request, r.bytes_per_request, r.max_requests, r.max_running, r.max_concurrency) == (0, 0.0,
            256, 256, 256.0)
    assert p.advice.verdict == "fits" and "max_num_seqs = 256" in p.advice.message
    assert p.waterfall == ()  # concurrency by memory term means nothing without KV per request


def test_weights_above_the_budget_still_do_not_fit():
    # the deductions still apply: at gpu_memory_utilization 0.05 (4.0 GiB of 79.2) the 5.6 GiB of weights do not fit
    p = _plan(gpu_memory_utilization=0.05)
    assert not p.memory.fits and p.advice.verdict == "weights_do_not_fit"


def test_cli_plan_text_and_strict_json():
    r = runner.invoke(app, ["plan", str(CFG), "--gpu", "H100-SXM", "--max-num-seqs", "128"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    for text in ("KV per token: 0 B per GPU", "draft model", "no KV pool", "only max_num_seqs = 128 limits it"):
        assert text in out, text
    assert "blocks of 16 tokens" not in out and "inf" not in out.lower().replace("info", "")
    r = runner.invoke(app, ["plan", str(CFG), "--gpu", "H100-SXM", "--max-num-seqs", "128", "--json"])
    assert r.exit_code == 0
    d = json.loads(r.stdout,
                   parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"non-strict JSON constant {c}")))
    assert d["model"]["kv_bytes_per_token"] == 0 and d["memory"]["kv_free"] is True
    assert d["memory"]["available_kv_bytes"] == 0 and d["memory"]["num_gpu_blocks"] == 1
    assert all(c["max_concurrency"] == 128.0 and c["max_requests"] == 128 for c in d["concurrency"])
    assert all(math.isfinite(c["max_concurrency"]) for c in d["concurrency"])
    r = runner.invoke(app, ["plan", str(CFG), "--gpu", "H100-SXM", "--verbose"])
    assert r.exit_code == 0 and "none printed (no KV)" in " ".join(r.stdout.split())


def test_simulate_and_other_engines_refuse_clearly():
    # the simulator schedules by KV blocks: refused with exit status 2 and a one-paragraph reason, no traceback
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "simulate", str(CFG), "--gpu", "H100-SXM",
                           "--trace", "azure-conv"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "keeps no KV cache of its own" in " ".join(proc.stderr.split())
    # their rules for such a model were not read: an InputError (exit 2), not a guess
    for engine in ("sglang", "trtllm"):
        r = runner.invoke(app, ["plan", str(CFG), "--gpu", "H100-SXM", "--engine", engine])
        assert isinstance(r.exception, InputError) and "keeps no KV cache or state of its own" in str(r.exception)


def test_a_pipeline_stage_without_a_kv_layer_leaves_one_block():
    # Gemma-3n's default text config: 35 layers, the last num_kv_shared_layers = 15 (20–34) read earlier layers' K/V.
    # At --pp 4 vLLM's get_pp_indices gives layers 0–8, 9–17, 18–26 and 27–34: the last stage holds only shared layers,
    # so its worker has no KV cache group and num_blocks = 1, and the engine keeps the smallest count over workers
    # (v1/core/kv_cache_planning.py get_kv_cache_configs): 1 block, none usable. The plan says so (exit status 3).
    cfg = CFG.parent / "gemma3n_text.json"
    spec = parse_config(json.loads(cfg.read_text()), source="gemma3n_text")
    p = build_plan(spec, get_gpu("H100-SXM"), PlanSettings(pp=4), with_roofline=False)
    stages = [(st["layers"], st["binds"]) for st in p.memory.stages]
    assert stages == [([0, 8], False), ([9, 17], False), ([18, 26], False), ([27, 34], True)]
    assert not p.memory.kv_free and p.memory.num_gpu_blocks == 1 and p.memory.usable_blocks == 0 and not p.fits
    assert p.advice.verdict == "no_kv_pool" and all(r.max_requests == 0 for r in p.concurrency)
    r = runner.invoke(app, ["plan", str(cfg), "--gpu", "H100-SXM", "--pp", "4"])
    assert r.exit_code == 3 and "keeps no KV cache group" in " ".join(r.stdout.split())
    # 0–17 and 18–34 both cache
    assert build_plan(spec, get_gpu("H100-SXM"), PlanSettings(pp=2), with_roofline=False).fits
