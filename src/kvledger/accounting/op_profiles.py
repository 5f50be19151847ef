"""Measured per-layer operator times, by GPU, in one row layout: what the GEMM curve (``gemm_efficiency``) and the layer
kernels (``layer_kernels``) are fitted on.

Two public sources, both timing one decoder layer's ops against the step's tokens on one GPU holding a 1/TP shard:

* **Vidur** (microsoft/vidur, MIT; ``data/profiling/vidur/compute/<gpu>/<org>/<model>/mlp_median.csv``): DGX A100 and
  H100 SXM, 6–8 model shapes at TP 1–8, vLLM-era kernels of 2023–24. Its rows are the layout below.
* **LLMServingSim** (casys-kaist/LLMServingSim, MIT; ``data/profiling/llmservingsim/perf/<hw>/<org>/<model>/bf16/``
  ``tp<N>/dense.csv``): vLLM 0.19.0's own layer modules, eager, timed by its profiler on an RTX PRO 6000 Blackwell
  Server Edition for Llama-3.1-8B and Qwen3-32B at TP 1 and 2 (the TP shard's widths run on one GPU). Each
  ``layer,tokens,time_us`` row is mapped to Vidur's op names: ``qkv_proj`` → ``attn_pre_proj``, ``o_proj`` →
  ``attn_post_proj``, ``gate_up_proj`` → ``mlp_up_proj``, ``down_proj`` → ``mlp_down_proj``, ``layernorm`` → both
  norms (vLLM's ``RMSNorm`` with the residual: the add fused into it, so ``add`` is absent: no kernel of its own),
  ``rotary_emb`` → ``attn_rope``, ``act_fn`` → ``mlp_act``; µs → ms. The model's widths come from its bundled config
  (``catalog.models``), with its own head size (Qwen3's 128 is not hidden ÷ heads).

Row layout (Vidur's ``mlp_median.csv`` columns, as strings): ``n_embd``, ``n_head``, ``n_kv_head``, ``head_dim``,
``n_expanded_embd``, ``use_gated_mlp``, ``num_tokens``, ``num_tensor_parallel_workers`` and
``time_stats.<op>.median`` (ms; empty where the source did not time that op).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from importlib import resources
from pathlib import Path

from kvledger.accounting import vidur_profiles
from kvledger.accounting.vidur_grid import read_rows
from kvledger.accounting.vidur_profiles import VIDUR_GPU

__all__ = ["LSS_GPU", "PROFILED_GPU", "profile_shapes", "source_words", "LSS_OPS", "lss_rows"]

#: catalog GPU id → LLMServingSim's hardware folder
LSS_GPU = {"nvidia_rtx_pro_6000_server": "RTXPRO6000"}
#: every catalog GPU id with measured operator times (either source)
PROFILED_GPU = frozenset(VIDUR_GPU) | frozenset(LSS_GPU)
#: LLMServingSim layer module → Vidur op column(s) (module docstring)
LSS_OPS = {"qkv_proj": ("attn_pre_proj",), "o_proj": ("attn_post_proj",), "gate_up_proj": ("mlp_up_proj",),
           "down_proj": ("mlp_down_proj",), "layernorm": ("input_layernorm", "post_attention_layernorm"),
           "rotary_emb": ("attn_rope",), "act_fn": ("mlp_act",)}
_COLS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "input_layernorm",
         "post_attention_layernorm", "attn_rope", "mlp_act", "add")


def _lss_dir(folder: str) -> Path:
    return Path(str(resources.files("kvledger.accounting") / "data" / "profiling" / "llmservingsim" / "perf" / folder))


def lss_rows(dense_csv: Path, model, tp: int) -> list[dict[str, str]]:
    """One LLMServingSim ``dense.csv`` as Vidur-layout rows (module docstring), one per token count; ``model`` the
    parsed config (its full widths: the rows state the TP)."""
    times: dict[int, dict[str, float]] = defaultdict(dict)
    with open(dense_csv, newline="") as fh:
        for r in csv.DictReader(fh):
            for col in LSS_OPS.get(r["layer"], ()):
                times[int(r["tokens"])][col] = float(r["time_us"]) * 1e-3  # µs → ms
    gated = any("gate" in w.path for w in model.weights)
    shape = {"n_embd": model.hidden_size, "n_head": model.num_attention_heads, "n_kv_head": model.num_kv_heads,
             "head_dim": model.head_dim, "n_expanded_embd": model.intermediate_size, "use_gated_mlp": str(gated),
             "num_tensor_parallel_workers": tp}
    return [{**{k: str(v) for k, v in shape.items()}, "num_tokens": str(T),
             **{f"time_stats.{c}.median": repr(t[c]) if c in t else "" for c in _COLS}}
            for T, t in sorted(times.items())]


def profile_shapes(gpu_id: str) -> tuple[tuple[str, str, tuple[dict[str, str], ...]], ...]:
    """(org, model, rows) per profiled model shape of a catalog GPU id (every TP of it in ``rows``); empty for a GPU
    neither source profiled."""
    if gpu_id in VIDUR_GPU:
        files = sorted(vidur_profiles.vidur_profile_dir(VIDUR_GPU[gpu_id]).glob("*/*/mlp_median.csv"))
        return tuple((f.parent.parent.name, f.parent.name, tuple(read_rows(f))) for f in files)
    if gpu_id not in LSS_GPU:
        return ()
    from kvledger.catalog.models import load_model

    out = []
    for meta in sorted(_lss_dir(LSS_GPU[gpu_id]).glob("*/*/bf16/meta.yaml")):
        org, name = meta.parent.parent.parent.name, meta.parent.parent.name
        model = load_model(f"{org}/{name}", allow_hub=False)
        rows = [r for tp_dir in sorted(meta.parent.glob("tp*/dense.csv"))
                for r in lss_rows(tp_dir, model, int(tp_dir.parent.name[2:]))]
        out.append((org, name, tuple(rows)))
    return tuple(out)


def source_words(gpu_id: str, shapes, module: str) -> str:
    """The operator profiles behind a GPU's fit by ``module``, in words (the fit's ``source``); ``shapes``:
    ``profile_shapes(gpu_id)``."""
    tps = sorted({int(r["num_tensor_parallel_workers"]) for _, _, rows in shapes for r in rows})
    span = f"TP {tps[0]}–{tps[-1]}" if len(tps) > 1 else f"TP {tps[0]}" if tps else "no TP"
    if gpu_id in VIDUR_GPU:
        return f"Vidur operator profiles (microsoft/vidur, MIT), {VIDUR_GPU[gpu_id]}: {len(shapes)} model shapes × " \
               f"{span}, {module}"
    names = " and ".join(m for _, m, _ in shapes)
    return (f"LLMServingSim's operator profiles of vLLM 0.19 (casys-kaist/LLMServingSim, MIT), {LSS_GPU[gpu_id]}: "
            f"{names} at {span}, {module}")
