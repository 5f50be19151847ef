"""``kvledger doctor`` on every vLLM 0.19.0 start-up log of ../shared/data/vllm-startups-0.19 that started: its verdict
and
capacity rows (GPU blocks, printed KV cache size, printed concurrency), log against ledger, and the available-KV gap.

Source: jgchn/llm-d-planner (Apache-2.0; tests/fixtures/vllm_startups_0_19/SOURCES.md). Models as in
``benchmarks/accuracy_memory.py``: the corpus's configs, a quantized checkpoint as its base config with the
reconstructed
``quantization_config``, gemma-7b and Qwen1.5-MoE-A2.7B from transformers' default configs. GPU: H100 (the corpus's).
Usage: ``python benchmarks/doctor_corpus.py``.
"""

from __future__ import annotations

import csv
import tempfile
import time
from pathlib import Path

from kvledger.analyses.doctor.diagnose import diagnose_file
from kvledger.analyses.doctor.memory_accuracy import corpus_model_arg
from kvledger.units import GiB

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "vllm-startups-0.19"
ORACLE = ROOT / "benchmarks" / "data" / "oracle_configs"
STANDINS = {"google/gemma-7b": ORACLE / "gemma.json", "Qwen/Qwen1.5-MoE-A2.7B": ORACLE / "qwen2_moe.json"}


def model_arg(model: str, tmp: Path) -> str:
    return corpus_model_arg(model, CORPUS / "configs", tmp, STANDINS)


def main() -> None:
    rows = [
        r
        for r in csv.DictReader((CORPUS / "startups.csv").open())
        if r["status"] == "ok" and (CORPUS / "logs" / r["log_file"]).exists()
    ]
    tmp = Path(tempfile.mkdtemp())
    t0, ok = time.perf_counter(), 0
    print(f"{'log':64} {'verdict':8} {'blocks log/ledger':>20} {'tokens log/ledger':>22} {'conc. log/ledger':>18} "
          f"{'avail gap GiB':>13}")
    for r in rows:
        c = diagnose_file(CORPUS / "logs" / r["log_file"], model=model_arg(r["model"], tmp), gpu="H100").startup
        b, k = c.row("GPU blocks"), c.row("KV cache size (printed)")
        x = next(row for row in c.rows if row.term.startswith("max concurrency"))
        gap = c.row("available KV memory").difference
        ok += c.consistent is True
        print(f"{r['log_file'][:64]:64} {'matches' if c.consistent else 'DIFFERS':8} "
              f"{b.log_value:>9,}/{b.ledger_value:<10,} "
              f"{k.log_value:>10,}/{k.ledger_value:<11,} {x.log_value:>8.2f}/{x.ledger_value:<9.2f} "
              f"{gap / GiB if gap is not None else float('nan'):>+13.2f}")
    print(f"\n{ok} of {len(rows)} started logs: the ledger reproduces the log's block count, printed tokens and "
          f"concurrency "
          f"({time.perf_counter() - t0:.2f} s for all, one process)")


if __name__ == "__main__":
    main()
