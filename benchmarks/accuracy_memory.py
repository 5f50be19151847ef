"""Memory-plan accuracy against every real vLLM start-up in ../shared/data: predicted vs logged, per term.

Sources (read-only, beside the clone):
  * ``shared/data/vllm-startups-0.19/startups.csv`` + ``results_raw.csv``: 40 vLLM 0.19.0 start-ups on one
    H100 each (jgchn/llm-d-planner, Apache-2.0), per rank for TP/PP; configs from ``configs/``, else the bundled
    catalog (CodeLlama-7b, phi-2); the RedHatAI quantized checkpoints as their base release's config with the
    ``quantization_config`` reconstructed from the log and model card (``QUANTIZED_CHECKPOINTS``); gemma-7b and
    Qwen1.5-MoE-A2.7B, whose configs are in neither, from transformers' default configs of their architectures
    (``STANDINS``);
  * ``shared/data/vllm_memory_observations.csv``: three H100 start-ups of an earlier release (llm-d-benchmark,
    Apache-2.0; version not stated: the sort-era profile, vLLM ≤0.16, is applied);
  * public logs quoted in ``docs/engine-model.md`` §1.9 that name model, GPU and the printed available memory:
    only blocks, tokens and the printed concurrency can be checked there (no memory terms are printed);
  * ``benchmarks/data/vllm_public_startups.csv``: public start-ups quoted in vLLM issue threads, posts and repository
    files (0.6–0.27; RTX 3090/4060/4090, H100, A100 40GB/80GB, L40S, GH200, MI300X, RTX PRO 6000; TP 1/2/4/8, TP 4 ×
    PP 2 over two nodes, Ray on five), each with its source URL (SOURCES file beside it);
  * ``benchmarks/data/vme_startups.csv``: 140 start-ups of vllm-memory-estimator's published validation set
    (Apache-2.0; H200, MI300X, B200; TP 1/4/8; vLLM 0.11–0.20), from ``benchmarks/import_vme_startups.py``;
  * ``benchmarks/data/sglang_public_startups.csv``: public SGLang start-ups (0.4.1–0.5.3; L4, H100, H200, RTX A6000, a
    24 GB GeForce; TP 1/4/8) through kvledger's SGLang plan (``analyses/doctor/sglang_startups.py``), and
    ``benchmarks/data/trtllm_public_startups.csv``: public TensorRT-LLM start-ups (0.13–1.2.1; TensorRT engines and the
    PyTorch backend; H100, A100 40GB, RTX 5090, a 12 GiB Ada) through its TensorRT-LLM plan
    (``analyses/doctor/trtllm_startups.py``), both reported on their own (``engine_startup_lines``);
  * held out: the serving runs under ``shared/data/measured-runs`` whose record states the engine's block count
    (LLMServingSim's ``meta.json``: ``kv_cache.num_gpu_blocks``, the launch arguments, the device's total memory):
    the plan from those settings alone, before any log, against the count the engine allocated.

Prints one line per start-up and term (predicted, logged, error), then the mean absolute and the worst error per
term, then every start-up bucketed by version, GPU, topology and term: the mean error on the stated measure
(``analyses/doctor/bucket_error.py``: memory terms and a failed start-up's available KV over the usable memory, the
rest over the printed figure; the per-figure mean beside it), the share of available-KV predictions within 2% and the
share of printed figures inside the plan's printed range; and, given the printed memory, whether the printed
tokens' blocks and concurrency follow exactly, counting blocks exact, genuine miss, or "smallest rank not printed" (a
multi-GPU pool below the printed rank's range on a row whose source keeps one rank's memory line: listed with the
memory its smallest rank must have lacked, ``accounting/vllm_rank_print.py``). Rows whose config kvledger cannot read
say so.
Usage: ``python benchmarks/accuracy_memory.py [--json]``.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from kvledger.accounting.plan import build_plan
from kvledger.accounting.plan_vllm import printed_gib_block_range
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_rank_print import rank_print
from kvledger.accounting.vllm_rules import parse_version
from kvledger.analyses.doctor.bucket_error import BucketRecord, bucket_summary, buckets_above, scaled_error
from kvledger.analyses.doctor.engine_startups import bucket_counts
from kvledger.analyses.doctor.memory_accuracy import TermError, exact_from_logged, replay
from kvledger.analyses.doctor.public_startups import SMALLEST_NOT_PRINTED, load_rows, replay_row, topology_label
from kvledger.analyses.doctor.rocm_loo import leave_one_out_rocm
from kvledger.analyses.doctor.sglang_startups import replay_sglang_row
from kvledger.analyses.doctor.trtllm_startups import replay_trtllm_row, trtllm_leave_one_out, trtllm_residual_gib
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB

ROOT = Path(__file__).resolve().parents[1]
SHARED = next((d for d in (ROOT.parent / "shared" / "data", ROOT.parents[1] / "shared" / "data") if d.exists()),
              ROOT.parent / "shared" / "data")  # beside the clone, or two levels up from a worktree
CORPUS = SHARED / "vllm-startups-0.19"
FIXTURE_CONFIGS = ROOT / "tests" / "fixtures" / "configs"
TERMS = ("weights", "activation peak", "non-torch", "CUDA graph estimate", "available KV", "KV tokens", "max "
    "concurrency")

# Corpus models with no config of their own anywhere here: transformers' default GemmaConfig and Qwen2MoeConfig (written
# by
# benchmarks/transformers_oracle.py from transformers 5.24), which transformers documents as those models'
# configurations.
STANDINS = {"google/gemma-7b": ROOT / "benchmarks" / "data" / "oracle_configs" / "gemma.json",
            "Qwen/Qwen1.5-MoE-A2.7B": ROOT / "benchmarks" / "data" / "oracle_configs" / "qwen2_moe.json"}

OBSERVATION_CONFIGS = {"meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
                       "openai/gpt-oss-20b": "openai/gpt-oss-20b",
                       "Qwen/Qwen3-0.6B": str(FIXTURE_CONFIGS / "Qwen3-0.6B.json")}

PUBLIC_LOGS = [
    # (label, model, gpu, vLLM version, max_model_len, printed available GiB, printed tokens or blocks, printed
    # concurrency, link)
    ("O6 Qwen3-14B", str(FIXTURE_CONFIGS / "Qwen3-14B.json"), "H100", "0.10.2", 32768, 6.51, "42,656 tokens", "1.30",
     "https://github.com/LMCache/LMCache/issues/1739"),
    ("O8 Qwen3-1.7B", str(FIXTURE_CONFIGS / "Qwen3-1.7B.json"), "H100", "0.15.0", 1024, 18.78, "175,856 tokens", "",
     "https://github.com/vllm-project/vllm/issues/33263"),
]


def corpus_rows() -> list[dict[str, str]]:
    raw = {r["log_file"]: r for r in csv.DictReader((CORPUS / "results_raw.csv").open())}
    rows = []
    for r in csv.DictReader((CORPUS / "startups.csv").open()):
        r["init_total_memory_gib"] = raw.get(r["log_file"], {}).get("init_total_memory_gib", "")
        rows.append(r)
    return rows


def observation_replays() -> list[tuple[str, list[TermError], float]]:
    out = []
    for r in csv.DictReader((SHARED / "vllm_memory_observations.csv").open()):
        m = load_model(OBSERVATION_CONFIGS[r["model"]])
        s = make_settings(engine_version="0.16.0", max_model_len=int(r["max_model_len"]),
                          gpu_memory_utilization=float(r["gpu_memory_utilization"]), max_num_batched_tokens=8192,
                              max_num_seqs=1024)
        p = build_plan(m, resolve_gpu("H100-SXM", memory_bytes=int(float(r["gpu_total_gib"]) * GiB)), s,
                       with_roofline=False, with_advice=False)
        pred = {i.name.split(" (")[0]: i.bytes / GiB for i in p.memory.deductions}
        out.append((f"{r['model'].split('/')[-1]} (observations, version not stated: ≤0.16 rules)", [
            TermError("weights", pred["weights"], float(r["weights_gib"])),
            TermError("activation peak", pred["activation peak"], float(r["peak_activation_gib"])),
            TermError("non-torch", pred["non-torch memory"], float(r["non_torch_gib"])),
            TermError("available KV", p.memory.available_kv_bytes / GiB, float(r["available_kv_gib"]),
                      *(x / GiB for x in p.memory.ranges["available_kv_bytes"]))],
                    float(r["gpu_total_gib"]) * float(r["gpu_memory_utilization"])))
    return out


PUBLIC = (ROOT / "benchmarks" / "data" / "vllm_public_startups.csv", ROOT / "benchmarks" / "data" / "vme_startups.csv")
SGLANG_PUBLIC = ROOT / "benchmarks" / "data" / "sglang_public_startups.csv"


TRTLLM_PUBLIC = ROOT / "benchmarks" / "data" / "trtllm_public_startups.csv"


def _replay_lines(replays) -> list[str]:
    """Each start-up's printed figures against the plan, the range in brackets where the plan gives one."""
    out = []
    for x in replays:
        out.append(f"  {x.row_id} {x.version}, {x.gpu}, {x.topology} ({x.source_url})")
        for t in x.terms + x.from_printed:
            # counts print whole; a size "from printed tokens" is GiB (K size 1.42, not 1)
            count = ("tokens" in t.term or "blocks" in t.term) and not t.term.startswith(("K size", "KV memory"))
            f = ",.0f" if count else ".4f"
            rng = f" [{t.low:{f}}–{t.high:{f}}] {'inside' if t.inside else 'OUTSIDE'}" if t.low is not None else ""
            out.append(f"      {t.term:34s} predicted {t.predicted:>14{f}}  printed {t.printed:>14{f}}  "
                       f"{t.rel_error * 100:+7.2f}%{rng}")
    return out


