"""Fuzz every input kind and every command with many seeded cases, and count what the user would have seen.

The cases are those of ``tests/fuzz/cases.py`` (the test suite runs a few hundred per kind): mutated real benchmark
files of every format read by every reader, mutated vLLM and other engines' logs, mutated price tables, and random
flag combinations for every command (valid, edge and invalid values). Each case runs in this process with a
per-case time limit; the outcome is ok, clean error (exit 2 with a message, or 3 for plan's "does not fit"),
traceback, impossible result (broken strict JSON or a violated invariant) or hang (over the limit). The first few
cases of each bad outcome are printed with their seeds, so any one can be replayed:

    python benchmarks/fuzz.py [--cases 10000] [--timeout 30] [--kinds "benchmark file,command line"] [--start 0]
    python benchmarks/fuzz.py --replay "command line:123"
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

from cases import KINDS, Impossible, run_case  # noqa: E402

# share of the cases per kind: files and logs are fast (milliseconds), commands slower (a simulation per case)
SHARES = {"benchmark file": 0.4, "vllm log": 0.15, "price table": 0.08, "command line": 0.12, "trace file": 0.1,
          "model config": 0.1, "gpu file": 0.05}
OUTCOMES = ("ok", "clean error", "traceback", "impossible result", "hang")


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def one(kind: str, seed: int, timeout_s: int) -> tuple[str, str]:
    """(outcome, detail) of one case."""
    with tempfile.TemporaryDirectory() as d:
        signal.alarm(timeout_s)
        try:
            return run_case(kind, seed, Path(d)), ""
        except Hang:
            return "hang", f"over {timeout_s} s"
        except Impossible as err:
            return "impossible result", str(err)
        except Exception as err:  # noqa: BLE001 - counting what escapes is the point of this script
            return "traceback", "".join(traceback.format_exception_only(err)).strip() + " @ " + traceback.extract_tb(
                err.__traceback__
            )[-1].filename.split("src/")[-1] + f":{traceback.extract_tb(err.__traceback__)[-1].lineno}"
        finally:
            signal.alarm(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--timeout", type=int, default=30, help="seconds per case before it counts as a hang")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--replay", help="KIND:SEED: run one case and show its traceback")
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    if args.replay:
        kind, seed = args.replay.rsplit(":", 1)
        with tempfile.TemporaryDirectory() as d:
            print(run_case(kind, int(seed), Path(d)))
        return
    kinds = [k.strip() for k in args.kinds.split(",")]
    total_share = sum(SHARES[k] for k in kinds)
    plan = {k: max(1, round(args.cases * SHARES[k] / total_share)) for k in kinds}
    counts: dict[str, Counter] = {k: Counter() for k in kinds}
    examples: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for kind in kinds:
        tk = time.perf_counter()
        for seed in range(args.start, args.start + plan[kind]):
            outcome, detail = one(kind, seed, args.timeout)
            counts[kind][outcome] += 1
            if outcome not in ("ok", "clean error"):
                ex = examples.setdefault(outcome, [])
                if len(ex) < 12:
                    ex.append(f"{kind}:{seed}  {detail[:300]}")
        print(f"{kind:<16s} {plan[kind]:>6,} cases in {time.perf_counter() - tk:7.1f} s: "
              + ", ".join(f"{o} {counts[kind][o]:,}" for o in OUTCOMES), flush=True)
    total = sum(counts.values(), Counter())
    print(f"{'all':<16s} {sum(plan.values()):>6,} cases in {time.perf_counter() - t0:7.1f} s: "
          + ", ".join(f"{o} {total[o]:,}" for o in OUTCOMES))
    for outcome, ex in examples.items():
        print(f"\n{outcome} (first {len(ex)}; replay with --replay KIND:SEED):")
        for e in ex:
            print("  " + e)
    bad = total["traceback"] + total["impossible result"] + total["hang"]
    print(f"\n{'PASS' if bad == 0 else 'FAIL'}: {bad} tracebacks, impossible results or hangs in "
          f"{sum(plan.values()):,} cases")


if __name__ == "__main__":
    main()
