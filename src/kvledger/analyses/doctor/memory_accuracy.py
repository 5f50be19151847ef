"""Replays real vLLM start-ups through the memory plan: every logged term next to the prediction, with the error.

A start-up row is the dict of one line of a start-up table (``startups.csv`` of the vLLM 0.19 corpus or its
trimmed copy in the tests): settings (model, dtype, TP, PP, utilization, max_model_len, KV dtype) and the
logged terms, per rank where the log prints one line per worker (``LABEL:value;…``). ``replay`` predicts
each term for the rank the log reports; ``exact_from_logged`` re-derives blocks, tokens and the printed
"Maximum concurrency" from the logged available memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model, resolve_bundled
from kvledger.catalog.modelspec import ModelSpec
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.units import GiB

__all__ = ["CONFIG_FILES", "QUANTIZED_CHECKPOINTS", "TermError", "Replay", "by_rank", "replay", "exact_from_logged",
           "quantized_model", "corpus_model_arg"]

CONFIG_FILES = {"meta-llama/Llama-3.1-8B-Instruct": "meta-llama--Llama-3.1-8B-Instruct.json",
                "Qwen/Qwen2.5-7B-Instruct": "Qwen--Qwen2.5-7B-Instruct.json",
                "Qwen/Qwen3-14B": "Qwen--Qwen3-14B.json",
                "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai--Mixtral-8x7B-Instruct-v0.1.json",
                "meta-llama/Llama-4-Scout-17B-16E-Instruct": "meta-llama--Llama-4-Scout-17B-16E-Instruct.json",
                "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-ai--DeepSeek-V2-Lite.json"}
"""Corpus model → config file (the DeepSeek entry is the base model's config, same architecture)."""

_DTYPES = {"torch.bfloat16": "bfloat16", "torch.float16": "float16", "torch.float32": "float32"}

INT8_CHANNEL = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
    "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}}}}
FP8_CHANNEL = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
    "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}}}
GPTQ_4BIT = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}

QUANTIZED_CHECKPOINTS = {
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8": ("meta-llama/Llama-3.1-8B-Instruct", INT8_CHANNEL),
    "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": ("meta-llama/Llama-3.1-8B-Instruct", GPTQ_4BIT),
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": ("Qwen/Qwen2.5-7B-Instruct", INT8_CHANNEL),
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": ("Qwen/Qwen2.5-7B-Instruct", FP8_CHANNEL),
}
"""Corpus checkpoint → (the release it quantizes, its ``quantization_config`` reconstructed). The corpus has no config
for these checkpoints: the method (compressed-tensors or gptq_marlin) and the dtype are what the log resolved; the
bit width and kind come from the checkpoint's name (w8a8 = 8-bit int weights and activations, fp8-dynamic = FP8
weights with dynamic activations, w4a16 = 4-bit weights); the per-output-channel strategy, the 4-bit checkpoint's
group size 128 and the unquantized ``lm_head`` are the publisher's model-card statements, not log facts."""


def corpus_model_arg(model: str, config_dir: Path, tmp: Path, standins: dict[str, Path]) -> str:
    """The ``--model`` a corpus row takes on the command line: its config file in ``config_dir`` (a
    ``QUANTIZED_CHECKPOINTS`` checkpoint: its base config with the reconstructed ``quantization_config``, written under
    ``tmp``), its stand-in config, or the name itself."""
    import json

    if model in QUANTIZED_CHECKPOINTS:
        base, qc = QUANTIZED_CHECKPOINTS[model]
        raw = json.loads((config_dir / CONFIG_FILES[base]).read_text(encoding="utf-8"))
        raw["quantization_config"] = qc
        path = tmp / (model.replace("/", "--") + ".json")
        path.write_text(json.dumps(raw), encoding="utf-8")
        return str(path)
    if model in standins:
        return str(standins[model])
    return str(config_dir / CONFIG_FILES[model]) if model in CONFIG_FILES else model


def quantized_model(model: str, config_dir: Path | None = None) -> ModelSpec | None:
    """A ``QUANTIZED_CHECKPOINTS`` checkpoint: its base release's config (the corpus file in ``config_dir``, else the
    bundled catalog's) with the reconstructed ``quantization_config``; None for any other model."""
    import json

    from kvledger.catalog.modelspec import parse_config

    if model not in QUANTIZED_CHECKPOINTS:
        return None
    base, qc = QUANTIZED_CHECKPOINTS[model]
    cfg = CONFIG_FILES.get(base)
    if config_dir is not None and cfg is not None and (config_dir / cfg).exists():
        raw = json.loads((config_dir / cfg).read_text(encoding="utf-8"))
    else:
        bundled = resolve_bundled(base)
        if bundled is None:
            return None
        from importlib import resources

        raw = json.loads(
            (resources.files("kvledger.catalog") / "data" / "models" / bundled.file).read_text(encoding="utf-8")
        )
    raw["quantization_config"] = qc
    return parse_config(raw, source=f"{base} config + quantization_config reconstructed from the log and model card",
                        name=model)