def engine_startup_lines(sgl, trt) -> list[str]:
    """The SGLang and TensorRT-LLM start-ups: each replay, then per engine and per bucket of version, GPU and TP the
    KV memories within 2 %, the printed figures inside the plan's range and the checks from the printed memory."""
    out = ["\nSGLang start-ups (benchmarks/data/sglang_public_startups.csv; printed figure vs plan, range in "
           "brackets):"]
    out += _replay_lines(sgl)
    out.append("\nTensorRT-LLM start-ups (benchmarks/data/trtllm_public_startups.csv; printed figure vs plan):")
    out += _replay_lines(trt)
    out.append("\nSGLang and TensorRT-LLM by bucket (available KV within 2% of the printed figure; printed figures "
               "inside the plan's range; checks from the printed memory exact):")
    for by in ("engine", "version", "GPU", "TP"):
        out.append(f"  by {by}:")
        for c in bucket_counts(sgl + trt, by):
            mean = "—" if c.mean_abs_error is None else f"{c.mean_abs_error * 100:.2f}%"
            out.append(f"    {c.key:52s} n={c.startups:2d}  within 2%: {c.within}/{c.available:<3d} mean |error| "
                       f"{mean:>6s}  inside range: {c.inside}/{c.ranged:<3d} from printed exact: "
                       f"{c.exact}/{c.from_printed}")
    return out


