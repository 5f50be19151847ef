"""The house move of issue 19: modules into rooms by capability, and every import and dotted name rewritten.

    python tools/house_move.py            # git mv the files, then rewrite names in src/, tests/, benchmarks/, tools/
    python tools/house_move.py --rewrite  # only rewrite names (for a branch cut before the move, after merging it)

Idempotent: a name already moved is left alone.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "kvledger"

D, A = "dynamics", "analyses"
MOVES: dict[str, str] = {
    # dynamics/engine: the engine's rules (vLLM v1 and SGLang scheduling, block pool, KV managers, radix cache)
    f"{D}.workload": f"{D}.engine.request",
    f"{D}.request_state": f"{D}.engine.request_state",
    f"{D}.scheduler": f"{D}.engine.scheduler",
    f"{D}.sglang_scheduler": f"{D}.engine.sglang_scheduler",
    f"{D}.block_pool": f"{D}.engine.block_pool",
    f"{D}.kv_manager": f"{D}.engine.kv_manager",
    f"{D}.hybrid_kv": f"{D}.engine.hybrid_kv",
    f"{D}.radix_cache": f"{D}.engine.radix_cache",
    f"{D}.swa_step": f"{D}.engine.swa_step",
    f"{D}.prefix_keys": f"{D}.engine.prefix_keys",
    f"{D}.router": f"{D}.engine.router",
    f"{D}.engine_config": f"{D}.engine.config",
    f"{D}.kv_transfer": f"{D}.engine.kv_transfer",
    # dynamics/fast: whole stretches of steps at once, same results as the step loop
    f"{D}.fast_path": f"{D}.fast.fast_path",
    f"{D}.open_stretch": f"{D}.fast.open_stretch",
    f"{D}.stretch_times": f"{D}.fast.stretch_times",
    f"{D}.kv_stretch": f"{D}.fast.kv_stretch",
    # dynamics/outputs: what a run reports
    f"{D}.metrics": f"{D}.outputs.metrics",
    f"{D}.itl_gaps": f"{D}.outputs.itl_gaps",
    f"{D}.kv_usage": f"{D}.outputs.kv_usage",
    f"{D}.usage_buckets": f"{D}.outputs.usage_buckets",
    f"{D}.token_times": f"{D}.outputs.token_times",
    f"{D}.record_sink": f"{D}.outputs.record_sink",
    f"{D}.steplog": f"{D}.outputs.steplog",
    f"{D}.steps_parquet": f"{D}.outputs.steps_parquet",
    # dynamics/workload: where requests come from
    f"{D}.traces": f"{D}.workload.traces",
    f"{D}.trace_formats": f"{D}.workload.trace_formats",
    f"{D}.trace_arrow": f"{D}.workload.trace_arrow",
    f"{D}.synthetic": f"{D}.workload.synthetic",
    f"{D}.servegen": f"{D}.workload.servegen",
    f"{D}.distserve_runs": f"{D}.workload.distserve_runs",
    f"{D}.closed_loop": f"{D}.workload.closed_loop",
    f"{D}.workload_columns": f"{D}.workload.columns",
    # dynamics (top): the simulator that wires the rooms together
    f"{D}.engine": f"{D}.simulator",
    # analyses/serving: capacity, cost runs and the wiring from names a user types
    f"{D}.sim_setup": f"{A}.serving.sim_setup",
    f"{D}.step_cost_choice": f"{A}.serving.step_cost_choice",
    f"{D}.from_plan": f"{A}.serving.from_plan",
    f"{D}.experiments": f"{A}.serving.experiments",
    f"{A}.cost_run": f"{A}.serving.cost_run",
    f"{A}.queue_growth": f"{A}.serving.queue_growth",
    f"{A}.sim_boundary": f"{A}.serving.sim_boundary",
    f"{A}.sim_capacity": f"{A}.serving.sim_capacity",
    f"{A}.sim_ledgers": f"{A}.serving.sim_ledgers",
    f"{A}.report_data": f"{A}.serving.decision_data",
    f"{A}.report_curves": f"{A}.serving.cost_curves",
    # analyses/doctor: logs against the ledger
    f"{A}.doctor": f"{A}.doctor.diagnose",
    f"{A}.doctor_capacity": f"{A}.doctor.capacity",
    f"{A}.doctor_checks": f"{A}.doctor.checks",
    f"{A}.doctor_context": f"{A}.doctor.context",
    f"{A}.doctor_startup": f"{A}.doctor.startup",
    f"{A}.doctor_traffic": f"{A}.doctor.traffic",
    f"{A}.doctor_types": f"{A}.doctor.types",
    f"{A}.memory_accuracy": f"{A}.doctor.memory_accuracy",
    # analyses/judgments: FP8 KV, speculative decoding, KV eviction, P/D disaggregation
    f"{A}.fp8_calibration": f"{A}.judgments.fp8_calibration",
    f"{A}.fp8_kv": f"{A}.judgments.fp8_kv",
    f"{A}.fp8_verdict": f"{A}.judgments.fp8_verdict",
    f"{A}.kv_eviction": f"{A}.judgments.kv_eviction",
    f"{A}.kv_eviction_report": f"{A}.judgments.kv_eviction_summary",
    f"{A}.pd_disagg": f"{A}.judgments.pd_disagg",
    f"{A}.pd_disagg_report": f"{A}.judgments.pd_disagg_summary",
    f"{A}.spec_decode": f"{A}.judgments.spec_decode",
    f"{A}.spec_report": f"{A}.judgments.spec_decode_summary",
    f"{A}.spec_sim": f"{A}.judgments.spec_sim",
    f"{A}.roofline_terms": f"{A}.judgments.roofline_terms",
    # "report" means report/ only
    "accounting.roofline_report": "accounting.roofline_breakdown",
    "ledgers.cost_report": "ledgers.cost_summary",
}

ROOMS = {
    f"{D}/engine": ("The engine's rules, as vLLM v1 and SGLang run them: scheduling, the block pool, KV managers, "
                    "the radix cache."),
    f"{D}/fast": ("Fast paths of the simulator: whole stretches of decode steps and arrivals at once, "
                  "with the step loop's results."),
    f"{D}/outputs": ("What a simulated run reports: latency statistics, ITL gaps, KV usage over time, token times, "
                     "step logs."),
    f"{D}/workload": ("Where requests come from: bundled and user traces, synthetic and ServeGen workloads, "
                      "closed loops."),
    f"{A}/serving": "Serving capacity and cost: SLO boundary search, simulations as ledger inputs, the decision data.",
    f"{A}/doctor": "`kvledger doctor`: a vLLM log against the ledger, and start-ups replayed through the memory plan.",
    f"{A}/judgments": ("The judgment calls: FP8 KV cache, speculative decoding, KV eviction, "
                       "prefill/decode disaggregation."),
}


def _path(mod: str) -> Path:
    return PKG.joinpath(*mod.split(".")).with_suffix(".py")


def move_files() -> None:
    for room, doc in ROOMS.items():
        init = PKG / room / "__init__.py"
        init.parent.mkdir(parents=True, exist_ok=True)
        if not init.exists():
            init.write_text(f'"""{doc}"""\n')
    for old, new in MOVES.items():
        src, dst = _path(old), _path(new)
        if src.exists() and not dst.exists():
            subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)


NEW_PATHS = set(MOVES.values()) | {room.replace("/", ".") for room in ROOMS}


def _rename(dotted: str) -> str:
    """The new name of ``dotted`` (below ``kvledger.``): its longest prefix that is an old module, moved."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        head = ".".join(parts[:n])
        if head in MOVES:
            return ".".join([MOVES[head], *parts[n:]])
        if head in NEW_PATHS:
            return dotted
    return dotted


