"""Write the trimmed start-up table the tests read (tests/fixtures/vllm_startups_0_19/startups_trimmed.csv).

Source: ../shared/data/vllm-startups-0.19/startups.csv and results_raw.csv (jgchn/llm-d-planner, branch
``accuracy``, Apache-2.0; see that folder's SOURCES.md). Only the memory columns are kept.
Run: ``python benchmarks/trim_startups.py`` from the repository root.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT.parent / "shared" / "data" / "vllm-startups-0.19"
OUT = ROOT / "tests" / "fixtures" / "vllm_startups_0_19" / "startups_trimmed.csv"
KEEP = ["log_file", "status", "log_saved", "vllm_version", "model", "resolved_architecture", "dtype", "kv_cache_dtype",
        "quantization", "tp", "pp", "max_seq_len", "gpu_memory_utilization", "default_max_num_batched_tokens",
        "default_max_num_seqs", "requested_memory_gib", "weights_gib_by_rank", "activation_peak_gib_by_rank",
        "non_torch_forward_gib_by_rank", "non_kv_total_gib_by_rank", "cuda_graph_estimated_gib",
            "cudagraph_capture_sizes_count",
        "available_kv_gib", "available_kv_gib_by_rank", "gpu_kv_cache_tokens", "num_gpu_blocks", "max_concurrency",
        "max_concurrency_tokens_per_request", "tokens_per_block"]


def main() -> int:
    raw = {r["log_file"]: r for r in csv.DictReader((SRC / "results_raw.csv").open())}
    rows = list(csv.DictReader((SRC / "startups.csv").open()))
    with OUT.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(KEEP + ["init_total_memory_gib"])
        for r in rows:
            w.writerow([r[k] for k in KEEP] + [raw.get(r["log_file"], {}).get("init_total_memory_gib", "")])
    print(f"wrote {len(rows)} rows to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