@json_fields(extra=("error", "rel_error"))
@dataclass(frozen=True)
class TermError:
    """One term of one start-up: predicted and logged, GiB (None where not available), and the relative error."""

    term: str
    predicted: float | None
    logged: float | None
    low: float | None = None
    high: float | None = None

    @property
    def error(self) -> float | None:
        if self.predicted is None or self.logged is None:
            return None
        return self.predicted - self.logged

    @property
    def rel_error(self) -> float | None:
        if self.error is None or not self.logged:
            return None
        return self.error / self.logged

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class Replay:
    """One start-up replayed: its label, which rank the terms are for, the terms, and why a row could not be planned."""

    __json__ = ("log_file", "label", "rank", "skipped", "terms")
    log_file: str
    label: str
    rank: str
    terms: tuple[TermError, ...] = field(default_factory=tuple)
    skipped: str = ""

    def term(self, name: str) -> TermError | None:
        return next((t for t in self.terms if t.term == name), None)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def by_rank(text: str) -> dict[str, float]:
    """``"Worker_PP0:1.1;Worker_PP1:2.01"`` → {"Worker_PP0": 1.1, "Worker_PP1": 2.01}."""
    out = {}
    for part in (text or "").split(";"):
        if ":" in part:
            k, v = part.rsplit(":", 1)
            out[k.strip()] = float(v)
    return out


