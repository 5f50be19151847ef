"""Writes ``benchmarks/data/vme_startups.csv`` from vllm-memory-estimator's published validation set.

The set: ``test_data/validation_db.json`` of ashishkamra/vllm-memory-estimator (Apache-2.0) at commit
8b0e21d1ec49357383758a164129515209b37e7f (2026-05-17; removed from tracking in the next commit): 281 vLLM start-ups
(H200, MI300X, B200; TP 1/2/4/8; vLLM 0.11–0.20, upstream and Red Hat AI builds), each with the launch arguments
and the figures its log printed ("Model loading took", "Available KV cache memory", "GPU KV cache size", "Maximum
concurrency"). Only the start-ups of models whose configuration kvledger has are kept (the rest cannot be planned);
each row names the catalog config it is planned with. Facts only: the figures as the record gives them.
``gpu_memory_utilization`` is the launch argument (``runtime_args``): the record's parsed ``log_memory`` value reads
0.9 for every vLLM 0.20 start-up launched with 0.92, and those logs' figures fit 0.92 (Ministral-3-14B on H200 prints
111.64 GiB at 0.19 and 111.09 at 0.20, 0.55 GiB apart, which is 0.20's CUDA-graph estimate; 0.9 would be 2.8 GiB less).

Usage: ``git -C <mirror of the repo> show 8b0e21d:test_data/validation_db.json > /tmp/vme_db.json`` then
``python benchmarks/import_vme_startups.py /tmp/vme_db.json``.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "data" / "vme_startups.csv"
SOURCE = ("https://github.com/ashishkamra/vllm-memory-estimator/blob/8b0e21d1ec49357383758a164129515209b37e7f/"
          "test_data/validation_db.json")
COLUMNS = ("id,source_url,vllm_version,version_note,gpu,gpu_memory_gib_printed,model,config,tp,pp,"
           "gpu_memory_utilization,max_model_len,max_num_seqs,max_num_batched_tokens,flags,weights_gib,activation_gib,"
           "non_torch_gib,available_kv_gib,gpu_blocks,kv_tokens,max_concurrency,checks,notes,available_kv_gib_min_rank,"
           "rank_memory").split(",")
ONE_RANK = ("one rank: the record keeps the first \"Available KV cache memory\" line of the log (the set's "
            "memory_estimator/validation_db.py reads it with one regex search); the logs themselves are not published")
"""Every multi-GPU record's ``rank_memory``: vLLM 0.11.1–0.19 print local rank 0's line only, 0.20 every worker's, and
the record holds one figure either way, so the smallest rank's memory is not in the source
(``accounting/vllm_rank_print.py``); ``available_kv_gib_min_rank`` stays empty."""

GPUS = {"H200": "nvidia_h200_sxm", "MI300X": "amd_mi300x", "B200": "nvidia_b200"}

# Checkpoint -> (catalog config, weights checked?). Llama-3.3-70B has Llama-3.1-70B's architecture; DeepSeek-R1-0528
# DeepSeek-R1's (FP8 block-quantized in its config); Qwen3-235B-A22B-Instruct-2507 Qwen3-235B-A22B's (only
# max_position_embeddings differs, and every run sets max-model-len). The FP8 re-quantized checkpoints are planned with
# the printed weights ("weights given"): their quantization_config is not in the catalog config.
CONFIGS = {
    "meta-llama/Llama-3.3-70B-Instruct": ("meta-llama/Meta-Llama-3.1-70B", True),
    "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic": ("meta-llama/Meta-Llama-3.1-70B", False),
    "nvidia/Llama-3.3-70B-Instruct-FP8": ("meta-llama/Meta-Llama-3.1-70B", False),
    "deepseek-ai/DeepSeek-R1-0528": ("deepseek-ai/DeepSeek-R1", True),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ("Qwen/Qwen3-235B-A22B", True),
    "RedHatAI/Qwen3-235B-A22B-FP8-dynamic": ("Qwen/Qwen3-235B-A22B", False),
}
KEPT_ARGS = ("kv-cache-dtype", "enable-expert-parallel", "max-num-seqs", "max-num-batched-tokens", "block-size",
             "dtype", "async-scheduling", "compilation-config")


def base_version(printed: str) -> str:
    """'v0.13.1.dev8+g2841a84ac' -> '0.13.1'; 'v0.11.2rc1+rhai0.cuda' -> '0.11.2'."""
    m = re.match(r"v?(\d+\.\d+\.\d+)", printed)
    if not m:
        raise ValueError(f"unreadable vLLM version {printed!r}")
    return m.group(1)


def release_image_sampler(printed: str) -> str | None:
    """``sampler-backend=flashinfer`` for a bare upstream release build of vLLM 0.9–0.11.0, else None.

    Those releases sample with FlashInfer whenever it is importable (``v1/sample/ops/topk_topp_sampler.py``, read in
    0.11.0: ``VLLM_USE_FLASHINFER_SAMPLER`` unset counts as on); the wheel lists FlashInfer only as an extra
    (``vllm[flashinfer]``), the project's release image installs it (``docker/Dockerfile``, stage ``vllm-base``).
    The set's runs are container deployments: a build printed as a bare release (``v0.11.0``) is that image; a vendor
    build (``+rhai2``) or a development build (``.dev8+g…``) has contents the set does not state, so it keeps the plan's
    default (sort point, FlashInfer in the range)."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", printed.strip())
    if m and (0, 9, 0) <= tuple(map(int, m.groups())) < (0, 11, 1):
        return "sampler-backend=flashinfer"
    return None


