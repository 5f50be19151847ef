"""Machine instructions of a whole `kvledger simulate` process, counted by valgrind: a speed figure host load cannot
move.

Wall times on a shared machine drift with the other work on its host (``sim_speed.py`` has printed
0.67 s and 1.26 s for the same code within an hour). The number of instructions the process
executes does not: valgrind's cachegrind tool counts them (``I refs``) whatever else runs. This
script counts them for ``kvledger simulate meta-llama/Llama-3.1-8B --gpu H100 --trace azure-conv
--json`` (the run of ``sim_speed.py``'s first table: interpreter, imports, trace, plan, simulation,
output), for this checkout and, with ``--base REV``, for another git revision of this repository
checked out beside it, and prints both and their ratio. Both trees are byte-compiled first, as an
installed package is. Under valgrind the process runs about 30 times slower (a minute or two).

    python benchmarks/sim_instructions.py [--base REV] [--num-requests N]

Needs ``valgrind`` on the PATH (Debian: ``apt-get install valgrind``); without it the script says so
and exits with status 2.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = ["-m", "kvledger.cli.main", "simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv",
       "--json"]


def count(src: Path, extra: list[str]) -> int:
    """Instructions of the simulate process run from the package under ``src`` (cachegrind's ``I refs``)."""
    compileall.compile_dir(str(src), quiet=1)
    env = dict(os.environ, PYTHONPATH=str(src))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, *CLI, *extra], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"simulate under valgrind failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    m = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="a git revision to count too (checked out in a temporary worktree)")
    ap.add_argument("--num-requests", type=int, help="replay only the first N requests of the trace")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("sim_instructions: valgrind is not on the PATH (Debian: apt-get install valgrind)", file=sys.stderr)
        raise SystemExit(2)
    extra = [] if args.num_requests is None else ["--num-requests", str(args.num_requests)]
    what = f"first {args.num_requests:,} requests" if args.num_requests else "19,366 requests"
    print(f"kvledger simulate meta-llama/Llama-3.1-8B --gpu H100 --trace azure-conv --json ({what}), whole process:")
    here = count(ROOT / "src", extra)
    print(f"   this checkout{'':<14}{here:>16,} instructions")
    if args.base:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "base"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), args.base],
                           check=True)
            try:
                base = count(tree / "src", extra)
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
        print(f"   {args.base[:24]:<27}{base:>16,} instructions")
        print(f"   ratio base / this checkout: {base / here:.2f}")


if __name__ == "__main__":
    main()
