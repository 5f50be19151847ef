"""Wall time of the issue's `kvledger report` command, interpreter start included (target: < 3 s), and what it wrote.

Runs the installed console script in fresh processes into a temporary folder, with the on-disk store of
simulations and report HTML (kvledger.analyses.serving.sim_cache) in a fresh temporary folder too:

* ``no store``: ``KVLEDGER_NO_CACHE=1`` (every simulation and figure computed: a first request);
* ``1 process``: the same with ``KVLEDGER_REPORT_WORKERS=1`` (no forked worker, kvledger/report/report_pool.py);
* ``cold``: the first run with an empty store (computes everything, fills the store);
* ``warm``: the runs after it (an identical request: simulations and HTML read back).

Prints min/median/max wall and min/median CPU time of each (the report and its worker together), the ratio to
the target, the same figures in floor steps (benchmarks/floor.py, comparable across machines and loads), the load
average, how many simulations each kind of run ran and reused (counted in-process, sim_cache.stats()), the HTML size
and figure count, and whether every run wrote the same bytes.
Usage: python benchmarks/report_speed.py [N [F]]   (N warm runs, default 3; F first-request pairs, default 1,
interleaved: with the worker, in one process)
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 3.0
MODEL, GPU, SLO, API = "meta-llama/Llama-3.1-8B", "H100", "ttft=200ms,tpot=50ms", "OpenAI:gpt-4.1"
ARGS = ["report", MODEL, "--gpu", GPU, "--trace", "azure-conv", "--slo", SLO, "--api", API]


from floor import floor_line, in_floor_steps, step_floor_s  # noqa: E402


def _run(exe: str, out: Path, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([exe, *ARGS, "--out", str(out)], check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _counts(store: str) -> list[tuple[int, int]]:
    """(simulations run, reused) of a report built twice in this process on an empty store."""
    os.environ.pop("KVLEDGER_NO_CACHE", None)
    os.environ["KVLEDGER_CACHE_DIR"] = store
    from kvledger.analyses.serving import sim_cache
    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data

    out = []
    for _ in range(2):
        a = sim_cache.stats()
        build_report_data(ReportRequest(model=MODEL, gpu=GPU, slo=SLO, api=API))
        b = sim_cache.stats()
        out.append((b["run"] - a["run"], b["reused"] - a["reused"]))
    return out


def _line(name: str, walls: list[float], cpus: list[float], floor: float) -> str:
    med = statistics.median(walls)
    return (f"{name:<9} wall min {min(walls):.2f} s  median {med:.2f} s  max {max(walls):.2f} s  median/target "
            f"{med / TARGET_S:.2f}  ({in_floor_steps(med, floor)}; CPU min {min(cpus):.2f} s median "
            f"{statistics.median(cpus):.2f} s)")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    exe = shutil.which("kvledger") or sys.exit("kvledger is not installed (pip install -e .)")
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ("no store", "1 process", "cold", "warm")}
    with tempfile.TemporaryDirectory() as d:
        base = {**os.environ, "TERM": "dumb"}
        base.pop("KVLEDGER_NO_CACHE", None)
        store = {**base, "KVLEDGER_CACHE_DIR": f"{d}/store"}
        one = {**base, "KVLEDGER_NO_CACHE": "1", "KVLEDGER_REPORT_WORKERS": "1"}
        runs = [("no store", {**base, "KVLEDGER_NO_CACHE": "1"}), ("1 process", one)] * first
        runs += [("cold", store)] + [("warm", store)] * n
        for i, (kind, env) in enumerate(runs):
            w, c = _run(exe, Path(d) / f"r{i}.html", env)
            times[kind][0].append(w)
            times[kind][1].append(c)
        html = (Path(d) / "r0.html").read_text(encoding="utf-8")
        same = all((Path(d) / f"r{i}.html").read_text(encoding="utf-8") == html for i in range(len(runs)))
        (cold_run, cold_reused), (warm_run, warm_reused) = _counts(f"{d}/counts")
    floor = step_floor_s()
    print(f"kvledger {' '.join(ARGS)}")
    print(floor_line(floor))
    for kind, (walls, cpus) in times.items():
        print(_line(kind, walls, cpus, floor))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times above ~1 CPU per core are "
          f"queueing: compare CPU and floor steps)")
    print(f"simulations per report: cold store {cold_run} run, {cold_reused} reused; identical request again "
          f"{warm_run} run, {warm_reused} reused (the capacity run is also the sweep's 1.0× point)")
    figs = len(re.findall(r'<section class="fig"', html))
    print(f"HTML {len(html.encode()) / 1024:,.0f} KiB, {figs} figures, {html.count('<svg')} inline SVGs; "
          f"byte-identical across runs (no store, 1 process, cold, warm): {same}")


if __name__ == "__main__":
    main()