def _is_new_import(line: str) -> bool:
    """``from kvledger.P import a, b`` where every ``P.a`` is a module of the new layout."""
    m = re.match(r"\s*from kvledger\.([\w.]+) import ([\w ,]+)$", line)
    if not m:
        return False
    names = [p.strip().partition(" as ")[0].strip() for p in m.group(2).split(",") if p.strip()]
    return bool(names) and all(f"{m.group(1)}.{n}" in NEW_PATHS for n in names)


def _pattern() -> re.Pattern[str]:
    return re.compile(r"\bkvledger\.((?:\w+\.)*\w+)")


def _from_imports(text: str) -> str:
    """``from kvledger.dynamics import fast_path, open_stretch`` → one import per moved module."""
    def fix(m: re.Match[str]) -> str:
        indent, pkg, names = m.group(1), m.group(2), m.group(3)
        out, keep = [], []
        for part in [p.strip() for p in names.split(",") if p.strip()]:
            name, _, alias = part.partition(" as ")
            key = f"{pkg}.{name.strip()}"
            if key in MOVES:
                new = MOVES[key]
                parent, leaf = new.rsplit(".", 1)
                as_ = f" as {alias.strip()}" if alias else (f" as {name.strip()}" if leaf != name.strip() else "")
                out.append(f"{indent}from kvledger.{parent} import {leaf}{as_}")
            else:
                keep.append(part)
        if keep:
            out.insert(0, f"{indent}from kvledger.{pkg} import {', '.join(keep)}")
        return "\n".join(out)
    return re.sub(r"^([ \t]*)from kvledger\.(dynamics|analyses|accounting|ledgers) import ([\w ,]+)$", fix, text,
                  flags=re.M)


def rewrite() -> int:
    pat = _pattern()
    changed = 0
    for top in ("src", "tests", "benchmarks", "tools"):
        for f in (ROOT / top).rglob("*.py"):
            if f.name == "house_move.py":
                continue
            text = f.read_text()
            new = "".join(line if _is_new_import(line) else _from_imports(pat.sub(
                lambda m: "kvledger." + _rename(m.group(1)), line)) for line in text.splitlines(keepends=True))
            for old_pkg in ('"kvledger.dynamics"', '"kvledger.dynamics.engine.request"'):
                new = new.replace(f'resources.files({old_pkg}) / "data"',
                                  'resources.files("kvledger.dynamics.workload") / "data"')
            new = new.replace("kvledger/dynamics/data/", "kvledger/dynamics/workload/data/")
            new = new.replace('"kvledger" / "dynamics" / "data"', '"kvledger" / "dynamics" / "workload" / "data"')
            if new != text:
                f.write_text(new)
                changed += 1
    return changed


def main() -> int:
    if "--rewrite" not in sys.argv:
        move_files()
        data = PKG / D / "data"
        if data.exists() and not (PKG / D / "workload" / "data").exists():
            subprocess.run(["git", "mv", str(data), str(PKG / D / "workload" / "data")], cwd=ROOT, check=True)
    print(f"rewrote {rewrite()} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
