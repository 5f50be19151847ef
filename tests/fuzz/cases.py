"""Seeded fuzz cases for every input kind kvledger reads and every command: mutated real files, mutated logs and price
tables, and generated flag combinations. Shared by ``tests/fuzz/test_fuzz.py`` (a few hundred cases per kind) and
``benchmarks/fuzz.py`` (thousands).

A case is ``(kind, seed)``; :func:`run_case` builds it with ``random.Random(seed)``, runs it and says what the user
would have seen: "ok" (a result whose invariants hold), "clean error" (a KvLedgerError, or exit 2/3 with a message),
"traceback" (any other exception) or "impossible result" (strict JSON broken, or an invariant violated).
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _cli import invoke, strict_json_lines

from kvledger.errors import KvLedgerError

__all__ = ["KINDS", "run_case", "Impossible"]

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "tests" / "evidence" / "data"
LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"
PRICES = ROOT / "src" / "kvledger" / "catalog" / "data"


class Impossible(AssertionError):
    """A result that cannot be true (negative time, attainment above 1, goodput above throughput, NaN in JSON)."""


# --- seeds: real files, plus small constructed files in layouts the repository has no sample of ---------------------

_VLLM_DETAILED = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "request_rate": "inf", "duration": 4.0,
                  "completed": 4,
                  "failed": 1, "request_throughput": 1.0, "max_concurrency": None, "request_goodput": None,
                  "mean_ttft_ms": 312.5, "p99_ttft_ms": 990.0, "mean_tpot_ms": 25.0,
                  "input_lens": [100, 200, 300, 400, 500], "output_lens": [3, 0, 7, 2, 1], "ttfts": [0.25, 0.0, 0.0, 1,
                      0.5],
                  "itls": [[0.02, 0.03], [], [], [1], []], "latencies": [0.3, 2.0, 0.9, 2, 0.5],
                  "start_times": [1000.5, 1000.0, 1001.0, 1002.25, 1003.0], "generated_texts": ["a", "", "b", "c", "d"],
                  "errors": ["", "Internal Server Error", "", None, ""]}
_RECORDS = {"metadata": {"source": "simulator", "source_format": "simulator", "model": "m", "hardware": "H100",
                         "num_gpus": 1,
                         "concurrency": None, "request_rate": "inf", "duration_s": None, "time_origin": None,
                             "definitions": [],
                         "extra": {}},
            "records": [{"request_id": str(i), "arrival_s": 0.1 * i, "num_prompt_tokens": 10 + i,
                         "num_output_tokens": 4,
                         "first_token_s": 0.1 * i + 0.05, "finish_s": 0.1 * i + 0.2,
                         "chunk_times_s": [0.1 * i + 0.05, 0.1 * i + 0.1, 0.1 * i + 0.15, 0.1 * i + 0.2],
                         "num_cached_tokens": 0, "num_preemptions": 0, "error": None} for i in range(4)]}


def _genai_chunk(text: str, usage: dict | None = None) -> dict[str, str]:
    body = {"choices": [{"delta": {"content": text}}], **({"usage": usage} if usage else {})}
    return {"response": "data: " + json.dumps(body)}


# GenAI-Perf's raw profile_export.json (formats.md §3): ns timestamps, OpenAI SSE chunks as response bodies
_GENAI_RAW = {"service_kind": "openai", "endpoint": "v1/chat/completions",
              "experiments": [{"experiment": {"mode": "concurrency", "value": 2},
                               "requests": [{"timestamp": 1_000_000_000 + 250_000_000 * i,
                                             "response_timestamps": [1_000_000_000 + 250_000_000 * i
                                                                     + 40_000_000 * (k + 1) for k in range(4)],
                                             "response_outputs": [_genai_chunk(""), _genai_chunk("Hel"),
                                                                  _genai_chunk("lo"),
                                                                  _genai_chunk("", {"prompt_tokens": 12 + i,
                                                                                    "completion_tokens": 2})]}
                                            for i in range(4)]},
                              {"experiment": {"mode": "request_rate", "value": 4.0},
                               "requests": [{"timestamp": 5, "response_timestamps": [9, 12],
                                             "response_outputs": [{"text_output": "a"},
                                                                  {"response": "data: [DONE]"}]}]}]}


def _seed_files() -> list[tuple[str, str]]:
    """(file name, text) of every benchmark seed."""
    out = [(p.name, p.read_text()) for p in sorted(EVIDENCE.rglob("*")) if p.suffix in (".json", ".jsonl",
                                                                                        ".csv") and p.is_file()]
    out.append(("vllm_detailed.json", json.dumps(_VLLM_DETAILED)))
    out.append(("vllm_append.jsonl", json.dumps(_VLLM_DETAILED) + "\n" + json.dumps(_VLLM_DETAILED) + "\n"))
    out.append(("sglang.jsonl", json.dumps({**_VLLM_DETAILED, "total_output_tokens_retokenized": 12,
                                            "mean_e2e_latency_ms": 800.0})))
    out.append(("records.json", json.dumps(_RECORDS)))
    out.append(("profile_export.json", json.dumps(_GENAI_RAW)))
    return out


_SEEDS: list[tuple[str, str]] | None = None

_DEEP: Any = 1
for _ in range(60):
    _DEEP = [_DEEP]
_BAD_VALUES: list[Any] = [None, 0, -1, -74.3, 1e308, -1e308, math.nan, math.inf, -math.inf, "", "abc", "12", [], {},
                          True,
                          10**30, 2**70, "x" * 300, _DEEP, 1e-300, 0.5]


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if len(prefix) > 12:
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):
            out += _paths(v, prefix + (i,))
    return out


def _mutate_json(rng: random.Random, obj: Any) -> Any:
    obj = copy.deepcopy(obj)
    for _ in range(rng.choice((1, 1, 2, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            return copy.deepcopy(rng.choice(_BAD_VALUES))
        path = rng.choice(paths)
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        key, op = path[-1], rng.random()
        if op < 0.45:
            parent[key] = copy.deepcopy(rng.choice(_BAD_VALUES))
        elif op < 0.55:
            parent[key] = _swap_type(rng, parent[key])
        elif op < 0.62:
            parent[key] = rng.choice(([parent[key]], {"value": parent[key]}, [[parent[key]]]))  # nested one level down
        elif op < 0.7 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
            parent[key] = parent[key] * rng.choice((1e6, 1e-6, 1e12, 1024, -1))  # scaled: units confused
        elif op < 0.8:
            del parent[key]
        elif op < 0.9 and isinstance(parent[key], list):
            parent[key] = parent[key][: rng.randint(0, 1)]
        else:
            parent[key] = copy.deepcopy(parent[key]) if not isinstance(parent[key], (int, float)) else -parent[key]
    return obj


def _swap_type(rng: random.Random, v: Any) -> Any:
    """The same value in another JSON type: a number as a string, a string as a number, a list as an object..."""
    if isinstance(v, bool):
        return rng.choice((int(v), str(v).lower(), [v]))
    if isinstance(v, (int, float)):
        return rng.choice((str(v), [v], {"v": v}, bool(v)))
    if isinstance(v, str):
        return rng.choice((len(v), [v], {"v": v}, v.encode().hex()))
    if isinstance(v, list):
        return rng.choice(({str(i): x for i, x in enumerate(v)}, json.dumps(v), len(v)))
    if isinstance(v, dict):
        return rng.choice((list(v.values()), list(v), json.dumps(v)))
    return rng.choice((0, "", []))


def _mutate_text(rng: random.Random, text: str) -> str:
    op = rng.random()
    if op < 0.3:
        return text[: rng.randint(0, len(text))]
    if op < 0.6:
        i = rng.randrange(max(len(text), 1))
        return text[:i] + rng.choice(["\x00", "{", "]", ",", "\n", "NaN", "-", "é", "9" * 40]) + text[i + 1:]
    if op < 0.8:
        nums = list(re.finditer(r"\d+(?:\.\d+)?", text))
        if nums:
            m = rng.choice(nums)
            return text[: m.start()] + rng.choice(["-1", "1.2.3", "nan", "1e999", "", "9" * 400, "-0.5",
                                                   "0"]) + text[m.end():]
    if op < 0.9:
        return rng.choice(["[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000])
    return text + rng.choice(["\n", "\n{}", "garbage", "\n" + text[:200]])


# --- invariants -------------------------------------------------------------------------------------------------------

def check_goodput(g: Any) -> None:
    """Raise Impossible when a goodput result breaks its own definitions."""
    if not (0.0 <= g.attainment <= 1.0):
        raise Impossible(f"attainment {g.attainment}")
    if not (0 <= g.num_good <= g.num_completed <= g.num_requests):
        raise Impossible(f"counts good {g.num_good} completed {g.num_completed} requests {g.num_requests}")
    for name in ("goodput_req_per_s", "throughput_req_per_s", "goodput_output_tok_per_s", "throughput_output_tok_per_s",
                 "goodput_input_tok_per_s", "throughput_input_tok_per_s", "duration_s"):
        v = getattr(g, name, None)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise Impossible(f"{name} = {v}")
    for good, thr in (("goodput_req_per_s", "throughput_req_per_s"), ("goodput_output_tok_per_s",
                                                                      "throughput_output_tok_per_s")):
        a, b = getattr(g, good, None), getattr(g, thr, None)
        if a is not None and b is not None and a > b * (1 + 1e-9) + 1e-12:
            raise Impossible(f"{good} {a} > {thr} {b}")


_NONNEG = re.compile(r"(_s|_bytes|_tokens|_req_per_s|_tok_per_s|_blocks|^num_.*|_count)$")
_SIGNED = re.compile(
    r"delta|diff|error|gain|change|saving|margin|gap|vs_|_vs|over|minus|net|headroom|slack|excess|offset|"
    r"shortfall|surplus|deviation|residual|relative|pct|cudagraph",
    re.I,
)
_UNIT = re.compile(r"(^|_)(attainment|hit_rate|kv_usage|usage_mean|usage_max)$")
# every share or fraction is in [0, 1]; every concurrency is ≥ 0 (issue 22: 2,537.6 % "share of held KV")
_SHARE = re.compile(r"(^|_)(share|fraction)$|_share_|^share_|token_state_share|kv_bytes_share")
_CONC = re.compile(r"concurrency")


def check_json(value: Any, path: str = "") -> None:
    """Walk a --json document: times, bytes, tokens and counts ≥ 0; attainment, hit rates and usage in [0, 1]."""
    if isinstance(value, dict):
        for k, v in value.items():
            key = str(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if _NONNEG.search(key) and not _SIGNED.search(path + "." + key) and v < 0:
                    raise Impossible(f"{path}.{key} = {v} < 0")
                if (_UNIT.search(key) or _SHARE.search(key)) and not _SIGNED.search(key) and not 0 <= v <= 1 + 1e-12:
                    raise Impossible(f"{path}.{key} = {v} outside [0, 1]")
                if _CONC.search(key) and v < 0:
                    raise Impossible(f"{path}.{key} = {v} < 0")
            check_json(v, f"{path}.{key}")
        kv = value.get("kv_usage") if isinstance(value.get("kv_usage"), dict) else {}
        if any(isinstance(kv.get(k), (int, float)) and not 0 <= kv[k] <= 1 + 1e-12 for k in ("mean", "mean_busy",
            "max")):
            raise Impossible(f"{path}.kv_usage outside [0, 1]: {kv}")
        mean, peak = kv.get("mean", value.get("kv_usage_mean")), kv.get("max", value.get("kv_usage_max"))
        if isinstance(mean, (int, float)) and isinstance(peak, (int, float)) and mean > peak + 1e-12:
            raise Impossible(f"{path}: kv_usage_mean {mean} > kv_usage_max {peak}")
    elif isinstance(value, list):
        for i, v in enumerate(value[:200]):
            check_json(v, f"{path}[{i}]")


# --- case kinds -------------------------------------------------------------------------------------------------------

_SLOS = ["ttft=200ms", "ttft=1s,tpot=50ms", "e2e=20s", "itl=100ms", "tpot=40ms,e2e=10s", ""]


def _benchmark_file(rng: random.Random, tmp: Path) -> str:
    """A mutated benchmark file read by every reader (auto-detected, or a forced format), then goodput on each run."""
    global _SEEDS
    from kvledger.evidence import READERS, read_runs
    from kvledger.ledgers.goodput import goodput
    from kvledger.ledgers.slo import parse_slo

    _SEEDS = _SEEDS or _seed_files()
    name, text = rng.choice(_SEEDS)
    try:
        value: Any = json.loads(text)
        structured = True
    except json.JSONDecodeError:
        structured = False
    if structured and rng.random() < 0.75:
        text = json.dumps(_mutate_json(rng, value))  # NaN/Infinity written as Python does, as broken tools do
    else:
        text = _mutate_text(rng, text)
    p = tmp / name
    p.write_text(text)
    if rng.random() < 0.01:
        p = tmp / ("x" * 300 + ".json")  # a name longer than the file system allows
    fmt = rng.choice(list(READERS)) if rng.random() < 0.15 else None
    try:
        runs = read_runs(p, format=fmt)
        for run in runs:
            check_goodput(goodput(run, parse_slo(rng.choice(_SLOS))))
    except KvLedgerError:
        return "clean error"
    return "ok"


def _vllm_log(rng: random.Random, tmp: Path) -> str:
    """A mutated real vLLM (or other engine's) log, parsed and read by the doctor."""
    from kvledger.evidence.vllm_log import parse_vllm_log

    logs = sorted(LOGS.glob("*.log"))
    lines = rng.choice(logs).read_text().splitlines()
    for _ in range(rng.randint(1, 4)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.random()
        if op < 0.6:
            lines[i] = _mutate_text(rng, lines[i])
        elif op < 0.8:
            del lines[i]
        else:
            lines.insert(i, lines[rng.randrange(len(lines))])
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.8:
        parse_vllm_log(text, "fuzzed.log")
        return "ok"
    p = tmp / "fuzzed.log"
    p.write_text(text)
    return _cli_outcome(["doctor", str(p), "--json"])


def _price_table(rng: random.Random, tmp: Path) -> str:
    """A mutated bundled price table (one cell, a header or a row changed)."""
    from kvledger.catalog.prices import api_prices_from_text, gpu_prices_from_text

    name, parse = rng.choice([("api_prices.csv", api_prices_from_text), ("gpu_prices.csv", gpu_prices_from_text)])
    rows = (PRICES / name).read_text().splitlines()
    i = rng.randrange(len(rows))
    cells = rows[i].split(",")
    j = rng.randrange(len(cells))
    cells[j] = rng.choice(["", "-1", "nan", "inf", "1e999", "abc", "0", "2.5", "99999999", '"', "1,2"])
    rows[i] = ",".join(cells)
    try:
        parse("\n".join(rows), name)
    except KvLedgerError:
        return "clean error"
    return "ok"


# flag → values: valid ones first, then edge and invalid ones (0, negatives, NaN, inf, huge, words)
_EDGE_F = ["0", "-1", "nan", "inf", "-inf", "1e30", "abc"]
_EDGE_I = ["0", "-1", "99999999999999999999", "1.5", "abc"]
_MODEL, _GPU = "meta-llama/Llama-3.2-3B", "H100"
_MODELS = [_MODEL, "Qwen/Qwen3-8B", "google/gemma-2-9b-it", "openai/gpt-oss-20b", "ai21labs/Jamba-v0.1",
           "deepseek-ai/DeepSeek-V3",
           "Qwen/Qwen3-Next-80B-A3B-Thinking", "meta-llama/Llama-2-7b-hf",
               str(ROOT / "tests" / "fixtures" / "configs" / "Qwen3-0.6B.json")]
_GPUS = [_GPU, "A100", "B200", "L4", "H200"]
_SIM = {"--rate": ["2", "50", "inf", *_EDGE_F], "--rate-scale": ["0.5", "3", *_EDGE_F], "--num-requests": ["1", "7",
    "30", "0", "-1", "abc"],
        "--seed": ["0", "7", "-1", "2**70", "abc"], "--concurrency": ["1", "4", *_EDGE_I], "--think-time": ["0", "0.5",
            *_EDGE_F],
        "--tp": ["1", "2", "3", *_EDGE_I], "--gpu-memory-utilization": ["0.5", "0.9", "1", "1.01", *_EDGE_F],
        "--block-size": ["16", "1", "4097", *_EDGE_I], "--max-num-seqs": ["1", "8", *_EDGE_I],
        "--max-num-batched-tokens": ["64", "8K", "0", "-5", "abc", "1e30"], "--max-model-len": ["512", "2K", "0", "abc",
            "99999999999"],
        "--kv-cache-dtype": ["auto", "fp8", "int3"], "--num-gpu-blocks-override": ["8", "300", *_EDGE_I],
        "--replicas": ["1", "2", *_EDGE_I], "--router": ["round_robin", "prefix_aware", "random"],
        "--trace": ["azure-conv", "azure-code", "mooncake", "nope"], "--cpu-overhead": ["2ms", "0", "-1ms", "abc"],
        "--step-cost": ["roofline", "calibrated", "nope"], "--policy": ["vllm", "sglang", "static", "contiguous", "x"],
        "--mem-fraction-static": ["0.8", *_EDGE_F], "--allreduce-link-share": ["0.35", "1", "1.5", *_EDGE_F]}
_PLAN = {"--tp": _SIM["--tp"], "--gpu-memory-utilization": _SIM["--gpu-memory-utilization"],
         "--max-model-len": _SIM["--max-model-len"],
         "--context": ["8K", "128K,1K", "0", "-1", "abc"], "--engine": ["vllm", "sglang", "trtllm", "x"],
         "--engine-version": ["0.6.0", "0.11.0", "0.33.0", "9.9", "abc"], "--kv-cache-dtype": _SIM["--kv-cache-dtype"],
         "--max-num-seqs": _SIM["--max-num-seqs"], "--block-size": _SIM["--block-size"],
         "--available-kv-memory": ["10GiB", "0", "-1GiB", "abc", "1e30GiB"], "--gpu-memory": ["79GiB", "0", "abc",
             "1PiB"],
         "--gpu-bandwidth": ["3.35", *_EDGE_F], "--gpu-bf16-tflops": ["989", *_EDGE_F],
         "--achievable-flops-fraction": ["0.7", *_EDGE_F], "--achievable-bandwidth-fraction": ["0.8", *_EDGE_F],
         "--mem-fraction-static": ["0.8", *_EDGE_F], "--weights-memory": ["1GiB", "-1", "abc"],
             "--num-gpu-blocks-override": ["100", *_EDGE_I], "--allreduce-link-share": _SIM["--allreduce-link-share"]}
_ANALYSIS = {"--tp": _SIM["--tp"], "--max-model-len": _SIM["--max-model-len"],
             "--gpu-memory-utilization": _SIM["--gpu-memory-utilization"],
             "--block-size": _SIM["--block-size"], "--engine-version": _PLAN["--engine-version"]}
_COMMANDS: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "plan": (["plan", _MODEL, "--gpu", _GPU], _PLAN),
    "simulate": (["simulate", _MODEL, "--gpu", _GPU, "--num-requests", "12"], _SIM),
    "goodput": (["goodput", str(EVIDENCE / "inference-perf" / "stage_0_lifecycle_metrics.json"), "--slo", "ttft=1s"],
                {"--slo": ["ttft=1s", "tpot=20ms,e2e=1s", "ttft=-1s", "itl=nan", "abc=1", "ttft=0"], "--target": ["0.9",
                    *_EDGE_F],
                 "--format": ["vllm-bench-serve", "guidellm", "nope"], "--rate": ["2", *_EDGE_F], "--seed": ["1",
                     "-1"]}),
    "goodput-sim": (["goodput", "--simulate", _MODEL, "--gpu", _GPU, "--num-requests", "12", "--slo", "ttft=1s"],
                    {**{k: _SIM[k] for k in ("--rate", "--seed", "--concurrency", "--tp", "--max-num-seqs", "--trace",
                                             "--rate-scale")},
                     "--target": ["0.9", "1", *_EDGE_F], "--tol": ["0.5", *_EDGE_F], "--lo": ["1", *_EDGE_F],
                         "--hi": ["8", *_EDGE_F],
                     "--axis": ["request_rate", "concurrency", "max_num_seqs", "x"]}),
    "cost": (["cost", str(EVIDENCE / "inference-perf" / "stage_3_lifecycle_metrics.json"), "--slo", "ttft=500ms",
              "--api", "OpenAI:gpt-4.1",
              "--utilization", "0.5", "--gpu-usd-per-hour", "2.5"],
             {"--utilization": ["0.5", "1", *_EDGE_F], "--gpu": ["H100", "nvidia_h100_sxm", "x"],
              "--gpu-usd-per-hour": ["2", "H100=2.5", "L4=1", "H100=2,h100_sxm=3", "H100=", "=2", "H100=-1", "x=1",
                                     *_EDGE_F],
              "--num-gpus": ["1", "8", *_EDGE_I], "--prefill-share": ["0.2", *_EDGE_F], "--batch-share": ["0.5",
                  *_EDGE_F],
              "--cache-hit-rate": ["0.3", *_EDGE_F], "--monthly-requests": ["1e6", *_EDGE_F], "--run": ["0", "5", "-1"],
              "--engineer-months-per-month": ["0.5", *_EDGE_F], "--max-utilization": ["0.8", *_EDGE_F]}),
    "fp8-kv": (["fp8-kv", _MODEL, "--gpu", _GPU], {**_ANALYSIS, "--concurrency": ["1", "64", *_EDGE_I],
                                                   "--contexts": ["1K,8K", "0", "abc"],
                                                   "--overhead-ns-per-element": ["0", *_EDGE_F],
                                                       "--flops-fraction": ["0.7", *_EDGE_F]}),
    "spec-decode": (["spec-decode", _MODEL, "--gpu", _GPU, "--num-requests", "10", "--output-tokens", "16",
                     "--draft-tokens", "4",
                     "--acceptance", "0.7", "--draft-cost-fraction", "0.05"],
                    {**_ANALYSIS, "--draft-tokens": ["1", "4", *_EDGE_I], "--acceptance": ["0.7", "1", *_EDGE_F],
                     "--draft-cost-fraction": ["0.05", *_EDGE_F], "--rates": ["1,2", "0", "abc", "-1"], "--seed": ["0",
                         "-1"],
                     "--context": ["2048", "0", "abc"]}),
    "kv-eviction": (["kv-eviction", _MODEL, "--gpu", _GPU, "--evict", "0.5"],
                    {**_ANALYSIS, "--evict": ["0", "0.9", "1", *_EDGE_F], "--layout": ["scattered", "sink-window",
                                                                                       "clustered", "x"],
                     "--sink-tokens": ["4", *_EDGE_I], "--run-tokens": ["64", *_EDGE_I], "--seed": ["0", "-1"],
                         "--context": ["8K", "0", "abc"]}),
    "doctor": (["doctor", str(LOGS / "v0.14_qwen3-1.7b.log")],
               {"--replicas": ["1", "4", *_EDGE_I], "--prefix-share": ["0.5", *_EDGE_F], "--gpu": ["H100", "x"],
                "--model": [_MODEL, "x"]}),
    "disagg": (["disagg", _MODEL, "--gpu", _GPU, "--num-requests", "12", "--no-tune"],
               {"--num-gpus": ["2", "4", *_EDGE_I], "--rate": ["5", *_EDGE_F], "--attainment": ["0.9", *_EDGE_F],
                "--seed": ["0", "-1"],
                "--link": ["nvlink", "pcie", "50GB/s", "0GB/s", "abc"], "--transfer-latency": ["1ms", "-1ms", "abc"],
                "--prefill-tp": ["1", *_EDGE_I], "--tp": ["1", *_EDGE_I]}),
    "catalog": (["gpus"], {}),
    "prices": (["prices"], {"--kind": ["api", "gpu", "tier", "all", "x"], "--provider": ["OpenAI", "nope"],
                            "--gpu": ["H100", "x"]}),
}
# commands whose valid runs are long (a configuration search, a calibration fit, a report): only values that must be
# refused before any work starts are drawn, so each case checks the boundary and stays short
_BAD = ["nan", "-1", "abc", "-inf"]
_REFUSE_ONLY: dict[str, tuple[list[str], list[str]]] = {
    "search": (["search", _MODEL, "--slo", "ttft=1s"], ["--target", "--arrival-cv", "--num-requests", "--seed",
                                                        "--rate", "--monthly-tokens",
                                                        "--gpu-memory-utilization", "--utilization",
                                                            "--max-utilization", "--batch-share",
                                                        "--cache-hit-rate", "--workers", "--top",
                                                        "--allreduce-link-share", "--gpu-usd-per-hour"]),
    "report": (["report", _MODEL, "--gpu", _GPU], ["--num-requests", "--seed", "--target", "--gpu-memory-utilization",
                                                   "--max-num-seqs",
                                                   "--utilization", "--gpu-usd-per-hour", "--batch-share",
                                                       "--engineer-months-per-month"]),
    "calibrate": (["calibrate", str(EVIDENCE / "inference-perf" / "stage_0_lifecycle_metrics.json")],
                  ["--gpu-memory-utilization", "--block-size", "--max-num-seqs", "--num-gpu-blocks-override",
                   "--max-paddings"]),
    "validate": (["validate", str(EVIDENCE / "inference-perf" / "stage_0_lifecycle_metrics.json")],
                 ["--gpu-memory-utilization", "--block-size", "--max-num-seqs", "--num-gpu-blocks-override",
                  "--max-paddings"]),
}


def _cli_outcome(args: list[str]) -> str:
    res = invoke(args)
    if res.traceback:
        raise res.exception  # type: ignore[misc]
    # exit 1: doctor diagnosed a server that did not start (or a log cut during start-up), or search could not
    # evaluate a candidate (both say so)
    failed_ok = res.code == 1 and args[0] in ("doctor", "search")
    if res.code not in (0, 2, 3) and not failed_ok:
        raise Impossible(f"exit status {res.code}")
    quoted = args[0] == "doctor"  # doctor quotes the log's own traceback lines as its evidence
    if "Traceback (most recent call last)" in res.err + ("" if quoted else res.out):
        raise Impossible("traceback text in the output")
    if (res.code == 0 or failed_ok) and "--json" in args:
        try:
            docs = strict_json_lines(res.out)
        except ValueError as err:
            raise Impossible(f"not strict JSON: {err}") from None
        for d in docs:
            check_json(d)
            if failed_ok and args[0] == "doctor" and d.get("failed") is not True and d.get("unfinished") is not True:
                raise Impossible("doctor exited 1 without a failure or a log that ends during start-up")
    return "ok" if res.code in (0, 1, 3) else "clean error"


# the flags that name a file, per command ("FILE": the positional benchmark file or log)
_FILE_FLAGS = {"simulate": ["--trace", "--step-cost", "--out"], "goodput": ["FILE", "--out", "--plot", "--step-cost"],
               "cost": ["FILE", "--out"], "fp8-kv": ["--calibration", "--plot"], "spec-decode": ["--plot"],
               "doctor": ["FILE", "--model", "--gpu"], "plan": ["--gpu"]}


def _odd_name(rng: random.Random, tmp: Path, flag: str) -> str:
    """A file name a user (or a script gone wrong) might pass: too long, missing, a folder, a device, garbage."""
    garbage = tmp / "garbage.json"
    garbage.write_bytes(bytes(rng.randrange(256) for _ in range(64)))
    suffix = {"--plot": ".png", "--calibration": ".csv", "--step-cost": ".json"}.get(flag, ".json")
    name = rng.choice(["x" * 300 + suffix, "x" * 300, str(tmp / ("y" * 300) / ("a" + suffix)),
                       f"/nonexistent/a{suffix}",
                       str(tmp), str(tmp) + "/", "-", "~/nope" + suffix, "a\u00e9b" + suffix, str(garbage), "/dev/null",
                       "/proc/self/status", " ", "a" * 4100, str(tmp / "new" / "deeper" / ("f" + suffix))])
    # a relative name is taken inside the case's folder (an output must not land in the working directory); so is
    # "~/nope…", which no shell expanded here: a literal "~" folder, relative like any other name
    return name if name.startswith("/") or len(name) > 255 else str(tmp / name)


def _cli(rng: random.Random, tmp: Path) -> str:
    """A command with a random subset of its flags at random values (valid, edge or invalid)."""
    if rng.random() < 0.15:
        base, flags = _REFUSE_ONLY[rng.choice(list(_REFUSE_ONLY))]
        args = [*base, rng.choice(flags), rng.choice(_BAD), "--json"]
        if _cli_outcome(args) != "clean error":
            raise Impossible(f"{args} was not refused")
        return "clean error"
    base, opts = _COMMANDS[rng.choice(list(_COMMANDS))]
    args = []
    for a in base:
        if a == _MODEL and rng.random() < 0.5:
            a = rng.choice(_MODELS)
        elif a == _GPU and rng.random() < 0.3:
            a = rng.choice(_GPUS)
        args.append(a)
    for flag in rng.sample(list(opts), k=min(len(opts), rng.choice((1, 1, 2, 3)))):
        vals = opts[flag]
        v = rng.choice(vals[:2]) if rng.random() < 0.6 else rng.choice(vals)
        if flag in args:
            args[args.index(flag) + 1] = v
        else:
            args += [flag, v]
    if rng.random() < 0.12 and base[0] in _FILE_FLAGS:
        flag = rng.choice(_FILE_FLAGS[base[0]])
        v = _odd_name(rng, tmp, flag)
        if flag in args:
            args[args.index(flag) + 1] = v
        elif flag == "FILE":
            args[1] = v
        else:
            args += [flag, v]
    if "--out" not in args and base[0] in ("simulate", "goodput", "cost") and rng.random() < 0.1:
        # 300 bytes: too long a name
        name = "x" * 300 if rng.random() < 0.2 else ("run" if base[0] == "simulate" else "out.json")
        args += ["--out", str(tmp / name)]
    if rng.random() < 0.7:
        args.append("--json")
    return _cli_outcome(args)


TRACES = ROOT / "src" / "kvledger" / "dynamics" / "workload" / "data" / "traces"
MODELS = ROOT / "src" / "kvledger" / "catalog" / "data" / "models"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
ORACLE_SEEDS = [ROOT / "benchmarks" / "data" / "oracle_configs" / f"{mt}.json"
                for mt in ("deepseek_v4", "gemma4_assistant", "mamba", "rwkv", "xlstm")]
"""Default configs of layouts no bundled model has: DeepSeek-V4's compressed attention, a query-only draft, recurrent
states (Mamba, RWKV, xLSTM)."""


def _trace_file(rng: random.Random, tmp: Path) -> str:
    """The first rows of a bundled trace (CSV or JSONL), mutated, read as a trace and turned into requests."""
    from kvledger.dynamics.workload.traces import load_trace

    src = rng.choice(sorted(TRACES.rglob("*.csv")) + sorted(TRACES.rglob("*.jsonl")))
    with src.open(encoding="utf-8") as f:
        head = "".join(next(f, "") for _ in range(rng.randint(1, 40)))
    f = tmp / f"trace{src.suffix}"
    f.write_text(_mutate_text(rng, head), encoding="utf-8", errors="surrogatepass")
    try:
        reqs = load_trace(f, seed=rng.randrange(1000))
    except KvLedgerError:
        return "clean error"
    for r in reqs:
        if not (
            r.arrival_s >= 0 and math.isfinite(r.arrival_s) and r.num_prompt_tokens >= 1 and r.num_output_tokens >= 1
        ):
            raise Impossible(f"trace request {r}")
    return "ok"


def _model_config(rng: random.Random, tmp: Path) -> str:
    """A mutated real config.json (bundled or a test fixture), read and planned on an H100."""
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    src = rng.choice(sorted(MODELS.glob("*.json")) + sorted(CONFIGS.glob("*.json")) + ORACLE_SEEDS)
    obj = json.loads(src.read_text(encoding="utf-8"))
    f = tmp / "config.json"
    if rng.random() < 0.8:
        f.write_text(json.dumps(_mutate_json(rng, obj)), encoding="utf-8")
    else:
        f.write_text(_mutate_text(rng, json.dumps(obj)), encoding="utf-8", errors="surrogatepass")
    try:
        plan = build_plan(load_model(str(f)), get_gpu("H100"), make_settings(), with_roofline=False)
    except KvLedgerError:
        return "clean error"
    if (
        plan.kv.bytes_per_token < 0
        or plan.memory.num_gpu_blocks < 0
        or any(r.max_requests < 0 for r in plan.concurrency)
    ):
        raise Impossible("negative KV bytes, blocks or requests")
    if plan.memory.num_gpu_blocks > 0 and rng.random() < 0.2:  # and served: a short simulation of the mutated model
        return _cli_outcome(["simulate", str(f), "--gpu", "H100", "--num-requests", "8", "--max-model-len", "2K",
                             "--trace", "azure-conv", "--json"])
    return "ok"


_GPU_FILE = {"name": "My GPU", "memory": "79.22GiB", "bandwidth_tb_s": 3.35, "bf16_tflops": 989.0, "fp8_tflops": 1979.0}


def _gpu_file(rng: random.Random, tmp: Path) -> str:
    """A mutated GPU file (JSON or TOML), resolved and used for a plan."""
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    obj = _mutate_json(rng, _GPU_FILE)
    if rng.random() < 0.5 and isinstance(obj, dict):
        f = tmp / "gpu.toml"
        f.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in obj.items() if isinstance(k, str)) + "\n",
                     encoding="utf-8")
    else:
        f = tmp / "gpu.json"
        f.write_text(json.dumps(obj), encoding="utf-8")
    try:
        plan = build_plan(load_model("meta-llama/Llama-3.2-3B"), resolve_gpu(str(f)), make_settings())
    except KvLedgerError:
        return "clean error"
    if plan.memory.num_gpu_blocks < 0:
        raise Impossible("negative blocks")
    return "ok"


KINDS: dict[str, Callable[[random.Random, Path], str]] = {
    "benchmark file": _benchmark_file, "vllm log": _vllm_log, "price table": _price_table, "command line": _cli,
    "trace file": _trace_file, "model config": _model_config, "gpu file": _gpu_file,
}


def run_case(kind: str, seed: int, tmp: Path) -> str:
    """Run case ``(kind, seed)`` in the folder ``tmp``; returns "ok" or "clean error", raises on a traceback or
    Impossible."""
    return KINDS[kind](random.Random(f"{kind}:{seed}"), tmp)
