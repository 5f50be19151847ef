"""Predicted vs logged weight memory for every vLLM start-up in the shared corpus whose model config is known.

Reads ``../shared/data/vllm-startups-0.19/startups.csv`` (vLLM 0.19.0 on one H100-80GB per GPU; the
"Model loading took X GiB" line of each worker, and each PP stage's "weights memory" from the
profiling line), the run records in ``runs/*.json`` that have no row there (earlier start-ups of the
same campaign, e.g. DeepSeek-V2-Lite at TP 2 and 4) and ``../shared/data/vllm_memory_observations.csv``, and prints,
per start-up and rank,
the weight memory ``kvledger.catalog.loading.loaded_weights`` predicts, the logged figure and the
error, then the mean and the worst absolute error.

Configs: the bundled catalog (Llama-3.1-8B-Instruct shares Meta-Llama-3.1-8B's architecture; the
DeepSeek-V2-Lite base config stands in for the Chat release). The RedHatAI quantized checkpoints'
configs are not in the corpus; their ``quantization_config`` is reconstructed from what the log gives and the
model card (``kvledger.analyses.doctor.memory_accuracy.QUANTIZED_CHECKPOINTS`` says which fact comes from where). A
corpus model not listed below whose config is bundled in the catalog (CodeLlama-7b, phi-2) is read from there;
gemma-7b and Qwen1.5-MoE-A2.7B, whose configs are in neither, from transformers' default configs of their
architectures (``benchmarks/data/oracle_configs/``, which transformers documents as those models' configurations).

    python benchmarks/weights_vs_startups.py
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from kvledger.analyses.doctor.memory_accuracy import QUANTIZED_CHECKPOINTS, quantized_model
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model, resolve_bundled

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
GiB = 2**30
V019 = (0, 19, 0)  # the corpus's vLLM release (its logs and run records say v0.19.0)

# corpus model -> bundled config or file (the RedHatAI checkpoints: memory_accuracy.QUANTIZED_CHECKPOINTS)
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-ai/DeepSeek-V2-Lite",
    # no config of their own here: transformers' default GemmaConfig / Qwen2MoeConfig
    # (benchmarks/transformers_oracle.py),
    # documented by transformers as these models' configurations
    "google/gemma-7b": str(Path(__file__).resolve().parent / "data" / "oracle_configs" / "gemma.json"),
    "Qwen/Qwen1.5-MoE-A2.7B": str(Path(__file__).resolve().parent / "data" / "oracle_configs" / "qwen2_moe.json"),
    "openai/gpt-oss-20b": "openai/gpt-oss-20b",
    "Qwen/Qwen3-0.6B": str(
        Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "configs" / "Qwen3-0.6B.json"
    ),
}


def _known(model: str) -> bool:
    """A corpus model whose config is listed above, rebuilt (quantized checkpoints) or bundled in the catalog."""
    return model in MODELS or model in QUANTIZED_CHECKPOINTS or resolve_bundled(model) is not None


def _spec(model: str):
    return quantized_model(model) or load_model(MODELS.get(model, model))


def _ranks(text: str) -> dict[str, float]:
    out = {}
    for part in filter(None, (text or "").split(";")):
        label, _, v = part.rpartition(":")
        out[label] = float(v)
    return out


def rows() -> tuple[list[dict], list[str]]:
    """(one dict per start-up and rank: model, layout, predicted and logged GiB, error %; models not checked)."""
    out, skipped = [], []
    for r in csv.DictReader((SHARED / "vllm-startups-0.19" / "startups.csv").open(encoding="utf-8")):
        if not r["model_loading_gib"]:
            continue
        model = r["model"]
        if not _known(model):
            skipped.append(f"{model} ({r['log_file']}): no config in the corpus")
            continue
        spec = _spec(model)
        tp, pp = int(r["tp"]), int(r["pp"])
        dtype = r["dtype"].removeprefix("torch.")
        q = "fp8" if r["quantization"] == "fp8" and spec.quant.method == "none" else None
        logged = {"rank 0": float(r["model_loading_gib"])}
        if pp > 1:
            logged = {k.removeprefix("Worker_PP"): v for k, v in _ranks(r["weights_gib_by_rank"]).items()}
        for rank, gib in sorted(logged.items()):
            pr = int(rank) if pp > 1 else 0
            pred = loaded_weights(spec, tp=tp, pp=pp, pp_rank=pr, dtype=dtype, quantization=q,
                                  engine_version=V019).bytes / GiB
            out.append(dict(model=model, log=r["log_file"],
                            layout=f"tp{tp} pp{pp}" + (f" stage {pr}" if pp > 1 else ""),
                            dtype=dtype, quantization=spec.quant.method if q is None else "fp8 (online)",
                            predicted_gib=pred, logged_gib=gib, error_pct=(pred / gib - 1) * 100))
    seen = {
        Path(r["log_file"]).stem.removesuffix(".FAILED")
        for r in csv.DictReader((SHARED / "vllm-startups-0.19" / "startups.csv").open(encoding="utf-8"))
    }
    for f in sorted((SHARED / "vllm-startups-0.19" / "runs").glob("*.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        if d.get("skipped") or f.stem in seen or d.get("weight_memory_gib") is None:
            continue  # not started, or already read from startups.csv
        model, a = d["model"], d.get("vllm_args") or {}
        if not _known(model):
            skipped.append(f"{model} ({f.name}): no config in the corpus")
            continue
        spec = _spec(model)
        tp, pp = int(a.get("tensor_parallel_size") or 1), int(a.get("pipeline_parallel_size") or 1)
        dtype = a.get("dtype") or "auto"
        q = "fp8" if a.get("quantization") == "fp8" and spec.quant.method == "none" else None
        pred = loaded_weights(spec, tp=tp, pp=pp, dtype=dtype, quantization=q, engine_version=V019).bytes / GiB
        gib = float(d["weight_memory_gib"])
        out.append(dict(model=model, log=f.name, layout=f"tp{tp} pp{pp}", dtype=dtype, quantization=spec.quant.method,
                        predicted_gib=pred, logged_gib=gib, error_pct=(pred / gib - 1) * 100))
    for r in csv.DictReader((SHARED / "vllm_memory_observations.csv").open(encoding="utf-8")):
        spec = _spec(r["model"]) if _known(r["model"]) else None
        if spec is None:
            skipped.append(f"{r['model']} (vllm_memory_observations.csv): no config bundled")
            continue
        pred = loaded_weights(spec, tp=int(r["tp"])).bytes / GiB
        gib = float(r["weights_gib"])
        out.append(dict(model=r["model"], log="vllm_memory_observations.csv", layout=f"tp{r['tp']}", dtype=spec.dtype,
                        quantization=spec.quant.method, predicted_gib=pred, logged_gib=gib,
                            error_pct=(pred / gib - 1) * 100))
    return out, skipped


def main() -> int:
    table, skipped = rows()
    print(f"{'model':<52} {'layout':<14} {'dtype':<9} {'quant':<19} {'predicted':>9} {'logged':>7} {'error':>7}")
    for t in table:
        print(f"{t['model'][:52]:<52} {t['layout']:<14} {t['dtype']:<9} {t['quantization']:<19} "
              f"{t['predicted_gib']:>9.3f} "
              f"{t['logged_gib']:>7.2f} {t['error_pct']:>+6.2f}%")
    for label, part in (("vLLM 0.19 corpus (startups.csv and runs/*.json)",
                         [t for t in table if t["log"] != "vllm_memory_observations.csv"]),
                        ("vllm_memory_observations.csv",
                         [t for t in table if t["log"] == "vllm_memory_observations.csv"])):
        errs = [abs(t["error_pct"]) for t in part]
        print(f"\n{label}: {len(part)} start-up ranks, mean |error| {sum(errs) / len(errs):.2f}%, worst "
              f"{max(errs):.2f}% "
              f"(logged figures are rounded to 0.01 GiB)", end="")
    print()
    for s in skipped:
        print("not checked:", s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