def runtime_args(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(";"):
        if ":" in part:
            k, v = part.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def row(uuid: str, rec: dict) -> dict[str, str] | None:
    cfg = rec["log_config"]
    if cfg["model"] not in CONFIGS or rec["csv_metadata"]["accelerator"] not in GPUS:
        return None
    config, weights_checked = CONFIGS[cfg["model"]]
    mem, args = rec["log_memory"], runtime_args(rec["csv_metadata"]["runtime_args"])
    flags = [f"{k}={args[k]}" if args[k] not in ("True", "") else k for k in KEPT_ARGS if k in args]
    if sampler := release_image_sampler(cfg["vllm_version"]):
        flags.append(sampler)
    if cfg.get("quantization"):
        flags.append(f"checkpoint-quantization={cfg['quantization']}")
    checks = (["weights"] if weights_checked else []) + ["available", "tokens", "concurrency"]
    return {
        "id": f"V{uuid[:8]}", "source_url": SOURCE, "vllm_version": base_version(cfg["vllm_version"]),
        "version_note": f"printed {cfg['vllm_version']} (record {uuid})",
        "gpu": GPUS[rec["csv_metadata"]["accelerator"]],
        "gpu_memory_gib_printed": "", "model": cfg["model"], "config": config,
        "tp": str(cfg["tensor_parallel_size"]), "pp": str(cfg["pipeline_parallel_size"]),
        "gpu_memory_utilization": args.get("gpu-memory-utilization", str(mem["gpu_memory_utilization"])),
        "max_model_len": str(cfg["max_seq_len"]),
        "max_num_seqs": args.get("max-num-seqs", ""), "max_num_batched_tokens": args.get("max-num-batched-tokens", ""),
        "flags": ";".join(flags), "weights_gib": f"{mem['model_load_gib']}", "activation_gib": "", "non_torch_gib": "",
        "available_kv_gib": f"{mem['available_kv_cache_gib']}", "gpu_blocks": "",
        "kv_tokens": str(mem["kv_cache_tokens"]), "max_concurrency": f"{mem['max_concurrency_ratio']}",
        "checks": ";".join(checks),
        "notes": "weights given (re-quantized checkpoint)" if not weights_checked else "",
        "available_kv_gib_min_rank": "", "rank_memory": ONE_RANK if cfg["tensor_parallel_size"] > 1 else "",
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    recs = json.loads(Path(argv[0]).read_text())["records"]
    rows = [r for r in (row(u, rec) for u, rec in recs.items()) if r]
    rows.sort(key=lambda r: (r["model"], r["gpu"], int(r["tp"]), tuple(map(int, r["vllm_version"].split("."))),
                             r["id"]))
    with OUT.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} of {len(recs)} start-ups written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