def all_engines_line(vllm_within: int, vllm_n: int, vllm_inside: int, vllm_ranged: int, sgl, trt) -> str:
    """The must-hold counts over the whole corpus: vLLM's (the summary above) with SGLang's and TensorRT-LLM's."""
    cs = bucket_counts(sgl + trt, "engine")
    w, n = vllm_within + sum(c.within for c in cs), vllm_n + sum(c.available for c in cs)
    i, r = vllm_inside + sum(c.inside for c in cs), vllm_ranged + sum(c.ranged for c in cs)
    worst = max((c.mean_abs_error or 0.0 for by in ("version", "GPU", "TP") for c in bucket_counts(sgl + trt, by)),
                default=0.0)
    return (f"\nEvery engine (vLLM, SGLang, TensorRT-LLM): available KV within 2% {w}/{n} ({w / n:.1%}); printed "
            f"figures inside the plan's range {i}/{r} ({i / r:.1%}); SGLang/TensorRT-LLM buckets' largest mean "
            f"|error| {worst:.2%}")


def trtllm_loo_lines(rows: list[dict], trt) -> list[str]:
    """The TensorRT-LLM fitted terms by start-up. PyTorch backend (``trtllm_terms.TRTLLM_EXTRA_GIB``): its residual
    and, with its own set-up left out, the available KV the plan would print (KV moves by (fitted − left-out) × the
    fraction). TensorRT-engine executor: what the row leaves for the uncounted rest once the code-sized runtime buffers
    and decoder are taken, against the rest fitted outside the corpus (``TRTLLM_ENGINE_OTHER_GIB``)."""
    from kvledger.accounting.trtllm_engine_buffers import TRTLLM_ENGINE_OTHER_GIB
    from kvledger.accounting.trtllm_terms import TRTLLM_EXTRA_GIB

    out = ["\nTensorRT-LLM fitted terms (residual = total − the free memory the log implies − the sized terms, GiB). "
           "PyTorch backend, leave-one-out (the term is the mean residual of the set-ups):"]
    kv = {x.row_id: next((t for t in x.terms if t.term == "available KV"), None) for x in trt}
    frac = {r["id"]: float(r["free_gpu_memory_fraction"]) for r in rows}
    fit = TRTLLM_EXTRA_GIB[1]
    for rid, runtime, resid, loo in trtllm_leave_one_out(rows, ROOT):
        line = f"  {rid} {runtime:8s} residual {resid:.3f}  fitted {fit:.2f}  left out {loo:.3f}"
        if kv.get(rid) is not None:
            a = kv[rid]
            held = a.predicted + (fit - loo) * frac[rid]
            line += (f"  available KV in-sample {a.rel_error * 100:+.2f}%, left out {held:.4f} GiB vs printed "
                     f"{a.printed:.4f} ({(held - a.printed) / a.printed * 100:+.2f}%)")
        out.append(line)
    lo, pt, hi = TRTLLM_ENGINE_OTHER_GIB
    out.append(f"TensorRT-engine executor: runtime buffers and decoder from the code; the uncounted rest {pt} GiB "
               f"({lo}–{hi}) is fitted on two logs outside the corpus, so every row below is out of sample:")
    for r in rows:
        printed_total = r["runtime"] == "tensorrt" and r["gpu_memory_gib_printed"]
        resid = trtllm_residual_gib(r, ROOT) if printed_total else None
        if resid is not None:
            a = kv.get(r["id"])
            tail = f"  available KV {a.rel_error * 100:+.2f}%" if a is not None else "  (no available-KV check)"
            out.append(f"  {r['id']} tensorrt leaves {resid:+.3f} GiB for the rest (fit {pt}){tail}")
    return out


