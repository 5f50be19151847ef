"""Re-derive the calibration data bundled under src/kvledger/accounting/data/profiling/ from the reference copies.

Run from the repository root with the reference set at ../shared (or pass its path):
    python benchmarks/derive_bundled_profiles.py [/work/shared/data/profiling]
Files are either copied byte for byte or reduced by keeping a subset of columns/rows, values
left as the original text (see the SOURCES.md it sits next to). Refuses to overwrite unless --force.
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

DEST = Path(__file__).resolve().parents[1] / "src/kvledger/accounting/data/profiling"
MLP_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
           "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
MLP_SHAPE = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
             "num_tensor_parallel_workers")
ATTN_KEEP = ("time_stats.attn_decode.median", "time_stats.attn_prefill.median", "n_embd", "n_q_head", "n_kv_head",
             "block_size", "num_tensor_parallel_workers", "max_model_len", "batch_size", "prefill_chunk_size",
             "kv_cache_size", "is_prefill")
NET_KEEP = ("time_stats.all_reduce.median", "num_workers", "size", "devices_per_node")


def _subset(src: Path, dst: Path, columns: list[str], keep_row=lambda r: True) -> None:
    with src.open(newline="") as f:
        rows = list(csv.DictReader(f))
    dst.parent.mkdir(parents=True, exist_ok=True)
    with dst.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            if keep_row(r):
                w.writerow([r.get(c, "") for c in columns])


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def main(ref: Path) -> None:
    vidur = ref / "vidur"
    for name in ("profiler-a100-80g.vllm.json", "profiler-a100-80g.distserve.json", "max_num_tokens.csv"):
        _copy(ref / "distserve/profile_data" / name, DEST / "distserve" / name)
    _copy(ref / "splitwise_sim/perf_model.csv", DEST / "splitwise/perf_model.csv")
    for mlp in sorted((vidur / "compute").glob("*/*/*/mlp.csv")):
        rel = mlp.relative_to(vidur / "compute").parent
        cols = [f"time_stats.{op}.median" for op in MLP_OPS] + list(MLP_SHAPE)
        _subset(mlp, DEST / "vidur/compute" / rel / "mlp_median.csv", cols)
        cfg = vidur / "model_configs" / rel.relative_to(rel.parts[0]).with_suffix(".yml")
        _copy(cfg, DEST / "vidur/model_configs" / cfg.relative_to(vidur / "model_configs"))
    _subset(vidur / "legacy_e2d00e9/a100/attention.csv", DEST / "vidur/attention/a100/attention_median.csv",
            list(ATTN_KEEP))
    for node in ("a100_dgx", "h100_dgx"):
        _subset(vidur / "network" / node / "all_reduce.csv", DEST / "vidur/network" / node / "all_reduce_median.csv",
                list(NET_KEEP), lambda r: r["num_workers"] == r["devices_per_node"] and r["rank"] == "0")
    for gpu in ("a100", "a40"):
        _copy(vidur / "legacy_7f14d6a" / gpu / "cpu_overheads.csv",
              DEST / "vidur/cpu_overheads" / gpu / "cpu_overheads.csv")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--force"]
    ref_dir = Path(args[0]) if args else Path(__file__).resolve().parents[2] / "shared/data/profiling"
    if any(DEST.rglob("*.csv")) and "--force" not in sys.argv:
        sys.exit(f"{DEST} already holds data; pass --force to rewrite it")
    main(ref_dir)
    print(f"wrote {sum(1 for _ in DEST.rglob('*') if _.is_file())} files under {DEST}")
