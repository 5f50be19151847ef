"""Wall time of the issue's `kvledger report` command, interpreter start included (target: < 60 s), and what it wrote.

Runs the installed console script N times in fresh processes into a temporary folder and prints
min/median/max, the ratio to the target, the HTML size and the figure count, plus the CPU time of
the child (less sensitive than wall time to other processes on a shared machine).
Usage: python benchmarks/report_speed.py [N]
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

TARGET_S = 60.0
ARGS = ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--slo", "ttft=200ms,tpot=50ms",
        "--api", "OpenAI:gpt-4.1"]


from floor import floor_line, in_floor_steps, step_floor_s  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    exe = shutil.which("kvledger") or sys.exit("kvledger is not installed (pip install -e .)")
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(n):
            out = Path(d) / f"r{i}.html"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([exe, *ARGS, "--out", str(out)], check=True, stdout=subprocess.DEVNULL, env={**os.environ,
                "TERM": "dumb"})
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        html = (Path(d) / "r0.html").read_text(encoding="utf-8")
        same = all((Path(d) / f"r{i}.html").read_text(encoding="utf-8") == html for i in range(n))
    figs = len(re.findall(r'<section class="fig"', html))
    med = statistics.median(walls)
    print(f"kvledger {' '.join(ARGS)}")
    print(f"wall: min {min(walls):.1f} s  median {med:.1f} s  max {max(walls):.1f} s  median/target "
          f"{med / TARGET_S:.2f}  "
          f"(CPU min {min(cpus):.1f} s)")
    floor = step_floor_s()
    print(f"{floor_line(floor)}; median wall = {in_floor_steps(med, floor)}")
    print(f"HTML {len(html.encode()) / 1024:,.0f} KiB, {figs} figures, {html.count('<svg')} inline SVGs; "
          f"byte-identical across runs: {same}")


if __name__ == "__main__":
    main()
