"""Step-cost models calibrated on real GPU measurements, and the registry that finds one by model, GPU and TP.

Sources (bundled under ``accounting/data/profiling/``; provenance in ``SOURCES.md`` there):

* ``distserve-vllm`` / ``distserve`` — DistServe's iteration-time model fitted on an A100-SXM-80GB
  (OSDI 2024; LLMServe/DistServe ``simdistserve/estimators/time_estimator.py``), for vLLM and for DistServe's
  own engine. Coefficients in ms: a prefill step costs a + b·Σt + c·Σt² over the prompts t in the batch; a
  decode step a + b·ΣK + c·B with K each request's KV length including the new token and B the batch
  (coefficient set ``decoding_smallbs`` below B = 95, ``decoding_largebs`` from there).
* ``vidur`` — operator-level profiles (see :mod:`kvledger.accounting.vidur_cost`).
* ``splitwise`` — Splitwise's request-level measurements (``perf_model.csv``): prefill time vs prompt
  length at batch 1, decode iteration time vs batch at 512-token prompts; a coarse cross-check.
"""

from __future__ import annotations

import csv
import functools
import json
import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

# the calibrations' names live in calibration_keys.py, which a roofline run checks its model with (without this
# module's step-cost classes); they stay importable from here
from kvledger.accounting.calibration_keys import (
    SPLITWISE_MODELS,
    VIDUR_GPU,
    calibrated_model_keys,
    calibration_model_key,
    profiling_root,
)
from kvledger.accounting.stepcost import StepCostModel, StepShape
from kvledger.errors import InputError, UnknownNameError

__all__ = ["DistServeStepCost", "SplitwiseStepCost", "CalibrationInfo", "list_calibrated", "get_calibrated_cost",
           "calibrated_model_keys",
           "CALIBRATION_SOURCES"]

CALIBRATION_SOURCES = ("distserve-vllm", "distserve", "vidur", "splitwise")


_root = profiling_root  # the bundled profiling data