def wddm_hold_lines() -> list[str]:
    """The WDDM hold the TensorRT-LLM rows above take (``accounting/wddm.WDDM_HOLD_FIT``), re-fitted on its own corpus
    (``benchmarks/data/wddm_holds.csv``), with its leave-one-card-out error against the two simpler forms."""
    from kvledger.analyses.doctor.wddm_holds import (
        fit_constant,
        fit_share,
        fit_wddm_hold,
        load_wddm_holds,
        wddm_hold_loco,
    )

    recs = load_wddm_holds(ROOT / "benchmarks" / "data" / "wddm_holds.csv")
    a, b = fit_wddm_hold(recs)
    errs = {name: wddm_hold_loco(recs, f) for name, f in (("line", fit_wddm_hold), ("absolute", fit_constant),
                                                           ("share", fit_share))}
    alt = ", ".join(f"{k} {v['per_record']:.2f}" for k, v in errs.items() if k != "line")
    return [f"WDDM hold (benchmarks/data/wddm_holds.csv: {len(recs)} Windows/WSL2 records, "
            f"{len({r.card for r in recs})} cards, no TensorRT-LLM row): {a:.3f} + {b:.4f} × board GiB (Theil–Sen); "
            f"leave-one-card-out {errs['line']['per_record']:.2f} GiB per record ({errs['line']['per_card']:.2f} per "
            f"card; {alt})"]


def _engine_json(replays) -> list[dict]:
    return [{"id": x.row_id, "source": x.source_url, "version": x.version, "gpu": x.gpu, "topology": x.topology,
             "terms": [t.to_dict() for t in x.terms], "from_printed": [t.to_dict() for t in x.from_printed]}
            for x in replays]


