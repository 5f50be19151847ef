"""Wall time of `kvledger plan` on a bundled model, interpreter start included (target: < 0.5 s).

Runs the installed console script N times in fresh processes and prints min/median/max and the ratio
to the target. Usage: python benchmarks/plan_speed.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.5
CASES = [
    ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM"],
    ["plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8"],
    ["plan", "openai/gpt-oss-20b", "--gpu", "H100", "--json"],
]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    exe = shutil.which("kvledger") or sys.exit("kvledger is not installed (pip install -e .)")
    for args in CASES:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run([exe, *args], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"kvledger {' '.join(args):55s} min {min(times):.3f} s  median {med:.3f} s  max {max(times):.3f} s  "
              f"median/target {med / TARGET_S:.2f}")


if __name__ == "__main__":
    main()