@dataclass(frozen=True, slots=True)
class DistServeStepCost:
    """DistServe's fitted A100 iteration model (coefficients in ms; see the module docstring).

    A mixed step (chunked prefill, which the fitted engines never ran) is priced as the prefill formula
    with decode tokens counted among its tokens plus the decode formula's per-context term b_d·ΣK.
    For chunked prefill Σt² is generalised to Σ(2·pairs − c) = 2·prefill_attn_pairs − num_prefill_tokens,
    which equals Σt² when each chunk is a whole prompt.
    """

    name: str
    prefill: tuple[float, float, float]
    decode_small: tuple[float, float, float]
    decode_large: tuple[float, float, float]
    large_batch_threshold: int

    def _decode_coef(self, batch: int) -> tuple[float, float, float]:
        return self.decode_small if batch < self.large_batch_threshold else self.decode_large

    def step_time_s(self, shape: StepShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        if shape.num_prefill_tokens == 0:
            a, b, c = self._decode_coef(shape.num_decode_seqs)
            return float(a + b * shape.decode_kv_tokens + c * shape.num_decode_seqs) / 1000.0
        a, b, c = self.prefill
        sq = 2.0 * shape.prefill_attn_pairs - shape.num_prefill_tokens
        decode_ctx = self._decode_coef(shape.num_decode_seqs)[1] * shape.decode_kv_tokens
        t_ms = float(a + b * shape.num_tokens + c * sq + decode_ctx)
        if t_ms <= 0.0:  # a fit with a negative quadratic term turns negative far outside the prompts it was fitted on
            raise InputError(f"the calibrated step cost {self.name} prices a step of {shape.num_prefill_tokens:,} "
                             f"prefill tokens "
                             f"at {t_ms / 1000.0:.3g} s: its fit (prefill {a:g} + {b:g}·tokens + {c:g}·Σt² ms) does "
                             f"not hold "
                             "this far outside the measurements it came from; use --step-cost roofline, or calibrate "
                             "on "
                             "runs with prompts this long (kvledger calibrate)")
        return t_ms / 1000.0

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        if num_seqs == 0:
            return np.zeros(num_steps, dtype=np.float64)
        a, b, c = self._decode_coef(num_seqs)
        kv = kv_tokens + num_seqs * np.arange(num_steps, dtype=np.float64)
        return (a + b * kv + c * num_seqs) / 1000.0

    def step_times_of(self, pf_tok: np.ndarray, pf_seqs: np.ndarray, pf_kv: np.ndarray, pairs: np.ndarray,
                      dec: np.ndarray, dec_kv: np.ndarray) -> np.ndarray:
        """``step_time_s`` over arrays of StepShape's fields, s (accounting/step_split.py prices many steps' parts at
        once; no check for a negative fit here: the simulator priced, and checked, each whole step)."""
        small = dec < self.large_batch_threshold
        a_d, b_d, c_d = (np.where(small, s, large) for s, large in zip(self.decode_small, self.decode_large))
        a, b, c = self.prefill
        mixed = a + b * (pf_tok + dec) + c * (2.0 * pairs - pf_tok) + b_d * dec_kv
        out = np.where(pf_tok == 0, a_d + b_d * dec_kv + c_d * dec, mixed) / 1000.0
        return np.where(pf_tok + dec > 0, out, 0.0)


def _load_distserve(model: str, tp: int, engine: str) -> DistServeStepCost:
    path = _root() / "distserve" / f"profiler-a100-80g.{'vllm' if engine == 'distserve-vllm' else 'distserve'}.json"
    entry = json.loads(path.read_text())[model][str(tp)]
    return DistServeStepCost(f"{engine}:{model}@a100-80gb/tp{tp}", tuple(entry["prefill"]),
                             tuple(entry["decoding_smallbs"]), tuple(entry["decoding_largebs"]),
                             int(entry["decoding_large_small_bs_threshold"]))


@dataclass(frozen=True, slots=True, eq=False)
class SplitwiseStepCost:
    """Splitwise ``perf_model.csv`` medians as a step cost (ms tables, seconds out).

    prefill step: interpolated batch-1 prompt time at (prompt tokens + decode tokens in the step);
    decode step: interpolated iteration time at batch B (measured with 512-token prompts, mean context
    ``ref_kv_tokens``) + ``kv_ms_per_token`` × (ΣK − B·ref_kv_tokens), the per-token context slope fitted on
    the batch-1 prompt sweep. Outside the measured ranges the end segments are extended linearly.
    """

    name: str
    prompt_tokens: np.ndarray
    prompt_ms: np.ndarray
    batch: np.ndarray
    token_ms: np.ndarray
    kv_ms_per_token: float
    ref_kv_tokens: float = 576.0

    @staticmethod
    def _interp(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
        if x > xs[-1]:
            return float(ys[-1] + (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) * (x - xs[-1]))
        return float(np.interp(x, xs, ys))

    def step_time_s(self, shape: StepShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        if shape.num_prefill_tokens:
            return float(self._interp(shape.num_tokens, self.prompt_tokens, self.prompt_ms)) / 1000.0
        b = shape.num_decode_seqs
        extra = self.kv_ms_per_token * (shape.decode_kv_tokens - b * self.ref_kv_tokens)
        return float(max(self._interp(b, self.batch, self.token_ms) + extra, 0.1 * self.token_ms[0])) / 1000.0

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        if num_seqs == 0:
            return np.zeros(num_steps, dtype=np.float64)
        base = self._interp(num_seqs, self.batch, self.token_ms)
        kv = kv_tokens + num_seqs * np.arange(num_steps, dtype=np.float64)
        return np.maximum(base + self.kv_ms_per_token * (kv - num_seqs * self.ref_kv_tokens),
                          0.1 * self.token_ms[0]) / 1000.0


def _load_splitwise(model: str, hardware: str, tp: int) -> SplitwiseStepCost:
    with (_root() / "splitwise" / "perf_model.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r["model"] == model and r["hardware"] == hardware and int(r["tensor_parallel"]) == tp]
    prompt, batch, ctx = defaultdict(list), defaultdict(list), []
    for r in rows:
        p, b, out = int(r["prompt_size"]), int(r["batch_size"]), int(r["token_size"])
        if b == 1:
            prompt[p].append(float(r["prompt_time"]))
        if p == 512 and out == 128:
            batch[b].append(float(r["token_time"]))
        if b == 1 and out == 128:
            ctx.append((p + out / 2, float(r["token_time"])))
    xs = np.array([c for c, _ in ctx], dtype=np.float64)
    slope = float(np.polyfit(xs, np.array([t for _, t in ctx]), 1)[0])
    ps, bs = sorted(prompt), sorted(batch)
    return SplitwiseStepCost(f"splitwise:{model}@{hardware}/tp{tp}", np.array(ps, dtype=np.float64),
                             np.array([np.median(prompt[p]) for p in ps]), np.array(bs, dtype=np.float64),
                             np.array([np.median(batch[b]) for b in bs]), slope)


@dataclass(frozen=True, slots=True)
class CalibrationInfo:
    """One available calibrated cost: ``get_calibrated_cost(f"{source}:{model}", gpu, tp)``."""

    source: str
    model: str
    gpu: str
    tp: int

    @property
    def key(self) -> str:
        return f"{self.source}:{self.model}@{self.gpu}/tp{self.tp}"


_SPLITWISE_MODELS, _VIDUR_GPU = SPLITWISE_MODELS, VIDUR_GPU  # Splitwise's two models; Vidur's GPU folders


def calibration_gpu_key(gpu: str) -> str:
    """Calibration GPU key: a100-80gb, h100-80gb, h100-80gb-pcap or a40."""
    s = re.sub(r"[^a-z0-9]", "", gpu.lower()).removeprefix("nvidia")
    if s.startswith("a100") and "40gb" not in s and "pcie" not in s:
        return "a100-80gb"
    if s.startswith("h100") and "pcap" in s:
        return "h100-80gb-pcap"
    if s.startswith("h100") and "pcie" not in s and "nvl" not in s:
        return "h100-80gb"
    if s == "a40":
        return "a40"
    raise UnknownNameError("GPU with calibration data", gpu, ["A100-80GB", "H100-80GB", "H100-80GB-pcap", "A40"],
                           hint="Use the roofline step cost for other GPUs.")


@functools.lru_cache(maxsize=1)
def list_calibrated() -> list[CalibrationInfo]:
    """Every (source, model, GPU, TP) the bundled data supports, sorted."""
    root, out = _root(), []
    for engine, file in (("distserve-vllm", "vllm"), ("distserve", "distserve")):
        for model, tps in json.loads((root / "distserve" / f"profiler-a100-80g.{file}.json").read_text()).items():
            out += [CalibrationInfo(engine, model, "a100-80gb", int(tp)) for tp in tps]
    for gpu_key, folder in _VIDUR_GPU.items():
        for path in (root / "vidur" / "compute" / folder).glob("*/*/mlp_median.csv"):
            model = f"{path.parent.parent.name}/{path.parent.name}"
            with path.open(newline="") as f:
                tps = sorted({int(r["num_tensor_parallel_workers"]) for r in csv.DictReader(f)})
            has_net = (root / "vidur" / "network" / f"{folder}_dgx").is_dir()
            out += [CalibrationInfo("vidur", model, gpu_key, tp) for tp in tps if tp == 1 or has_net]
    with (root / "splitwise" / "perf_model.csv").open(newline="") as f:
        combos = {(r["model"], r["hardware"], int(r["tensor_parallel"])) for r in csv.DictReader(f)}
    out += [CalibrationInfo("splitwise", _SPLITWISE_MODELS[m], hw, tp) for m, hw, tp in combos]
    return sorted(out, key=lambda c: (c.source, c.model, c.gpu, c.tp))


@functools.lru_cache(maxsize=64)
def _build(info: CalibrationInfo, include_cpu_overhead: bool) -> StepCostModel:
    if info.source in ("distserve-vllm", "distserve"):
        return _load_distserve(info.model, info.tp, info.source)
    if info.source == "splitwise":
        raw = {v: k for k, v in _SPLITWISE_MODELS.items()}[info.model]
        return _load_splitwise(raw, info.gpu, info.tp)
    import yaml  # only the Vidur tables need it (keeps `simulate`'s start-up light)

    from kvledger.accounting.vidur_cost import build_vidur_cost  # likewise

    root = _root() / "vidur"
    config = yaml.safe_load((root / "model_configs" / f"{info.model}.yml").read_text())
    return build_vidur_cost(root, _VIDUR_GPU[info.gpu], info.model, info.tp, config,
                            include_cpu_overhead=include_cpu_overhead, gpu_label=info.gpu)


def get_calibrated_cost(name_or_model: str, gpu: str = "A100-80GB", tp: int = 1, *, source: str | None = None,
                        include_cpu_overhead: bool = True) -> StepCostModel:
    """The calibrated step cost for a model on a GPU at tensor-parallel degree ``tp``.

    Args:
        name_or_model: a model (HF id or its last part, case-insensitive: "facebook/opt-13b",
            "Llama-2-70b-hf", "llama2-70b") or "source:model" (e.g. "vidur:meta-llama/Llama-2-7b-hf").
        gpu: "A100-80GB", "H100" / "H100-SXM", "H100-80GB-pcap" (Splitwise's power-capped runs), "A40".
        tp: tensor-parallel degree.
        source: one of ``CALIBRATION_SOURCES``; default: the first that covers the request in that order.
        include_cpu_overhead: Vidur only — add the per-step CPU overhead tables.

    Raises:
        UnknownNameError: no calibration for that combination (the message lists what exists).
    """
    if ":" in name_or_model and name_or_model.split(":", 1)[0] in CALIBRATION_SOURCES:
        source, name_or_model = name_or_model.split(":", 1)
    if source is not None and source not in CALIBRATION_SOURCES:
        raise UnknownNameError("calibration source", source, CALIBRATION_SOURCES)
    if tp < 1:
        raise InputError(f"tensor-parallel degree must be ≥ 1, got {tp}")
    gpu_key, model_key = calibration_gpu_key(gpu), calibration_model_key(name_or_model)
    matches = [c for c in list_calibrated() if calibration_model_key(c.model) == model_key and c.gpu == gpu_key
               and c.tp == tp and (source is None or c.source == source)]
    if not matches:
        known = [c.key for c in list_calibrated()]
        raise UnknownNameError("calibrated step cost",
                               f"{source + ':' if source else ''}{name_or_model}@{gpu_key}/tp{tp}",
                               known, hint=f"Available: {', '.join(known)}.")
    best = min(matches, key=lambda c: CALIBRATION_SOURCES.index(c.source))
    return _build(best, include_cpu_overhead)