def bucket_records(reps, obs, pubs, usable_019: list[float | None]) -> list[BucketRecord]:
    """Every checked term of every start-up with its buckets, figure-relative and scaled error (``bucket_error``) and
    whether it lies in the printed range; ``usable_019``: each 0.19 start-up's requested memory, GiB."""
    out = []
    for x, usable in zip(reps, usable_019, strict=True):
        for t in x.terms:
            if t.rel_error is not None:
                inside = None if t.low is None else t.low - 0.005 <= t.logged <= t.high + 0.005
                out.append(BucketRecord("0.19.0", H100_NAME, _topo_019(x.label), t.term, t.rel_error,
                                        scaled_error(t.term, t.predicted, t.logged, usable), inside))
    for _label, ts, usable in obs:
        for t in ts:
            inside = None if t.low is None else t.low - 0.005 <= t.logged <= t.high + 0.005
            term = t.term.replace("non-torch memory", "non-torch")
            out.append(BucketRecord("≤0.16 (llm-d-benchmark)", H100_NAME, "TP1 PP1", term, t.rel_error,
                                    scaled_error(term, t.predicted, t.logged, usable), inside))
    for x in pubs:
        for t in x.terms:
            out.append(BucketRecord(x.version, x.gpu, x.topology, t.term, t.rel_error,
                                    scaled_error(t.term, t.predicted, t.printed, x.usable_gib), t.inside))
    return out


H100_NAME = resolve_gpu("h100").name


def _topo_019(label: str) -> str:
    """The 0.19 corpus label's "TP4 PP1" as a bucket (every run there is on NVLink all-to-all H100s)."""
    import re

    m = re.search(r"TP ?(\d+) PP ?(\d+)", label)
    return topology_label(int(m.group(1)), int(m.group(2)), True) if m else "TP1 PP1"


def public_log_checks() -> list[str]:
    lines = []
    for label, cfg, gpu, ver, L, avail, printed, conc, link in PUBLIC_LOGS:
        s = make_settings(engine_version=ver, max_model_len=L, available_kv_memory_bytes=int(avail * GiB))
        p = build_plan(load_model(cfg), resolve_gpu(gpu), s, with_roofline=False, with_advice=False)
        lo, hi = printed_gib_block_range(int(avail * GiB), p.memory.bytes_per_block)
        lines.append(f"  {label} vLLM {ver}, {avail} GiB printed: kvledger prints {' | '.join(p.memory.printed_lines)} "
                     f"(any figure printing as {avail:.2f} GiB gives "
                     f"{lo * p.memory.block_size:,}–{hi * p.memory.block_size:,} tokens); "
                     f"the log printed {printed}{', ' + conc + 'x' if conc else ''} ({link})")
    return lines


def rocm_loo_line(loo: list[dict]) -> str:
    """MI300X start-ups: available KV within 2% and inside the range, in-sample against leave-one-out."""
    n = len(loo)
    ins = sum(abs(x["in_sample_rel_error"]) <= 0.02 for x in loo)
    out = sum(abs(x["loo_rel_error"]) <= 0.02 for x in loo)
    return (f"  MI300X non-torch term (vllm_rocm.py) fitted on these start-ups: counted leave-one-out above (each "
            f"refitted on the others at its TP: median, min–max); available KV within 2% {out}/{n} leave-one-out "
            f"({ins}/{n} in-sample), inside the range {sum(bool(x['loo_inside']) for x in loo)}/{n}")


