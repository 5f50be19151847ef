"""Start-up and wrap-up of ``kvledger simulate``: the whole process split at the simulation's event loop.

``kvledger simulate meta-llama/Llama-3.1-8B --gpu H100 --trace azure-conv --json`` runs in a child
process whose ``kvledger.dynamics.simulator.run_cluster`` (the event loop) is timed on the wall clock:
**start-up** is process start → the first step (interpreter, imports, option parsing, plan, trace,
engine setup), **wrap-up** is the last step → process exit (the summary: ITL merge and percentiles,
KV usage; JSON output; interpreter exit). Their sum is the part of the whole process that is not
the simulation (issue 10: ≤ 0.2 s). The child is the CLI's own entry point (``kvledger.cli.main.main``);
the timer is installed by an import hook when the engine module loads, so nothing is imported
ahead of the CLI; the package is byte-compiled first, as an installed one is. Best and median of
``--repeat`` runs; on a shared machine best-of-N is the steadier figure.

    python benchmarks/startup_speed.py [--repeat 5]

``sim_speed.py`` prints the same line under its whole-process table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CLI_ARGS = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--json"]

CHILD = r"""
import sys, time
from importlib.machinery import PathFinder

class _TimeLoop:  # wraps engine.run_cluster once kvledger.dynamics.simulator is loaded
    def find_spec(self, name, path=None, target=None):
        if name != "kvledger.dynamics.simulator":
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name, path)
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            loop = module.run_cluster

            def timed(*a, **k):
                sys.stderr.write(f"LOOP_START {time.time():.6f}\n")
                try:
                    return loop(*a, **k)
                finally:
                    sys.stderr.write(f"LOOP_END {time.time():.6f}\n")
            module.run_cluster = timed
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _TimeLoop())
sys.argv = ["kvledger", *sys.argv[1:]]
from kvledger.cli.main import main
main()
"""


def compile_package() -> None:
    """Byte-compile the kvledger sources, as an installed package is (pip compiles on install). Where Python may
    not write bytecode itself (``PYTHONDONTWRITEBYTECODE``, set on this machine) every run would otherwise compile
    all ~90 modules it imports again: about 0.2 s of start-up that no installed copy pays."""
    import compileall

    import kvledger

    compileall.compile_dir(os.path.dirname(kvledger.__file__), quiet=1)


def split_once() -> tuple[float, float, float]:
    """(whole-process wall, start-up, wrap-up) of one child run, s."""
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.time()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, *CLI_ARGS], stdout=subprocess.DEVNULL, stderr=err)
        proc.wait()
        t1 = time.time()
        err.seek(0)
        text = err.read()
    if proc.returncode:
        raise SystemExit(f"kvledger simulate failed:\n{text[-2000:]}")
    marks = dict(line.split() for line in text.splitlines() if line.startswith("LOOP_"))
    return t1 - t0, float(marks["LOOP_START"]) - t0, t1 - float(marks["LOOP_END"])


def outside_simulation_line(repeat: int) -> str:
    """One line: best and median of (start-up + wrap-up), with its two parts at the best run."""
    runs = [split_once() for _ in range(repeat)]
    outside = [s + w for _, s, w in runs]
    i = outside.index(min(outside))
    _, start, wrap = runs[i]
    return (f"   outside the simulation loop: {outside[i]:.3f} s best of {repeat} (median "
            f"{statistics.median(outside):.3f} s): start-up to the first step {start:.3f} s, summary, output and "
            f"exit {wrap:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    compile_package()
    print(f"kvledger {' '.join(CLI_ARGS)} (load average {os.getloadavg()[0]:.2f}):")
    print(outside_simulation_line(args.repeat))


if __name__ == "__main__":
    main()
