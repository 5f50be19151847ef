"""Fit the measured matmul-efficiency curves (``kvledger.accounting.gemm_efficiency.fit_gemm_curve``) from the bundled
Vidur operator profiles and write them, with their errors, to ``src/kvledger/accounting/data/gemm_curves.json``, the
file ``gemm_curve`` reads at run time (a few milliseconds instead of the fit's 0.3 s at every start-up).

    python benchmarks/build_gemm_curves.py [--write]

Without ``--write`` it prints each curve's grid, error and whether the bundled file holds the same fit.
tests/accounting/test_gemm_efficiency.py checks that the bundled file is the fit, float for float.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "kvledger" / "accounting" / "data" / "gemm_curves.json"


def curves() -> dict:
    """The file's content: every curve Vidur's profiles give, by catalog GPU id."""
    from kvledger.accounting.gemm_efficiency import VIDUR_GPU, fit_gemm_curve

    return {"kind": "kvledger-gemm-curves", "version": 1,
            "written_by": "python benchmarks/build_gemm_curves.py --write",
            "data": "src/kvledger/accounting/data/profiling/vidur/compute/<gpu>/*/mlp_median.csv "
                    "(microsoft/vidur, MIT)",
            "curves": {g: asdict(fit_gemm_curve(g)) for g in sorted(VIDUR_GPU)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write the bundled file")
    a = ap.parse_args()
    d = curves()
    for g, c in d["curves"].items():
        print(f"{g}: {len(c['grid'])} grid points {c['grid'][0]}–{c['grid'][-1]} tokens, {c['num_points']} points, "
              f"fit {c['fit_abs']:.4f} / leave-one-shape-out {c['loso_abs']:.4f} of peak")
    text = json.dumps(d, indent=1) + "\n"
    same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
    if a.write:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
    else:
        print("the bundled file holds this fit" if same else "the bundled file differs: run with --write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
