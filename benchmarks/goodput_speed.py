"""Speed check: goodput over one million request records (target ≤ 3 s), and reading a one-million-request
``vllm bench serve --save-detailed`` file plus goodput on it (target ≤ 5 s together).

Builds a seeded, real-shaped run of N requests (Poisson arrivals at 200 req/s, lognormal
TTFT, 1–512 output tokens, per-token decode times) as ``RunRecords`` — the structure
every reader and the simulator produce — then times ``goodput`` under a TTFT+TPOT+E2E SLO
and under an ITL SLO (which also concatenates every request's chunk times). With
``--file`` it also writes the run as a kvledger records file and times reading it back. With
``--vllm-file`` it writes the same run as a vLLM ``--save-detailed`` result (one JSON object: the
aggregates, then ``input_lens``, ``output_lens``, ``ttfts``, ``itls`` (lists of gaps), ``latencies``,
``start_times``, ``generated_texts`` and ``errors``, all in seconds: ``vllm/benchmarks/serve.py``) and times
``read_run`` on it and goodput on what was read.

    python benchmarks/goodput_speed.py [--n 1000000] [--chunks 16] [--file] [--vllm-file] [--skip-records]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from kvledger.evidence import read_run, write_records
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def build(n: int, chunks: int, seed: int = 0) -> RunRecords:
    """A seeded run of n requests; each successful request carries ``chunks`` chunk times (0 = none)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / 200.0, n))
    ttft = rng.lognormal(np.log(0.15), 0.6, n)
    n_out = rng.integers(1, 513, n)
    tpot = rng.lognormal(np.log(0.03), 0.3, n)
    finish = arrival + ttft + tpot * (n_out - 1)
    n_in = rng.integers(16, 4096, n)
    failed = rng.random(n) < 0.01
    recs = []
    for i in range(n):
        if failed[i]:
            recs.append(RequestRecord(str(i), float(arrival[i]), int(n_in[i]), 0, error="timeout"))
            continue
        ct = np.linspace(arrival[i] + ttft[i], finish[i], chunks) if chunks else None
        recs.append(RequestRecord(str(i), float(arrival[i]), int(n_in[i]), int(n_out[i]), float(arrival[i] + ttft[i]),
                                  float(finish[i]), ct))
    return RunRecords(recs, RunMetadata("benchmarks/goodput_speed.py", "synthetic"))


def write_vllm_detailed(path: Path, n: int, chunks: int, seed: int = 0) -> int:
    """Write a seeded n-request vLLM --save-detailed file (1% failed: ttft 0, output 0, no gaps, an error text);
    returns bytes."""
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.exponential(1 / 200.0, n)) + 1000.0  # perf_counter clock, not 0
    ttft = rng.lognormal(np.log(0.15), 0.6, n)
    n_out = rng.integers(chunks, 513, n)
    gaps = rng.lognormal(np.log(0.03), 0.3, (n, max(chunks - 1, 0))) * (n_out[:, None] - 1) / max(chunks - 1, 1)
    n_in = rng.integers(16, 4096, n)
    failed = rng.random(n) < 0.01
    ttft[failed], n_out[failed] = 0.0, 0
    lat = ttft + gaps.sum(axis=1)
    lat[failed] = 0.5
    k = gaps.shape[1]
    flat = list(map(repr, gaps.round(6).ravel().tolist()))
    rows = ["[]" if failed[i] else "[" + ",".join(flat[i * k:(i + 1) * k]) + "]" for i in range(n)]
    floats = lambda a: ",".join(map(repr, np.round(a, 6).tolist()))  # noqa: E731
    head = {"date": "20261201-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": n,
            "request_rate": 200.0, "burstiness": 1.0, "max_concurrency": None,
                "duration": float(start[-1] - start[0] + lat[-1]),
            "completed": int(n - failed.sum()), "failed": int(failed.sum()), "total_input_tokens": int(n_in.sum()),
            "total_output_tokens": int(n_out.sum()), "request_throughput": 199.0, "request_goodput": None}
    with open(path, "w") as fh:
        fh.write(json.dumps(head)[:-1])
        fh.write(', "input_lens": [' + ",".join(map(str, n_in.tolist())) + "]")
        fh.write(', "output_lens": [' + ",".join(map(str, n_out.tolist())) + "]")
        fh.write(', "ttfts": [' + floats(ttft) + "]")
        fh.write(', "itls": [' + ",".join(rows) + "]")
        fh.write(', "latencies": [' + floats(lat) + "]")
        fh.write(', "start_times": [' + floats(start) + "]")
        fh.write(', "generated_texts": [' + ",".join(['""'] * n) + "]")
        fh.write(', "errors": [' + ",".join(np.where(failed, '"timeout"', '""').tolist()) + "]}")
    return path.stat().st_size


