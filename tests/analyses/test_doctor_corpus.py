"""``kvledger doctor`` on every vLLM 0.19.0 start-up log of the shared corpus that started
(../shared/data/vllm-startups-0.19,
jgchn/llm-d-planner, Apache-2.0; tests/fixtures/vllm_startups_0_19/SOURCES.md): the ledger reproduces each log's block
count,
printed KV cache size and printed concurrency. These logs print ``Overriding num_gpu_blocks=0 with
num_gpu_blocks_override=512``
during vLLM's CUDA-graph memory profiling, which must not be read as a user setting."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvledger.analyses.doctor.diagnose import diagnose_file
from kvledger.analyses.doctor.memory_accuracy import corpus_model_arg
from kvledger.units import GiB

ROOT = Path(__file__).parents[2]
CORPUS = ROOT.parent / "shared" / "data" / "vllm-startups-0.19" / "logs"
FIX = ROOT / "tests" / "fixtures" / "vllm_startups_0_19"
ORACLE = ROOT / "benchmarks" / "data" / "oracle_configs"
# transformers' default GemmaConfig / Qwen2MoeConfig, documented as gemma-7b's and Qwen1.5-MoE-A2.7B's (as in
# test_memory_accuracy)
STANDINS = {"google/gemma-7b": ORACLE / "gemma.json", "Qwen/Qwen1.5-MoE-A2.7B": ORACLE / "qwen2_moe.json"}
ROWS = [
    r for r in csv.DictReader((FIX / "startups_trimmed.csv").open()) if r["status"] == "ok" and r["log_saved"] == "yes"
]

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="the shared start-up corpus (../shared/data) is not beside "
                                                            "this checkout")


def _model_arg(model: str, tmp: Path) -> str:
    """--model for a corpus row: its config.json (a quantized checkpoint's: the base config with its
    quantization_config)."""
    return corpus_model_arg(model, FIX / "configs", tmp, STANDINS)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("configs")
    return {r["log_file"]: diagnose_file(CORPUS / r["log_file"], model=_model_arg(r["model"], tmp),
                                         gpu="H100") for r in ROWS}


def test_every_started_log_matches(reports):
    # 24 of the 40 start-ups ran and have their log saved (startups.csv: status ok, log_saved yes): TP 1/2/4, PP 2/4,
    # bf16/fp16, FP8 KV, w8a8/w4a16 checkpoints, MoE (Mixtral) and MLA (DeepSeek-V2-Lite)
    assert len(ROWS) == 24 and all((CORPUS / r["log_file"]).exists() for r in ROWS)
    wrong = {f: [(x.term, x.log_value, x.ledger_value) for x in rep.startup.rows if x.unit in ("blocks", "tokens", "x")]
             for f, rep in reports.items() if rep.startup is None or rep.startup.consistent is not True}
    assert not wrong
    for f, rep in reports.items():
        # the profiling pass's 512 (= max_cudagraph_capture_size) is never taken as --num-gpu-blocks-override
        assert "num_gpu_blocks_override" not in rep.startup.settings, f
        assert any("CUDA-graph memory profiling" in n for n in rep.startup.notes), f


def test_llama_8b_tp1_rows_by_hand(reports):
    c = reports["meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"].startup
    # 16 tokens × 32 layers × 8 KV heads × (128 + 128) × 2 B = 2,097,152 B per block; 58.11 GiB / 2 MiB = 29,752.3 →
    # 29,752;
    # printed to 2 decimals, 58.105–58.115 GiB allow 29,749–29,754 blocks; the log's 476,016 tokens / 16 = 29,751 is
    # inside
    b = c.row("GPU blocks")
    assert (b.log_value, b.ledger_value, b.log_line) == (29751, 29752, 375) and "29,749–29,754" in b.explanation
    assert (c.row("KV cache size (printed)").log_value, c.row("KV cache size (printed)").ledger_value) == (476016,
        476016)
    # R(8,192) = 8,192 / 16 = 512 blocks; 29,751 / 512 = 58.107 → printed 58.11x (line 376, as grep -n counts)
    r = c.row("max concurrency at 8,192 tokens")
    assert (r.log_value, r.ledger_value, r.log_line) == (58.11, 58.11, 376)
    assert any(
        n.startswith("line 351: 'Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512'") for n in c.notes
    )
    # line 369 estimates 0.84 GiB of CUDA graphs, but line 374's notice says VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is
    # off
    # (0.19's default), so 0 B was subtracted, as the ledger has it
    g = c.row("CUDA graphs")
    assert (g.log_value, g.log_line, g.ledger_value) == (
        0,
        374,
        0,
    ) and "estimate 0.84 GiB (line 369) was not subtracted" in g.explanation
    # the log's DEBUG lines give the device total (line 74: total_memory=79.19GiB) and the budget (line 370: "Requested
    # memory: 0.950000 (util), 75.23 GiB"); the catalog's H100 is the same 79.19 GiB (what CUDA reports), and
    # ceil(79.19 × 0.95) = 75.23 GiB: the budget agrees, and the available-KV gap of −0.01 GiB is residual alone
    # (terms the log does not itemise, and its 2-decimal rounding)
    t, q = c.row("device total"), c.row("requested = total × utilization")
    assert (t.log_line, round(t.log_value / 2**30, 2), round(t.ledger_value / 2**30, 2)) == (74, 79.19, 79.19)
    assert (q.log_line, round(q.log_value / 2**30, 2), round(q.ledger_value / 2**30, 2)) == (370, 75.23, 75.23)
    assert "= requested -0.00;" in c.row("available KV memory").explanation
    assert "CUDA graphs +0.00 GiB; residual -0.01 GiB" in c.row("available KV memory").explanation


def test_llama_8b_pp2_blocks_bounded_by_the_first_stage(reports):
    c = reports["meta-llama-llama-3-1-8b---h100-80gb--tp1pp2dp1--8192.log"].startup
    assert c.settings["pp"]["value"] == 2  # non-default args, line 25: 'pipeline_parallel_size': 2
    # stage 0 holds 16 of 32 layers: 16 × 16 × 8 × 256 × 2 B = 1,048,576 B per block; only Worker_PP0 prints its budget
    # (66.54 GiB, line 673): 66.54 × 1,024 = 68,136.96 → at most 68,136 (68,142 at 66.545 GiB); the pool is the smaller
    # stage's: the log's 1,075,312 tokens / 16 = 67,207 blocks, and 67,207 / 512 = 131.26x
    b = c.row("GPU blocks")
    assert (b.log_value, b.ledger_value) == (67207, 68136) and "inside 1–68,142" in b.explanation
    assert c.row("max concurrency at 8,192 tokens").ledger_value == 131.26 and c.consistent is True
    # the memory lines (weights line 171, profile line 672, budget line 673) are Worker_PP0's: compared with the
    # ledger's
    # stage 0 (no LM head, no sampler: activation 1.10 GiB logged), not with the binding last stage (2.01 GiB logged by
    # PP1)
    a = c.row("activation peak")
    assert (
        "pipeline stage 0's figure (line 672 comes from Worker_PP0" in a.explanation and abs(a.difference) < 0.03 * GiB
    )
    kv = c.row("available KV memory")
    assert kv.log_line == 673 and abs(kv.difference) < 0.1 * GiB  # 66.54 GiB logged