def _f(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def _label(r: dict[str, str]) -> str:
    q = r["quantization"] if r["quantization"] not in ("None", "") else ""
    parts = [r["model"].split("/")[-1], r["dtype"].replace("torch.", ""), f"TP{r['tp']}", f"PP{r['pp']}",
             f"L{r['max_seq_len']}"]
    if q:
        parts.append(q)
    if r["kv_cache_dtype"] not in ("auto", ""):
        parts.append(f"kv {r['kv_cache_dtype']}")
    return " ".join(parts)


def _model_for(r: dict[str, str], config_dir: Path,
               standins: dict[str, Path] | None = None) -> tuple[ModelSpec | None, str]:
    """The start-up's config: the corpus's own file, else the bundled catalog's (CodeLlama-7b, phi-2, ...); a quantized
    checkpoint's is its base release's with the reconstructed ``quantization_config`` (``QUANTIZED_CHECKPOINTS``);
    ``standins``: model → a config file of the same architecture for models with none of their own."""
    quantized = quantized_model(r["model"], config_dir)
    if quantized is not None:
        return quantized, ""
    if standins and r["model"] in standins:  # a config documented as the same architecture, standing in
        return load_model(str(standins[r["model"]])), ""
    cfg = CONFIG_FILES.get(r["model"])
    have = cfg is not None and (config_dir / cfg).exists()
    if not have and resolve_bundled(r["model"]) is None:
        return None, f"config of {r['model']} not available"
    if r["quantization"] not in ("None", "", "fp8"):
        return (
            None,
            f"--quantization {r['quantization']} on the base config is not a vLLM online quantization kvledger models",
        )
    return load_model(str(config_dir / cfg) if have else r["model"]), ""


def _engine_flags(r: dict[str, str]) -> dict[str, Any]:
    """The start-up's --dtype, --quantization and --kv-cache-dtype as plan settings."""
    return {"dtype": _DTYPES.get(r["dtype"], "auto"), "quantization": "fp8" if r["quantization"] == "fp8" else None,
            "kv_cache_dtype": r["kv_cache_dtype"] if r["kv_cache_dtype"] not in ("", "auto") else "auto"}


def _binding_rank(r: dict[str, str]) -> str:
    """The rank whose terms decide the pool: the last PP stage, else the first worker listed."""
    pp = int(r["pp"] or 1)
    acts = by_rank(r["activation_peak_gib_by_rank"])
    if pp > 1:
        return f"Worker_PP{pp - 1}"
    return next(iter(acts), "EngineCore")


def replay(r: dict[str, str], config_dir: Path, rank: str | None = None,
           standins: dict[str, Path] | None = None) -> Replay:
    """Predict every memory term of start-up ``r`` with kvledger's vLLM rules for the logged version."""
    label = _label(r)
    if r["status"] != "ok":
        return Replay(r["log_file"], label, "", skipped="start-up failed")
    m, why = _model_for(r, config_dir, standins)
    if m is None:
        return Replay(r["log_file"], label, "", skipped=why)
    tp, pp = int(r["tp"]), int(r["pp"])
    rank = rank or _binding_rank(r)
    total = float(r["init_total_memory_gib"] or 79.19) * GiB
    s = make_settings(engine="vllm", engine_version=r["vllm_version"] or "0.19.0", tp=tp, pp=pp,
                      max_model_len=int(r["max_seq_len"]), gpu_memory_utilization=float(r["gpu_memory_utilization"]),
                      **_engine_flags(r), max_num_batched_tokens=int(r["default_max_num_batched_tokens"] or 8192),
                      max_num_seqs=int(r["default_max_num_seqs"] or 1024))
    p = build_plan(m, resolve_gpu("H100-SXM", memory_bytes=int(total)), s, with_roofline=False, with_advice=False)
    mem = p.memory
    st = mem.stages[int(rank.rsplit("PP", 1)[1])] if pp > 1 and "PP" in rank else None
    pred = {i.name.split(" (")[0]: i.bytes / GiB for i in mem.deductions}
    if st is not None:
        pred = {"weights": st["weights_bytes"] / GiB, "activation peak": st["activation_peak_bytes"] / GiB,
                "non-torch memory": st["non_torch_memory_bytes"] / GiB}
    avail_pred = (st["available_kv_bytes"] if st else mem.available_kv_bytes) / GiB
    requested = _f(r["requested_memory_gib"])
    non_kv = by_rank(r["non_kv_total_gib_by_rank"]).get(rank)
    logged_avail = by_rank(r["available_kv_gib_by_rank"]).get(rank)
    if logged_avail is None and non_kv is not None and requested is not None:
        # the log prints available memory on rank 0 only: requested − non-KV of this rank
        logged_avail = requested - non_kv
    cg_sizes = int(r["cudagraph_capture_sizes_count"] or 0)
    from kvledger.accounting.vllm_profile import cudagraph_estimate
    from kvledger.accounting.vllm_terms import cudagraph_range

    cg = cudagraph_estimate(cg_sizes)[0] if cg_sizes else None
    cg_range = tuple(x / GiB for x in cudagraph_range(cg)[:2]) if cg else (None, None)

    if st is None or st.get("binds"):
        avail_range = tuple(x / GiB for x in mem.ranges["available_kv_bytes"])
    else:
        avail_range = (None, None)

    terms = [TermError("weights", pred.get("weights"), by_rank(r["weights_gib_by_rank"]).get(rank)),
             TermError("activation peak", pred.get("activation peak"),
                       by_rank(r["activation_peak_gib_by_rank"]).get(rank)),
             TermError("non-torch", pred.get("non-torch memory"),
                       by_rank(r["non_torch_forward_gib_by_rank"]).get(rank)),
             TermError("CUDA graph estimate", cg / GiB if cg else None, _f(r["cuda_graph_estimated_gib"]), *cg_range),
             TermError("available KV", avail_pred, logged_avail, *avail_range),
             TermError("KV tokens", float(mem.pool_tokens), _f(r["gpu_kv_cache_tokens"])),
             TermError("max concurrency", p.at_max_model_len.max_concurrency if p.at_max_model_len else None,
                       _f(r["max_concurrency"]))]
    return Replay(r["log_file"], label, rank, tuple(terms))


def exact_from_logged(r: dict[str, str], config_dir: Path,
                      standins: dict[str, Path] | None = None) -> dict[str, Any] | None:
    """Blocks, tokens and the printed "Maximum concurrency" from the logged memory, next to the log's own figures.

    The log prints available memory to 2 decimals, so it fixes the block count only to a range
    (``printed_gib_block_range``); from the engine's block count (``num_gpu_blocks_override``) the plan must
    print the logged tokens and concurrency exactly. None where the model cannot be read, for PP runs (the
    binding stage's available memory is not printed) and where the log has no block count.
    """
    from kvledger.accounting.plan_vllm import printed_gib_block_range

    m, _ = _model_for(r, config_dir, standins) if r["status"] == "ok" else (None, "")
    if m is None or int(r["pp"]) > 1 or not r["available_kv_gib"] or not r["num_gpu_blocks"]:
        return None
    s = make_settings(engine="vllm", engine_version=r["vllm_version"] or "0.19.0", tp=int(r["tp"]),
                      max_model_len=int(r["max_seq_len"]), **_engine_flags(r),
                          num_gpu_blocks_override=int(r["num_gpu_blocks"]))
    p = build_plan(m, resolve_gpu("H100-SXM"), s, with_roofline=False, with_advice=False)
    lo, hi = printed_gib_block_range(round(float(r["available_kv_gib"]) * GiB), p.memory.bytes_per_block)
    return {"blocks_range": (lo, hi), "logged_blocks": int(r["num_gpu_blocks"]), "tokens": p.memory.pool_tokens,
            "logged_tokens": int(r["gpu_kv_cache_tokens"]), "concurrency": f"{p.at_max_model_len.max_concurrency:.2f}",
            "logged_concurrency": r["max_concurrency"]}