def timed(label: str, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<52s} {dt:7.3f} s")
    return out, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--chunks", type=int, default=16, help="chunk times per successful request")
    ap.add_argument("--file", action="store_true", help="also write and read back a kvledger records file")
    ap.add_argument("--vllm-file", action="store_true", help="also read a vLLM --save-detailed file of --n requests")
    ap.add_argument("--skip-records", action="store_true", help="skip the in-memory RequestRecords part")
    ap.add_argument("--vllm-path", help="reuse (or write once) the vLLM file at this path")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many reads of the vLLM file")
    args = ap.parse_args()
    if args.vllm_file:
        read_vllm(args.n, args.chunks, args.vllm_path, args.repeat)
    if args.skip_records:
        return
    run, _ = timed(f"build {args.n:,} RequestRecords (not part of goodput)", lambda: build(args.n, args.chunks))
    slo = parse_slo("ttft=300ms,tpot=40ms,e2e=20s")
    g, dt = timed(f"goodput, {slo.describe()}", lambda: goodput(run, slo))
    print(f"  → {g.num_good:,} good of {g.num_requests:,} ({g.attainment:.1%}); goodput {g.goodput_req_per_s:.2f} "
          f"req/s; "
          f"multiplier {g.effective_cost_multiplier:.2f}×")
    g2, dt2 = timed("goodput, itl=100ms (every gap, all chunk times)", lambda: goodput(run, parse_slo("itl=100ms")))
    print(f"  → {g2.num_good:,} good")
    target = 3.0
    print(f"target ≤ {target:.1f} s per goodput call: {'met' if max(dt, dt2) <= target else 'MISSED'} "
          f"(worst {max(dt, dt2):.3f} s = {max(dt, dt2) / target:.0%} of the budget)")
    if args.file:
        with tempfile.TemporaryDirectory() as d:
            p, _ = timed("write records.json", lambda: write_records(run, Path(d) / "records.json"))
            print(f"  → {p.stat().st_size / 1e6:,.0f} MB")
            back, _ = timed("read records.json (JSON parse + validation)", lambda: read_run(p))
            timed("goodput on the records read back", lambda: goodput(back, slo))


def read_vllm(n: int, chunks: int, path: str | None, repeat: int) -> None:
    """Write a vLLM --save-detailed file of n requests (or reuse ``path``), then time reading it and goodput on it, best
    of ``repeat`` (wall and CPU seconds; the target, ≤ 5 s together, is wall time on an unloaded machine)."""
    slo = parse_slo("ttft=300ms,tpot=40ms,e2e=20s")
    with tempfile.TemporaryDirectory() as d:
        p = Path(path) if path else Path(d) / "vllm-detailed.json"
        if not p.exists():
            timed(f"write a {n:,}-request vLLM --save-detailed file (not timed)", lambda: write_vllm_detailed(p, n,
                chunks))
        print(f"  {p.name}: {p.stat().st_size / 1e6:,.0f} MB")
        best = None
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            run = read_run(p)
            c1, t1 = time.process_time(), time.perf_counter()
            g = goodput(run, slo)
            c2, t2 = time.process_time(), time.perf_counter()
            cur = (t1 - t0, t2 - t1, c1 - c0, c2 - c1)
            best = cur if best is None or sum(cur[:2]) < sum(best[:2]) else best
        print(f"read_run (parse + validate + columns)  {best[0]:7.3f} s wall  {best[2]:7.3f} s CPU   "
              f"({len(run.records):,} requests)")
        print(f"goodput, {slo.describe():<29s} {best[1]:7.3f} s wall  {best[3]:7.3f} s CPU")
        print(f"  → {g.num_good:,} good of {g.num_requests:,} ({g.attainment:.1%}); goodput {g.goodput_req_per_s:.2f} "
              f"req/s")
        g2, _ = timed("goodput, itl=100ms (every gap)", lambda: goodput(run, parse_slo("itl=100ms")))
        print(f"  → {g2.num_good:,} good")
        total, cpu = best[0] + best[1], best[2] + best[3]
        print(f"reading + goodput, best of {repeat}: {total:.3f} s wall, {cpu:.3f} s CPU; target ≤ 5.0 s: "
              f"{'met' if total <= 5.0 else 'MISSED'} ({total / 5.0:.0%} of the budget)")


if __name__ == "__main__":
    main()
