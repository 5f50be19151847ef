"""Fit the measured matmul-efficiency curves (``kvledger.accounting.gemm_efficiency.fit_gemm_curve``) and the layer
kernels' times (``kvledger.accounting.layer_kernels.fit_layer_kernels``) from the bundled operator profiles (Vidur's,
LLMServingSim's: ``kvledger.accounting.op_profiles``) and write them, with their errors, to
``src/kvledger/accounting/data/gemm_curves.json`` and ``layer_kernels.json``, the files ``gemm_curve`` and
``layer_kernel_fit`` read at run time (a few milliseconds instead of the fits' 0.3 s and 0.8 s at every start-up).

    python benchmarks/build_gemm_curves.py [--write]

Without ``--write`` it prints each fit's error and whether the bundled files hold the same fits.
tests/accounting/test_gemm_efficiency.py and test_layer_kernels.py check that the bundled files are the fits, float
for float.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "kvledger" / "accounting" / "data" / "gemm_curves.json"
OUT_KERNELS = OUT.with_name("layer_kernels.json")


def _bundle(kind: str, section: str, fit) -> dict:
    """A bundled file's content: ``fit(gpu_id)`` for every GPU the operator profiles cover, under ``section``."""
    from kvledger.accounting.op_profiles import PROFILED_GPU

    return {"kind": kind, "version": 1, "written_by": "python benchmarks/build_gemm_curves.py --write",
            "data": "src/kvledger/accounting/data/profiling/vidur/compute/<gpu>/*/mlp_median.csv "
                    "(microsoft/vidur, MIT) and data/profiling/llmservingsim/perf/<hw>/*/*/bf16/tp*/dense.csv "
                    "(casys-kaist/LLMServingSim, MIT)",
            section: {g: asdict(fit(g)) for g in sorted(PROFILED_GPU)}}


def curves() -> dict:
    """The curves' file: every curve Vidur's profiles give, by catalog GPU id."""
    from kvledger.accounting.gemm_efficiency import fit_gemm_curve

    return _bundle("kvledger-gemm-curves", "curves", fit_gemm_curve)


def kernel_fits() -> dict:
    """The layer kernels' file: every fit Vidur's profiles give, by catalog GPU id."""
    from kvledger.accounting.layer_kernels import fit_layer_kernels

    return _bundle("kvledger-layer-kernels", "fits", fit_layer_kernels)


def _write_or_compare(path: Path, d: dict, write: bool) -> None:
    text = json.dumps(d, indent=1) + "\n"
    same = path.exists() and path.read_text(encoding="utf-8") == text
    if write:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    else:
        print(f"{path.name}: " + ("the bundled file holds this fit" if same else "differs: run with --write"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write the bundled file")
    a = ap.parse_args()
    d = curves()
    for g, c in d["curves"].items():
        print(f"{g}: {len(c['grid'])} grid points {c['grid'][0]}–{c['grid'][-1]} tokens, {c['num_points']} points, "
              f"fit {c['fit_abs']:.4f} / leave-one-shape-out {c['loso_abs']:.4f} of peak")
    _write_or_compare(OUT, d, a.write)
    k = kernel_fits()
    for g, f in k["fits"].items():
        print(f"{g}: layer kernels from {f['num_rows']} rows of {len(f['shapes'])} shapes, per-layer sum off by "
              f"{f['fit_median']:.1%} (median), leaving a shape out {f['loso_median']:.1%} (90th percentile "
              f"{f['loso_p90']:.1%}; bias at ≤ 256 tokens {f['loso_bias_decode']:+.1%})")
    _write_or_compare(OUT_KERNELS, k, a.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