def held_out_runs() -> list[str]:
    """Predicted vs recorded KV blocks of every measured run whose record gives the engine's block count."""
    lines = []
    public = ROOT / "benchmarks" / "data" / "public-runs"  # copied public runs (SOURCES.md in each)
    for meta_path in sorted((SHARED / "measured-runs").rglob("meta.json")) + sorted(public.rglob("meta.json")):
        meta = json.loads(meta_path.read_text())
        kv, kw, hw = meta.get("kv_cache") or {}, meta.get("engine_kwargs") or {}, meta.get("hardware") or {}
        if not kv.get("num_gpu_blocks") or not hw.get("device_total_memory_bytes"):
            continue
        s = make_settings(engine_version=meta["vllm_version"], max_model_len=kw.get("max_model_len"),
                          max_num_seqs=kw.get("max_num_seqs"), max_num_batched_tokens=kw.get("max_num_batched_tokens"),
                          gpu_memory_utilization=kv.get("gpu_memory_utilization"), tp=kw.get("tensor_parallel_size", 1))
        mine = meta_path.is_relative_to(public)  # named by the record's device; a config copied beside the run
        gpu = resolve_gpu(hw["device_name"] if mine else meta_path.parts[-4],
                          memory_bytes=int(hw["device_total_memory_bytes"]))
        cfg = meta_path.parent.parent / "model" / "config.json"
        p = build_plan(load_model(str(cfg) if mine and cfg.exists() else meta["model"]), gpu, s, with_roofline=False,
                       with_advice=False)
        got, want = p.memory.num_gpu_blocks, int(kv["num_gpu_blocks"])
        lo, hi = p.memory.ranges["num_gpu_blocks"]
        lines.append(f"  {meta['model']} on {hw.get('device_name', gpu.name)}, vLLM {meta['vllm_version']}, "
                     f"max_num_seqs "
                     f"{kw.get('max_num_seqs')}, max_num_batched_tokens {kw.get('max_num_batched_tokens')}: predicted "
                     f"{got:,} blocks ({p.memory.available_kv_bytes / GiB:.2f} GiB; range {lo:,}–{hi:,}), the engine "
                     f"allocated {want:,} ({(got - want) / want * 100:+.1f}%, "
                     f"{'inside' if lo <= want <= hi else 'OUTSIDE'} the range) — "
                     f"{meta_path.relative_to(ROOT if mine else SHARED)}")
    return lines


def from_printed_lines(pubs) -> list[str]:
    """Given the printed available memory (the smallest rank's where the row records every rank's): blocks (from the
    printed tokens) inside the range the 2-decimal GiB figure allows, and the printed concurrency equal to the plan's
    from those blocks. Blocks are counted exact, genuine miss, or "smallest rank not printed": below the range on a
    version whose pool is the smallest rank's, on a row whose source holds one rank's memory line only
    (``public_startups.rank_status``); those are listed with the spread they imply, and every miss is named."""
    out = []
    for term in ("blocks from printed memory", "concurrency from printed memory"):
        ts = [(x, t) for x in pubs for t in x.from_printed if t.term == term]
        n_ok = sum(bool(t.inside) for _, t in ts)
        if term.startswith("conc"):
            out.append(f"  Given the printed memory, concurrency: {n_ok}/{len(ts)} exact")
        ranked = [(x, t) for x, t in ts if t.rank_status == SMALLEST_NOT_PRINTED]
        misses = [(x, t) for x, t in ts if not t.inside and t.rank_status != SMALLEST_NOT_PRINTED]
        if term.startswith("blocks"):
            out.append(f"  Given the printed memory, blocks of {len(ts)}: {n_ok} exact, {len(misses)} genuine misses, "
                       f"{len(ranked)} smallest rank not printed (printed tokens' blocks inside the 2-decimal GiB "
                       "figure's range; the smallest rank's figure where the source prints every rank's)")
        if ranked:
            out.append(f"    {len(ranked)} smallest rank not printed: below the printed rank's range, as vLLM's pool "
                       "allows (the smallest of the ranks' counts: accounting/vllm_rank_print.py), on rows whose "
                       "source keeps one rank's memory line (rank_memory); exact needs the smallest rank's line:")
        out += [f"      {x.row_id} vLLM {x.version} {x.gpu} {x.topology}: printed {t.printed:,.0f}, printed rank "
                f"{t.low:,.0f}–{t.high:,.0f}: the smallest rank held {t.rank_spread[0]:.4f}–{t.rank_spread[1]:.4f} GiB "
                "less" for x, t in ranked]
        out += [f"      miss {x.row_id} vLLM {x.version} {x.gpu} {x.topology}: printed {t.printed:,.2f}, plan "
                f"{t.low:,.2f}–{t.high:,.2f}" for x, t in misses]
        out += rank_spread_lines(ranked)
    return out


