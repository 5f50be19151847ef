"""What the error bands add to a simulate call: the band lookup (``prediction_bands``) and the knee check that may
withhold the TTFT band (``knee_withheld``: each quarter of the arrivals' mean TTFT) against the simulation itself.

    python benchmarks/band_overhead.py

Prints both wall times and the ratio (the issue's goal: under 5%). Wall-clock on a shared machine: noisy.
"""

from __future__ import annotations

import time


def main() -> None:
    from kvledger.analyses.serving.prediction_bands import knee_withheld, prediction_bands
    from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
    from kvledger.dynamics.simulator import simulate
    from kvledger.ledgers import error_band

    t0 = time.perf_counter()
    setup = prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=2000))
    res = simulate(setup.workload, setup.config, setup.cost)
    sim_s = time.perf_counter() - t0
    error_band._table.cache_clear()  # a cold lookup: the first call in a process reads the table
    t1 = time.perf_counter()
    bands, _ = knee_withheld(prediction_bands(setup, res.summary.to_dict()), res.records)
    band_s = time.perf_counter() - t1
    print(f"simulate (prepare + 2,000 requests): {sim_s:.3f} s; bands (cold, {len(bands)} figures): "
          f"{band_s * 1e3:.2f} ms; ratio {band_s / sim_s:.2%} (goal < 5%)")


if __name__ == "__main__":
    main()