def rank_spread_lines(ranked) -> list[str]:
    """Those start-ups' spreads by GPU, TP and which rank prints the memory, intersected. One figure that every model
    of a group shares (blocks of 770,048 B to 1,310,720 B, GQA and MLA) says the ranks differ in memory by that much,
    not in page layout (a layout rule would move the count by a share of each pool, not by one size in GiB)."""
    groups: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for x, t in ranked:
        key = (x.gpu, x.topology.split()[0], rank_print(parse_version(x.version)).memory)
        groups.setdefault(key, []).append(t.rank_spread)
    out = ["    the smallest rank's shortfall by GPU, TP and printing rank (intersected over the start-ups; measured, "
           "not a rule: not used by the plan):"] if groups else []
    for (gpu, tp, who), spans in sorted(groups.items()):
        lo, hi = max(a for a, _ in spans), min(b for _, b in spans)
        joint = f"all inside {lo:.4f}–{hi:.4f} GiB" if lo <= hi else "no one figure fits all"
        out.append(f"      {gpu} {tp}, memory printed by {who}: {len(spans)} start-up(s), {joint}")
    return out


def fmt(v: float | None, term: str) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}" if term == "KV tokens" else f"{v:.3f}"


def main() -> int:
    as_json = "--json" in sys.argv
    rows = corpus_rows()
    reps = [replay(r, CORPUS / "configs", standins=STANDINS) for r in rows]
    per_term: dict[str, list[float]] = {t: [] for t in TERMS}
    out_rows = []
    if not as_json:
        print(f"vLLM 0.19.0 start-ups on H100 ({len(rows)} in shared/data/vllm-startups-0.19); terms in GiB, per GPU "
              f"of the rank shown\n")
    for x in reps:
        out_rows.append(x.to_dict())
        if x.skipped:
            if not as_json:
                print(f"{x.label:62s} — {x.skipped}")
            continue
        if not as_json:
            print(f"{x.label:62s} rank {x.rank}")
        for t in x.terms:
            if t.rel_error is not None:
                per_term[t.term].append(t.rel_error)
            if not as_json:
                rel = f"{t.rel_error * 100:+.2f}%" if t.rel_error is not None else ""
                note = "  (logged only in 0.19, not subtracted)" if t.term == "CUDA graph estimate" else ""
                print(f"    {t.term:22s} predicted {fmt(t.predicted, t.term):>12s}  logged "
                      f"{fmt(t.logged, t.term):>12s}  {rel:>8s}{note}")
    exact = [e for e in (exact_from_logged(r, CORPUS / "configs", STANDINS) for r in rows) if e]
    ok = sum(1 for e in exact if e["blocks_range"][0] <= e["logged_blocks"] <= e["blocks_range"][1]
             and (e["tokens"], e["concurrency"]) == (e["logged_tokens"], e["logged_concurrency"]))
    obs = observation_replays()
    summary = {t: {"n": len(v), "mean_abs_pct": 100 * sum(map(abs, v)) / len(v) if v else None,
                   "worst_pct": 100 * max(v, key=abs) if v else None} for t, v in per_term.items()}
    raw = [r for path in PUBLIC for r in load_rows(path)]
    pubs, loo = leave_one_out_rocm(raw, [replay_row(r, ROOT) for r in raw])  # MI300X: fitted without itself
    kept = [(x, r) for x, r in zip(reps, rows, strict=True) if not x.skipped]
    recs = bucket_records([x for x, _ in kept], obs, pubs, [float(r["requested_memory_gib"] or 0) or None
                                                            for _, r in kept])
    sgl = [replay_sglang_row(r, ROOT) for r in load_rows(SGLANG_PUBLIC)]
    trt = [replay_trtllm_row(r, ROOT) for r in load_rows(TRTLLM_PUBLIC)]
    buckets = {name: bucket_summary(recs, name) for name in ("version", "gpu", "topology", "term")}
    if as_json:
        print(json.dumps({"corpus": out_rows, "summary": summary, "exact_from_logged": {"checked": len(exact),
                                                                                        "exact": ok},
                          "observations": [{"label": item, "terms": [t.to_dict() for t in ts]} for item, ts, _ in obs],
                          "public": [{"id": x.row_id, "source": x.source_url, "version": x.version, "gpu": x.gpu,
                                      "topology": x.topology, "terms": [t.to_dict() for t in x.terms],
                                      "from_printed": [t.to_dict() for t in x.from_printed]} for x in pubs],
                          "buckets": buckets, "rocm_leave_one_out": loo,
                          "sglang": _engine_json(sgl), "trtllm": _engine_json(trt)}, indent=2))
        return 0
    print("\nSummary over the start-ups kvledger can read (relative error, predicted − logged):")
    for t, s in summary.items():
        if s["n"]:
            print(f"    {t:22s} n={s['n']:2d}  mean |error| {s['mean_abs_pct']:.2f}%  worst {s['worst_pct']:+.2f}%")
    print(f"\nBlocks, tokens and 'Maximum concurrency' from the logged available memory (TP runs): {ok} of "
          f"{len(exact)} exact "
          "(blocks: the engine's count lies in the range the 2-decimal GiB figure allows; tokens and concurrency: "
          "equal)")
    print("\nEarlier release, vllm_memory_observations.csv:")
    for label, ts, _ in obs:
        print(
            f"  {label}: "
            + "; ".join(f"{t.term} {t.predicted:.2f} vs {t.logged:.2f} ({t.rel_error * 100:+.1f}%)" for t in ts)
        )
    print("\nPublic logs (docs/engine-model.md §1.9), from the printed available memory:")
    for line in public_log_checks():
        print(line)
    print("\nPublic start-ups (benchmarks/data/vllm_public_startups.csv; printed figure vs plan, range in brackets):")
    for x in pubs:
        print(f"  {x.row_id} vLLM {x.version}, {x.gpu}, {x.topology} ({x.source_url})")
        for t in x.terms:
            rng = f" [{t.low:,.2f}–{t.high:,.2f}] {'inside' if t.inside else 'OUTSIDE'}" if t.low is not None else ""
            print(f"      {t.term:16s} predicted {t.predicted:>12,.2f}  printed {t.printed:>12,.2f}  "
                  f"{t.rel_error * 100:+7.2f}%{rng}")
    av = [r for r in recs if r.term == "available KV"]
    ins = [r for r in recs if r.inside is not None]
    print(f"\nAll start-ups ({len(av)} with an available-KV figure): within 2% "
          f"{sum(abs(r.scaled) <= 0.02 for r in av)}/{len(av)}; "
          f"printed figure inside the plan's range {sum(bool(r.inside) for r in ins)}/{len(ins)} terms")
    print(rocm_loo_line(loo))
    for line in from_printed_lines(pubs):
        print(line)
    print("\nBuckets. Error measure (analyses/doctor/bucket_error.py): available KV, KV tokens, blocks and concurrency "
          "relative to the printed figure; the memory terms (weights, activation peak, non-torch, CUDA-graph estimate) "
          "and a failed start-up's available KV (printed ≤ 0) relative to the usable memory (device total × "
          "gpu_memory_utilization), since those figures are near zero; 'per figure' is every term relative to its own "
          "figure, as before.")
    for name, table in buckets.items():
        print(f"  by {name}:")
        for k, v in table.items():
            w2 = (f"{v['available_within_2pct'] * 100:5.1f}% of {v['available_n']} (mean "
                  f"{v['available_mean_abs_pct']:.2f}%)"
                  if v["available_n"] else "—")
            inr = f"{v['inside_range'] * 100:5.1f}% of {v['inside_range_n']}" if v["inside_range_n"] else "—"
            print(f"    {k:28s} n={v['n']:3d}  mean |error| {v['mean_abs_pct']:6.2f}% (per figure "
                  f"{v['mean_abs_rel_to_figure_pct']:6.2f}%)  available within 2%: {w2:26s}  inside range: {inr}")
    above = buckets_above(buckets)
    print("  version, GPU or topology buckets with a mean |error| above 5%: "
          + ("; ".join(f"{f} {k} {pct:.2f}%" for f, k, pct in above) if above else "none"))
    print("  (per figure: " + ("; ".join(f"{f} {k} {v['mean_abs_rel_to_figure_pct']:.1f}%" for f in
                                        ("version", "gpu", "topology") for k, v in buckets[f].items()
                                        if v["mean_abs_rel_to_figure_pct"] > 5) or "none") + ")")
    for line in engine_startup_lines(sgl, trt) + trtllm_loo_lines(load_rows(TRTLLM_PUBLIC), trt) + wddm_hold_lines():
        print(line)
    print(all_engines_line(sum(abs(r.scaled) <= 0.02 for r in av), len(av), sum(bool(r.inside) for r in ins), len(ins),
                           sgl, trt))
    print("\nHeld out (a serving run's record with the engine's block count; predicted from its settings alone):")
    for line in held_out_runs():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
